"""Every way a commit can end is final and truthful (issue 21, finding 1).

An exception of any kind (KeyboardInterrupt, SystemExit, an interceptor
raising) before or after any row transaction of a commit leaves the
transaction closed as crashed (a second ``commit()`` raises
``TransactionClosed``), and ``outcome()``, decided at the primary, agrees with
what every later reader sees: True exactly when the transaction's writes are
visible. The history checker finds nothing.
"""
import pytest

from percolator_ref import ClientCrash, Cluster, ManualClock, Step, TransactionClosed
from percolator_ref.interceptors import attach

from helpers import all_locks, fresh_view

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
