"""The variants keep their guarantees under store faults and late messages (issue 29).

One test per defect found by the crash audit, each run on memory and on Redis
(where the variant runs there), each failing on the code before its fix:

1. one-phase commit on Redis took its commit_ts before it held the row, and reads
   did not wait for a held row: a reader above the commit_ts read the old value;
2. async commit: a store failure at the last prewrite (the commit point) was
   answered "aborted" and the client rolled back, racing readers;
3. async commit with pessimistic locks: max_ts was raised once per transaction,
   though ``get_for_update`` moves start_ts forward;
5. a refused (or never answered) request left no rollback record, so its late
   duplicate committed a transaction reported aborted;
6. async commit with TrueTime was accepted;
9. the variants' own steps could not be fault-injected.

And the durability of a variant's decision at the primary with Redis replicas
(``wait=N``): the steps are declared ``decides=True``.
"""
from __future__ import annotations

import threading

import pytest
import redis

from percolator_ref import (Cell, Cluster, CommitOutcomeUnknown, ManualClock, Step,
                            StoreUnavailable)
from percolator_ref.cleanup import resolve_primary
from percolator_ref.errors import ClientCrash
from percolator_ref.faults import StoreFailsAt
from percolator_ref.interceptors import attach
from percolator_ref.session import Session
from percolator_ref.variants import Variant
from percolator_ref.variants.async_commit import AsyncCommit
from percolator_ref.variants.lock_ttl import LockTTL
from percolator_ref.variants.one_pc import OnePC
from percolator_ref.variants.pessimistic import PessimisticLocks
from percolator_ref.variants.rollback_records import RollbackRecords
from percolator_ref.variants.truetime import SpannerTimestamps
from percolator_ref.workloads.bank import check_invariants

from helpers import all_locks, fresh_view
from redis_fixtures import master_and_replica, promote  # noqa: F401 (a fixture)


def setup(cluster, cells=("a", "b", "c"), value=0):
    t = cluster.begin()
    for row in cells:
        t.set(row, "v", value)
    assert t.commit()


def writer(cluster, cells=("a", "b"), value=1):
    t = cluster.begin()
    for row in cells:
        t.set(row, "v", value)
    return t


class OnceAt:
    """Interceptor: run ``action(rt)`` once, before (or after) the first row transaction of
    ``step`` (on ``row``, if given)."""

    def __init__(self, step, action, row=None, after=False):
        self.step, self.action, self.row, self.when = step, action, row, after
        self.done = False

    def fire(self, rt, after):
        if (not self.done and after == self.when and rt.step == self.step
                and self.row in (None, rt.row)):
            self.done = True
            self.action(rt)

    def before(self, rt):
        self.fire(rt, False)

    def after(self, rt):
        self.fire(rt, True)


def lose_reply(rt):
    raise StoreUnavailable(f"the reply to {rt.step} of {rt.row} was lost")


def settled(cluster):
    """The final store after every lock is resolved: one view, clean history, no violation."""
    view = fresh_view(cluster)
    assert all_locks(cluster) == []
    assert cluster.check_history().ok
    assert check_invariants(cluster) == []
    return view


# -- 1. one-phase commit holds its row before it takes commit_ts ---------------------------

class ReaderAtCommitTs(Variant):
    """A reader begins (in another thread) right after the writer took its commit_ts inside
    its one-pc row transaction, and reads the row; the writer goes on after 0.3 s."""

    name = "reader-at-commit-ts"

    def __init__(self):
        self.armed, self.seen, self.reader = False, [], None
        variant = self

        class Transaction:
            def commit_timestamp(self):
                ts = super().commit_timestamp()
                if variant.armed:
                    variant.armed = False
                    variant.read_in_thread(self.cluster)
                return ts
        self.Transaction = Transaction

    def read_in_thread(self, cluster):
        def read():
            self.reader = cluster.begin()
            self.seen.append(self.reader.get("r", "x"))
            self.reader.commit()
        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()
        self.thread.join(0.3)           # before the fix it reads at once; after, it waits


def one_pc_reader_above_commit_ts(url):
    hook = ReaderAtCommitTs()
    cluster = Cluster(clock=ManualClock(), backend=url, variants=[hook, OnePC()])
    t = cluster.begin()
    t.set("r", "x", 0)
    t.set("r", "y", 0)
    assert t.commit()
    w = cluster.begin()
    w.set("r", "x", 1)
    w.set("r", "y", 1)
    hook.armed = True
    assert w.commit()
    hook.thread.join(10)
    assert hook.reader.start_ts > w.commit_ts
    assert hook.seen == [1]             # the reader above commit_ts sees the write
    assert cluster.check_history().ok


def test_one_pc_a_reader_above_the_commit_ts_sees_the_write_memory():
    one_pc_reader_above_commit_ts(None)


@pytest.mark.parametrize("conditional", ["0", "1"])
def test_one_pc_a_reader_above_the_commit_ts_sees_the_write_redis(redis_url, conditional):
    one_pc_reader_above_commit_ts(f"{redis_url}&conditional={conditional}")


# -- 2. async commit: the last prewrite is the commit point ---------------------------------

@pytest.mark.parametrize("cells", [("a",), ("a", "b")], ids=["one-cell", "two-cell"])
def test_async_commit_a_lost_reply_on_the_last_prewrite_is_an_unknown_outcome(make_cluster,
                                                                               cells):
    cluster = make_cluster(lock_ttl=1.0, variants=[AsyncCommit()])
    setup(cluster)
    w = writer(cluster, cells)
    last = Step.PREWRITE_SECONDARY if len(cells) > 1 else Step.PREWRITE_PRIMARY
    attach(cluster.bigtable, StoreFailsAt(last, applied=True),
           StoreFailsAt(Step.ABORT_ROLLBACK, times=5))
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()                      # before the fix: False, and a reader then saw it
    assert w.outcome() is True          # every lock is there: committed
    cluster.clock.advance(2.0)
    assert settled(cluster) == {(row, "v"): 1 if row in cells else 0 for row in "abc"}


def test_async_commit_the_client_does_not_roll_back_behind_a_reader(make_cluster):
    """Three cells; the reply to the last prewrite is lost; before the client could roll
    back, a reader (W paused past its TTL) resolved W at its primary: committed. The
    client's rollback then erased b and c: a partial commit."""
    cluster = make_cluster(lock_ttl=1.0, variants=[AsyncCommit()])
    setup(cluster)
    w = writer(cluster, ("a", "b", "c"))

    def reader_resolves(rt):
        cluster.clock.advance(2.0)
        cluster.lockservice.crash(w.client)     # W looks dead to the reader
        r = cluster.begin()
        r.get("a", "v")
        r.commit()
    attach(w.session, OnceAt(Step.PREWRITE_SECONDARY, lose_reply, row="c", after=True),
           OnceAt(Step.ABORT_ROLLBACK, reader_resolves))
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()
    assert w.outcome() is True
    assert settled(cluster) == {("a", "v"): 1, ("b", "v"): 1, ("c", "v"): 1}


def test_async_commit_an_unsent_last_prewrite_is_unknown_then_rolled_back_for_good(
        make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[AsyncCommit()])
    setup(cluster)
    w = writer(cluster, ("a", "b"))
    attach(cluster.bigtable, StoreFailsAt(Step.PREWRITE_SECONDARY, applied=False))
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()
    assert w.outcome() is False          # b has no lock: rolled back, with a rollback record
    b = next(m for m in w.writes.values() if m.cell.row == "b")
    assert w.prewrite(b, Cell("default", "a", "v")) is False    # the late request: refused
    assert settled(cluster) == {(row, "v"): 0 for row in "abc"}


# -- 3. async commit + pessimistic locks: max_ts follows start_ts ---------------------------

@pytest.mark.parametrize("order", ["async-first", "pessimistic-first"])
def test_async_commit_with_pessimistic_locks_reads_raise_max_ts_at_the_moved_start_ts(
        make_cluster, order):
    variants = [AsyncCommit(), PessimisticLocks()]
    cluster = make_cluster(lock_ttl=1.0, variants=variants if order == "async-first"
                           else variants[::-1])
    setup(cluster, ("x", "y", "z"))
    p = cluster.begin()
    assert p.get_for_update("y", "v") == 0          # raises max_ts at p's first start_ts
    w = writer(cluster, ("x",))
    seen = []

    def p_reads(rt):                    # W has its commit floor; its prewrite comes next
        assert p.get_for_update("z", "v") == 0      # p's start_ts moves above W's floor
        seen.append(p.get("x", "v"))
    attach(w.session, OnceAt(Step.PREWRITE_PRIMARY, p_reads))
    assert w.commit()
    assert p.commit()
    assert seen == [0]
    assert w.commit_ts > p.start_ts     # before the fix: W committed below p's snapshot
    assert cluster.check_history().ok


# -- 5. a refused or unanswered request leaves a rollback record ----------------------------

def crashed_lock_on(cluster, row):
    """H writes ``row`` (its primary) and another row and dies after its first prewrite:
    ``row`` is locked, and H will be rolled back."""
    h = cluster.begin()
    h.set(row, "v", 7)
    h.set("other", "v", 7)
    with pytest.raises(ClientCrash):
        h.commit(crash_after="prewrite-primary")
    return h


def test_async_commit_a_late_duplicate_of_a_refused_prewrite_is_refused(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[AsyncCommit()])
    setup(cluster)
    crashed_lock_on(cluster, "a")
    w = writer(cluster, ("a",))
    assert w.commit() is False          # refused: H's lock (cleaned up meanwhile)
    m = next(iter(w.writes.values()))
    assert w.prewrite(m, m.cell) is False    # the late duplicate: before the fix, it locked
    assert w.outcome() is False
    assert settled(cluster)[("a", "v")] == 0


def test_one_pc_a_late_duplicate_of_a_refused_commit_is_refused(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[OnePC()])
    setup(cluster, ("r",))
    crashed_lock_on(cluster, "r")
    w = writer(cluster, ("r",))
    assert w.commit() is False          # refused: H's lock
    cluster.clock.advance(2.0)
    fresh_view(cluster)                 # a reader rolls H back
    assert w.one_phase_commit(list(w.writes.values())) is False   # before the fix: committed
    assert settled(cluster)[("r", "v")] == 0


def test_one_pc_an_unanswered_commit_resolved_rolled_back_stays_rolled_back(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[OnePC()])
    setup(cluster, ("r",))
    w = cluster.begin()
    w.set("r", "v", 1)
    w.set("r", "u", 1)
    attach(cluster.bigtable, StoreFailsAt("one-pc", applied=False))   # (9) a variant's step
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()
    assert w.outcome() is False
    assert w.one_phase_commit(list(w.writes.values())) is False   # the request, late: refused
    assert settled(cluster) == {("r", "v"): 0}


def test_async_commit_an_unsent_one_cell_prewrite_resolved_rolled_back_stays_so(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[AsyncCommit()])
    setup(cluster)
    w = writer(cluster, ("a",))
    attach(cluster.bigtable, StoreFailsAt(Step.PREWRITE_PRIMARY, applied=False))
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()
    assert w.outcome() is False
    m = next(iter(w.writes.values()))
    assert w.prewrite(m, m.cell) is False
    assert settled(cluster)[("a", "v")] == 0


# -- 6. async commit with TrueTime is refused, before the store is touched ------------------

@pytest.mark.parametrize("order", ["async-first", "truetime-first"])
def test_async_commit_with_spanner_timestamps_is_refused_naming_variants(backend, order):
    variants = [AsyncCommit(), SpannerTimestamps()]
    with pytest.raises(ValueError, match=r"^variants: .*does not compose with.*TrueTime"):
        Cluster(clock=ManualClock(), backend=backend,
                variants=variants if order == "async-first" else variants[::-1])
    if backend is not None:             # refused before the store opened: no key written
        server, prefix = backend.split("?prefix=")
        client = redis.Redis.from_url(server)
        assert list(client.scan_iter(match=f"{prefix}:*")) == []
        client.close()


# -- 9. every variant step can be fault-injected ---------------------------------------------

def test_every_declared_variant_step_is_a_step_fault_injection_accepts():
    from percolator_ref.stores.steps import declared_steps, decides, is_read_only
    variant_steps = set(declared_steps()) - {s.value for s in Step}
    assert {"one-pc", "check-primary", "check-secondary-locks", "resolve-primary",
            "check-txn-status", "txn-heart-beat", "acquire-pessimistic-lock",
            "pessimistic-rollback", "protect-rollback"} <= variant_steps
    for step in variant_steps:
        assert StoreFailsAt(step, applied=True).step == step
    assert is_read_only("check-primary") and not is_read_only("one-pc")
    assert all(decides(s) for s in ("check-primary", "check-secondary-locks",
                                    "resolve-primary", "check-txn-status"))


def test_a_lost_reply_on_one_pc_is_an_unknown_outcome_that_committed(make_cluster):
    cluster = make_cluster(variants=[OnePC()])
    setup(cluster, ("r",))
    w = writer(cluster, ("r",))
    attach(cluster.bigtable, StoreFailsAt("one-pc", applied=True))
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()
    assert w.outcome() is True
    assert settled(cluster) == {("r", "v"): 1}


@pytest.mark.parametrize("step", ["check-primary", "check-secondary-locks", "resolve-primary"])
def test_a_store_fault_in_async_resolution_leaves_the_outcome_to_the_next_reader(make_cluster,
                                                                                 step):
    cluster = make_cluster(lock_ttl=1.0, variants=[AsyncCommit()])
    setup(cluster)
    w = writer(cluster, ("a", "b"))
    with pytest.raises(ClientCrash):
        w.commit(crash_after="prewrite")            # every lock written: committed
    fault = StoreFailsAt(step, applied=True)
    attach(cluster.bigtable, fault)
    with pytest.raises(StoreUnavailable):
        cluster.begin().get("b", "v")
    assert fault.failures == 1
    assert settled(cluster) == {("a", "v"): 1, ("b", "v"): 1, ("c", "v"): 0}


def test_a_store_fault_at_check_txn_status_leaves_the_outcome_to_the_next_reader(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL(), RollbackRecords()])
    setup(cluster)
    w = writer(cluster, ("a", "b"))
    with pytest.raises(ClientCrash):
        w.commit(crash_after="prewrite")
    cluster.clock.advance(2.0)
    fault = StoreFailsAt("check-txn-status", applied=False)
    attach(cluster.bigtable, fault)
    with pytest.raises(StoreUnavailable):
        cluster.begin().get("b", "v")
    assert fault.failures == 1
    assert settled(cluster) == {(row, "v"): 0 for row in "abc"}


# -- a variant's decision at the primary is durable with replicas (wait=N) ------------------

def test_async_resolution_never_reports_a_commit_the_replica_lacks(master_and_replica):
    """W's last prewrite reaches the master only. A resolver decides (commit, on the
    master only); a second resolution then read that commit at the primary and reported
    it: after a failover the replica has no lock on b, and W is rolled back."""
    master, replica = master_and_replica
    clock = ManualClock()
    c = Cluster(backend=f"{master.url}?prefix=ad&wait=1&wait_timeout=200", clock=clock,
                lock_ttl=1.0, variants=[AsyncCommit()])
    w = writer(c, ("a", "b"))
    attach(w.session, OnceAt(Step.PREWRITE_SECONDARY, lambda rt: promote(replica)))
    attach(c.bigtable, StoreFailsAt(Step.ABORT_ROLLBACK, times=5))    # W's locks stay
    try:
        w.commit()                      # CommitOutcomeUnknown (the last prewrite's WAIT failed)
    except CommitOutcomeUnknown:
        pass
    primary = Cell("default", "a", "v")
    with pytest.raises(StoreUnavailable):       # (before the fix: the commit's own WAIT)
        resolve_primary(Session(c, "R1"), primary, w.start_ts, w.client)
    with pytest.raises(StoreUnavailable, match="not yet known to be on 1 replica"):
        resolve_primary(Session(c, "R2"), primary, w.start_ts, w.client)   # before: committed
    master.kill()                       # the failover: the replica is the store
    after = Cluster(backend=f"{replica.url}?prefix=ad", clock=clock, lock_ttl=1.0,
                    variants=[AsyncCommit()])
    clock.advance(2.0)
    reader = after.begin()
    assert reader.get("a", "v") is None and reader.get("b", "v") is None   # rolled back


def test_check_txn_status_never_reports_a_commit_the_replica_lacks(master_and_replica):
    master, replica = master_and_replica
    clock = ManualClock()
    c = Cluster(backend=f"{master.url}?prefix=td&wait=1&wait_timeout=200", clock=clock,
                lock_ttl=1.0, variants=[LockTTL()])
    w = writer(c, ("a", "b"))
    attach(w.session, OnceAt(Step.COMMIT_PRIMARY, lambda rt: promote(replica)))
    with pytest.raises(CommitOutcomeUnknown):
        w.commit()                      # the write record is on the master only
    checker = Session(c, "R").cleanup
    with pytest.raises(StoreUnavailable, match="not yet known to be on 1 replica"):
        checker.check_txn_status(Cell("default", "a", "v"), w.start_ts, w.client)
    master.kill()
    after = Cluster(backend=f"{replica.url}?prefix=td", clock=clock, lock_ttl=1.0,
                    variants=[LockTTL()])
    clock.advance(2.0)
    reader = after.begin()
    assert reader.get("b", "v") is None and reader.get("a", "v") is None


def test_one_pc_writers_alone_get_past_a_dead_clients_lock(make_cluster):
    """A row whose only writers commit in one phase: a dead client's lock there is cleaned
    up by the refused writer (as the paper's prewrite does) and the next one commits;
    before, they were refused for good until some reader came."""
    cluster = make_cluster(lock_ttl=1.0, variants=[OnePC()])
    setup(cluster, ("r",))
    crashed_lock_on(cluster, "r")
    cluster.clock.advance(2.0)
    w = writer(cluster, ("r",))
    assert w.commit() is False          # refused by the dead lock, which it cleans up
    w = writer(cluster, ("r",), value=2)
    assert w.commit() is True
    assert settled(cluster)[("r", "v")] == 2


def test_the_lost_reply_lesson_fails_with_the_old_commit_point_and_not_with_the_fix():
    """notebook 09's lesson: the same schedule, the store losing the reply to the last
    prewrite (and failing the rollback): the broken variant answers "aborted" and the reader
    then sees the write (G1a); async commit answers "unknown", and the history the reader
    then sees (the write, resolved as committed) is clean."""
    from percolator_ref.variants.async_commit import AsyncCommitLastPrewriteAsPrewrite
    from percolator_ref.workloads import tikv
    broken = tikv.drive_in_turn(
        tikv.lost_reply_stepper(lambda: [AsyncCommitLastPrewriteAsPrewrite()]))
    assert [r.result for r in broken.runners] == ["aborted", (0, 0)]
    assert [a.name for a in broken.cluster.check_history().anomalies] == ["G1a aborted read"] * 2
    fixed = tikv.drive_in_turn(tikv.lost_reply_stepper(lambda: [AsyncCommit()]))
    assert [r.result for r in fixed.runners] == ["unknown", (0, 0)]
    assert fixed.cluster.check_history().ok
