"""How a commit ends: every commit ends in a final, truthful state (API.md).

- A store failure (an interceptor on the transaction's row transactions:
  ``before`` raising means the request never reached the store, ``after``
  raising means the store applied it and the reply was lost, and
  :class:`faults.StoreFailsAt`): before the commit point the commit aborts,
  after it the commit stands, at it the outcome is unknown
  (``CommitOutcomeUnknown``) until ``outcome()`` asks the primary.
- An exception of any kind (KeyboardInterrupt, SystemExit, an interceptor
  raising) before or after any row transaction of a commit leaves the
  transaction closed as crashed (a second ``commit()`` raises
  ``TransactionClosed``), and ``outcome()``, decided at the primary, agrees
  with what every later reader sees. The history checker finds nothing.
- Input is refused where it enters (issue 13).

(Merged from test_final_states.py, test_commit_finality.py and
test_store_fails_at.py; the outcome over a Redis failover is in
test_outcome_durability.py.)
"""
import math

import pytest

from percolator_ref import (ClientCrash, Cluster, CommitOutcomeUnknown, ManualClock, Step,
                            StoreUnavailable, TransactionClosed)
from percolator_ref.faults import StoreFailsAt
from percolator_ref.interceptors import attach
from percolator_ref.model import MAX_TIMESTAMP
from percolator_ref.viz import figure4_setup

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


KINDS = [KeyboardInterrupt, SystemExit, RuntimeError]
COMMIT_STEPS = [Step.PREWRITE_PRIMARY, Step.PREWRITE_SECONDARY, Step.NOTIFY,
                Step.COMMIT_PRIMARY, Step.COMMIT_SECONDARY]


class Raise:
    """An interceptor that raises ``kind`` once, before or after a row transaction of ``step``."""

    def __init__(self, kind, step, when):
        self.kind, self.step, self.when, self.fired = kind, step, when, False

    def fire(self, rt, when):
        if when == self.when and rt.step == self.step and not self.fired:
            self.fired = True
            raise self.kind(f"{self.when} {self.step}")

    def before(self, rt):
        self.fire(rt, "before")

    def after(self, rt):
        self.fire(rt, "after")


def interrupted_transfer(cluster, kind, step, when):
    """x and y set to 1 (y a secondary), a weak notification; ``kind`` raised at ``step``."""
    t = cluster.begin()
    t.set("x", "v", 1)
    t.set("y", "v", 1)
    t.notify("z", "v")
    fault = Raise(kind, step, when)
    attach(t.session, fault)
    with pytest.raises(kind):
        t.commit()
    assert fault.fired
    return t


def assert_final_and_truthful(cluster, t):
    assert t.status == "crashed"               # the client stopped: nothing more written
    with pytest.raises(TransactionClosed):
        t.commit()
    committed = t.outcome()
    assert isinstance(committed, bool)
    assert t.outcome() is committed                         # final: asked again, same answer
    cluster.clock.advance(cluster.lock_ttl + 1)             # nothing waits on a live token
    expected = {("x", "v"): 1, ("y", "v"): 1} if committed else {}
    assert fresh_view(cluster) == expected
    assert all_locks(cluster) == []
    assert (t.commit_ts is not None) == committed
    report = cluster.check_history()
    assert report.ok, report.anomalies
    return committed


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("step", COMMIT_STEPS, ids=str)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_an_exception_at_any_step_leaves_a_final_truthful_transaction(make_cluster, kind,
                                                                      step, when):
    c = make_cluster()
    t = interrupted_transfer(c, kind, step, when)
    committed = assert_final_and_truthful(c, t)
    past_commit_point = (step == Step.COMMIT_PRIMARY and when == "after"
                         or step == Step.COMMIT_SECONDARY)
    assert committed is past_commit_point


CLEANUP_CASES = [("commit-primary", step) for step in
                 (Step.CLEANUP_PRIMARY, Step.ROLL_FORWARD, Step.ABORT_ROLLBACK)]
CLEANUP_CASES += [("prewrite", Step.ROLL_BACK)]


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("holder_crash,step", CLEANUP_CASES, ids=str)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_an_exception_while_a_commit_cleans_up_and_aborts(make_cluster, kind, holder_crash,
                                                          step, when):
    """t's prewrite of y meets a dead client's lock: t cleans it up (at the holder's
    primary p, then rolls y forward or back) and aborts, erasing its own lock on x."""
    c = make_cluster()
    holder = c.begin()
    holder.set("p", "v", 7)
    holder.set("y", "v", 7)
    with pytest.raises(ClientCrash):
        holder.commit(crash_after=holder_crash)     # y stays locked; p committed or locked
    t = c.begin()
    t.set("x", "v", 1)
    t.set("y", "v", 1)
    fault = Raise(kind, step, when)
    attach(t.session, fault)
    with pytest.raises(kind):
        t.commit()
    assert fault.fired and t.status == "crashed"
    with pytest.raises(TransactionClosed):
        t.commit()
    assert t.outcome() is False
    c.clock.advance(c.lock_ttl + 1)
    holder_view = {("p", "v"): 7, ("y", "v"): 7} if holder_crash == "commit-primary" else {}
    assert fresh_view(c) == holder_view and all_locks(c) == []
    assert c.check_history().ok


def test_the_issue_reproduction_keyboard_interrupt_after_the_commit_point():
    c = Cluster(clock=ManualClock())
    t = interrupted_transfer(c, KeyboardInterrupt, Step.COMMIT_PRIMARY, "after")
    assert t.status == "crashed"
    assert t.outcome() is True and t.commit_ts is not None
    assert c.begin().get("x", "v") == 1
    assert c.check_history().ok


@pytest.mark.parametrize("step,when,committed", [
    (Step.PREWRITE_SECONDARY, "after", False), (Step.COMMIT_PRIMARY, "before", False),
    (Step.COMMIT_PRIMARY, "after", True), (Step.COMMIT_SECONDARY, "before", True)], ids=str)
def test_on_a_redis_cluster(redis_cluster_url, step, when, committed):
    c = Cluster(backend=redis_cluster_url, clock=ManualClock())
    t = interrupted_transfer(c, KeyboardInterrupt, step, when)
    assert assert_final_and_truthful(c, t) is committed


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
