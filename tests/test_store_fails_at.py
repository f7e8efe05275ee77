"""faults.StoreFailsAt: the store fails at one step; how each commit ends (API.md).

Before the commit point the commit aborts, after it the commit stands, and at
it the outcome is unknown (CommitOutcomeUnknown) until ``outcome()`` asks the
primary. A failure *before* the commit-primary row transaction leaves the
primary locked (outcome: not committed); one *after* it applied (the reply
lost) leaves the write record (outcome: committed).
"""
import pytest

from percolator_ref import CommitOutcomeUnknown, TransactionClosed
from percolator_ref.faults import StoreFailsAt
from percolator_ref.viz import figure4_setup
from percolator_ref.interceptors import attach


def transfer_cluster(make_cluster, fault):
    cluster = make_cluster(first_timestamp=5)
    figure4_setup(cluster)                    # Bob 10, Joe 2 (start 5, commit 6)
    attach(cluster.bigtable, fault)
    t = cluster.begin()                       # start 7
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    return cluster, t


def balances(cluster):
    reader = cluster.begin()
    return reader.get("Bob", "bal"), reader.get("Joe", "bal")


@pytest.mark.parametrize("applied, committed, seen", [(False, False, (10, 2)),
                                                      (True, True, (3, 9))])
def test_a_store_failing_at_the_commit_point_leaves_the_outcome_to_the_primary(
        make_cluster, applied, committed, seen):
    fault = StoreFailsAt("commit-primary", applied=applied)
    cluster, t = transfer_cluster(make_cluster, fault)
    with pytest.raises(CommitOutcomeUnknown, match="primary Bob.bal"):
        t.commit()
    assert t.status == "unknown" and fault.failures == 1
    with pytest.raises(TransactionClosed):
        t.commit()
    assert t.outcome() is committed
    assert t.outcome() is committed                       # final: asking again agrees
    if committed:
        assert t.commit_ts == 8
    assert balances(cluster) == seen
    assert cluster.check_history().ok


def test_a_store_failing_at_a_prewrite_aborts_and_leaves_nothing_visible(make_cluster):
    cluster, t = transfer_cluster(make_cluster, StoreFailsAt("prewrite-secondary"))
    assert t.commit() is False
    assert t.status == "aborted" and t.commit_ts is None
    assert balances(cluster) == (10, 2)


def test_a_store_failing_after_the_commit_point_keeps_the_commit(make_cluster):
    cluster, t = transfer_cluster(make_cluster, StoreFailsAt("commit-secondary"))
    assert t.commit() is True and t.commit_ts == 8
    assert balances(cluster) == (3, 9)                    # the reader rolls Joe forward


def test_the_store_fails_only_as_often_as_asked_and_only_for_the_named_client(make_cluster):
    fault = StoreFailsAt("commit-primary", client="T9")
    cluster, t = transfer_cluster(make_cluster, fault)
    assert t.commit() is True and fault.failures == 0      # T7 is not T9
    again = cluster.begin()                                 # T9
    again.set("Bob", "bal", 4)
    with pytest.raises(CommitOutcomeUnknown):
        again.commit()
    last = cluster.begin()
    last.set("Joe", "bal", 1)
    assert fault.failures == 1 and last.commit() is True    # times=1: the store is back


@pytest.mark.parametrize("kwargs, error, match", [
    ({"step": "commit"}, ValueError, "step"),
    ({"step": "commit-primary", "applied": "yes"}, TypeError, "applied"),
    ({"step": "commit-primary", "times": 0}, ValueError, "times"),
    ({"step": "commit-primary", "times": True}, ValueError, "times"),
])
def test_store_fails_at_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        StoreFailsAt(**kwargs)
