"""Every commit ends in a final, reported state; input is refused where it enters (issue 13).

A store failure is modelled by an interceptor on the transaction's row
transactions: ``before`` raising means the request never reached the store,
``after`` raising means the store applied it and the reply was lost.
"""
import math

import pytest

from percolator_ref import (CommitOutcomeUnknown, Step, StoreUnavailable, TransactionClosed)
from percolator_ref.model import MAX_TIMESTAMP
from percolator_ref.interceptors import attach

from helpers import all_locks, fresh_view


class StoreFails:
    """Raise StoreUnavailable at ``step``: before it applies, or after (reply lost)."""

    def __init__(self, step, when="before"):
        self.step, self.when, self.fired = step, when, False

    def check(self, rt):
        if rt.step == self.step and not self.fired:
            self.fired = True
            raise StoreUnavailable(f"store down at {rt.step}")

    def before(self, rt):
        if self.when == "before":
            self.check(rt)

    def after(self, rt):
        if self.when == "after":
            self.check(rt)


def transfer(c, fault):
    t = c.begin()
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    attach(t.session, fault)
    return t


def test_failure_at_the_commit_point_is_unknown_then_decided_by_the_primary(make_cluster):
    c = make_cluster()
    t = transfer(c, StoreFails(Step.COMMIT_PRIMARY, "before"))
    with pytest.raises(CommitOutcomeUnknown, match="outcome"):
        t.commit()
    with pytest.raises(TransactionClosed):
        t.commit()
    assert t.status == "unknown"
    assert t.outcome() is False               # the primary lock was still there: rolled back
    assert fresh_view(c) == {} and all_locks(c) == []


def test_reply_lost_after_the_commit_point_applied_is_decided_as_committed(make_cluster):
    c = make_cluster()
    t = transfer(c, StoreFails(Step.COMMIT_PRIMARY, "after"))
    with pytest.raises(CommitOutcomeUnknown):
        t.commit()
    assert t.outcome() is True and t.commit_ts is not None
    assert fresh_view(c) == {("Bob", "bal"): 3, ("Joe", "bal"): 9}


def test_failure_before_the_commit_point_aborts(make_cluster):
    c = make_cluster()
    t = transfer(c, StoreFails(Step.PREWRITE_SECONDARY))
    assert t.commit() is False and t.status == "aborted" and t.commit_ts is None
    assert t.outcome() is False
    assert fresh_view(c) == {} and all_locks(c) == []      # a reader rolled the primary back


def test_failure_after_the_commit_point_stands_committed(make_cluster):
    c = make_cluster()
    t = transfer(c, StoreFails(Step.COMMIT_SECONDARY))
    assert t.commit() is True and t.status == "committed"
    with pytest.raises(TransactionClosed):
        t.commit()
    assert fresh_view(c) == {("Bob", "bal"): 3, ("Joe", "bal"): 9}   # rolled forward


def test_outcome_of_an_open_transaction_is_refused(make_cluster):
    t = make_cluster().begin()
    with pytest.raises(ValueError, match="commit first"):
        t.outcome()


@pytest.mark.parametrize("client, error", [(5, TypeError), ("", ValueError), (["w"], TypeError),
                                           ("a\x00b", ValueError), ("\ud800", ValueError)])
def test_begin_checks_the_client_name(make_cluster, client, error):
    c = make_cluster()
    with pytest.raises(error, match="client"):
        c.begin(client=client)
    assert c.begin().start_ts == 1            # the refused begin took no timestamp


@pytest.mark.parametrize("row, column, value, argument", [
    ("a\x00b", "c", 1, "row"), ("r", "c\x00", 1, "column"), ("\udc80", "c", 1, "row"),
    ("r", "c", "x\ud800y", "value"), ("r", "c", 10 ** 4300, "value"), ("r", "c", -10 ** 4300, "value")],
    ids=["nul-row", "nul-column", "surrogate-row", "surrogate-value", "huge-int", "huge-negative-int"])
def test_set_refuses_what_some_store_cannot_hold(make_cluster, row, column, value, argument):
    c = make_cluster()
    t = c.begin()
    t.set("ok", "c", 1)
    with pytest.raises((TypeError, ValueError), match=argument):
        t.set(row, column, value)
    assert t.commit() is True                 # the refused set left the transaction whole
    assert fresh_view(c) == {("ok", "c"): 1}


def test_the_largest_int_a_store_must_hold_round_trips(make_cluster):
    c = make_cluster()
    t = c.begin()
    big = 10 ** 4300 - 1
    t.set("r", "c", big)
    t.set("r", "f", math.inf)
    assert t.commit()
    assert fresh_view(c) == {("r", "c"): big, ("r", "f"): math.inf}


@pytest.mark.parametrize("kwargs, error, argument", [
    ({"lock_ttl": math.nan}, ValueError, "lock_ttl"), ({"lock_ttl": math.inf}, ValueError, "lock_ttl"),
    ({"lock_ttl": 0}, ValueError, "lock_ttl"), ({"lock_ttl": "10"}, TypeError, "lock_ttl"),
    ({"seed": "x"}, TypeError, "seed"), ({"seed": 1.5}, TypeError, "seed"),
    ({"record_history": 1}, TypeError, "record_history"),
    ({"first_timestamp": 0}, ValueError, "first_timestamp"),
    ({"first_timestamp": MAX_TIMESTAMP + 1}, ValueError, "first_timestamp"),
    ({"first_timestamp": True}, TypeError, "first_timestamp")])
def test_cluster_arguments_are_checked_where_they_enter(kwargs, error, argument):
    from percolator_ref import Cluster
    with pytest.raises(error, match=argument):
        Cluster(**kwargs)


def test_an_exhausted_oracle_aborts_before_the_commit_point_and_leaves_no_lock(make_cluster):
    c = make_cluster(first_timestamp=MAX_TIMESTAMP)
    t = c.begin()
    assert t.start_ts == MAX_TIMESTAMP
    t.set("Bob", "bal", 1)
    assert t.commit() is False and t.status == "aborted" and t.commit_ts is None
    assert all_locks(c) == []
    with pytest.raises(StoreUnavailable, match="MAX_TIMESTAMP"):
        c.begin()


def test_status_and_phase_are_enums_that_still_compare_as_strings():
    from percolator_ref import Cluster, CommitPhase, ManualClock, TxStatus
    cluster = Cluster(clock=ManualClock())
    t = cluster.begin()
    assert t.status is TxStatus.OPEN and t.phase is CommitPhase.PREWRITE
    t.set("a", "v", 1)
    assert t.commit()
    assert t.status is TxStatus.COMMITTED and t.status == "committed"     # notebooks compare strings
    assert t.phase is CommitPhase.SECONDARIES and t.phase == "secondaries"
    assert cluster.history.records[-1].status is TxStatus.COMMITTED
