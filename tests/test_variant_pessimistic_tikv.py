"""Pessimistic locks and how they compose, checked against TiKV's own tests (issue 32) and
the crash audit (issue 29 items 4, 7, 8), on the in-memory store and on Redis.

Each test names the TiKV test it ports (tikv/tikv 8e964719db) or the defect it pins;
every one failed on the code before its fix.
"""
from __future__ import annotations

import threading
import time

import pytest

from percolator_ref import ClientCrash, Cluster, ManualClock
from percolator_ref.interceptors import attach
from percolator_ref.model import Cell, lock_col
from percolator_ref.services.clock import WallClock
from percolator_ref.session import Session
from percolator_ref.variants.async_commit import AsyncCommit
from percolator_ref.variants.lock_ttl import LockTTL
from percolator_ref.variants.one_pc import ONE_PC, OnePC
from percolator_ref.variants.pessimistic import (ACQUIRE, RELEASE, Deadlock, PessimisticLocks,
                                                 wait_for_graph)
from percolator_ref.variants.truetime import SpannerTimestamps

from helpers import all_locks, fresh_view


class Blocked(Exception):
    """The waiter was still waiting when the test's deadline passed."""


class Until:
    """Interceptor on a waiter's session: give up (Blocked) once the cluster clock passes
    ``deadline`` or after ``most`` row transactions; before each, the workers in
    ``keep_alive`` heartbeat their tokens (their other threads are busy)."""

    def __init__(self, cluster, deadline=float("inf"), most=5_000, keep_alive=(), clock=None):
        self.cluster, self.deadline, self.most = cluster, deadline, most
        self.keep_alive, self.clock, self.count = keep_alive, clock or cluster.clock, 0

    def before(self, rt):
        for worker in self.keep_alive:
            self.cluster.lockservice.heartbeat(worker)
        self.count += 1
        if self.clock.now() > self.deadline or self.count > self.most:
            raise Blocked(f"still waiting at clock {self.clock.now():g}, "
                          f"{self.count} row transactions")


class Steps:
    """Interceptor: the steps of the row transactions that applied."""

    def __init__(self):
        self.seen = []

    def after(self, rt):
        self.seen.append(rt.step)


def committed(cluster, values: dict) -> None:
    t = cluster.begin()
    for (row, column), value in values.items():
        t.set(row, column, value)
    assert t.commit()


def lock_at(cluster, row, column, ts):
    """The lock version of ``row``/``column`` at exactly ``ts`` (None if absent)."""
    return dict(cluster.bigtable.versions("default", row, f"{column}:lock")).get(ts)


def the_lock(cluster, row, column):
    """The newest lock version of ``row``/``column`` (None if none)."""
    versions = cluster.bigtable.versions("default", row, f"{column}:lock")
    return versions[0][1] if versions else None


# -- 1. PessimisticLocks + OnePC ------------------------------------------------------------
@pytest.mark.parametrize("pessimistic_first", [True, False], ids=["pess-1pc", "1pc-pess"])
def test_a_one_row_transaction_that_locked_its_cell_for_update_commits_in_one_phase(
        make_cluster, pessimistic_first):
    """TiKV's ``test_prewrite_pessimsitic_1pc`` (src/storage/txn/commands/prewrite.rs): a
    pessimistic lock on ``k``, then a 1PC prewrite of ``k``: committed, unlocked; then a lock
    on ``k`` and a 1PC of ``k`` and ``k2`` (here: two cells of one row): both committed."""
    variants = [PessimisticLocks(), OnePC()]
    cluster = make_cluster(variants=variants if pessimistic_first else variants[::-1])
    committed(cluster, {("k", "v"): "old"})
    steps = Steps()
    with attach(cluster.bigtable, steps):
        t = cluster.begin()
        assert t.get_for_update("k", "v") == "old"
        t.set("k", "v", "v")
        assert t.commit()
        assert ONE_PC in steps.seen and all_locks(cluster) == []
        u = cluster.begin()
        assert u.get_for_update("k", "v") == "v"
        u.set("k", "v", "v1")
        u.set("k", "w", "v2")
        assert u.commit()
    assert steps.seen.count(ONE_PC) == 2
    assert fresh_view(cluster) == {("k", "v"): "v1", ("k", "w"): "v2"} and all_locks(cluster) == []
    assert cluster.check_history().ok


def test_a_one_phase_commit_whose_own_lock_was_rolled_back_aborts(make_cluster):
    """The 1PC row transaction checks our pessimistic lock is still there (TiKV:
    PessimisticLockNotFound), and a lock held elsewhere makes it two-phase."""
    cluster = make_cluster(lock_ttl=1.0, variants=[OnePC(), PessimisticLocks()])
    committed(cluster, {("k", "v"): 1})
    t = cluster.begin()
    assert t.get_for_update("k", "v") == 1
    cluster.clock.advance(2.0)                     # t's token lapses: t counts as dead
    u = cluster.begin()
    assert u.get_for_update("k", "v") == 1         # u cleans t's lock up and takes the cell
    u.set("k", "v", 2)
    assert u.commit()
    t.set("k", "v", 10)
    assert t.commit() is False
    assert fresh_view(cluster) == {("k", "v"): 2} and all_locks(cluster) == []


# -- 2. LockTTL + PessimisticLocks ------------------------------------------------------------
def test_a_pessimistic_lock_carries_the_ttl(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks(), LockTTL()])
    t = cluster.begin()
    t.get_for_update("k", "v")
    lock = the_lock(cluster, "k", "v")
    assert (lock.ttl, lock.wall, lock.for_update_ts) == (1.0, 0.0, t.start_ts - 1)


@pytest.mark.parametrize("ttl_first", [True, False], ids=["ttl-pess", "pess-ttl"])
def test_txn_heart_beat_on_a_pessimistic_primary(make_cluster, ttl_first):
    """TiKV's ``test_txn_heart_beat`` (src/storage/txn/commands/txn_heart_beat.rs), its
    pessimistic part: a heartbeat raises the pessimistic primary lock's ttl (and never lowers
    it); another transaction's heartbeat on that key fails and changes nothing."""
    variants = [LockTTL(), PessimisticLocks()]
    cluster = make_cluster(lock_ttl=1.0, variants=variants if ttl_first else variants[::-1])
    t = cluster.begin()
    t.get_for_update("k", "v")
    cluster.clock.advance(0.8)
    assert t.heart_beat()
    assert lock_at(cluster, "k", "v", t.txn_ts).ttl == pytest.approx(1.8)
    other = cluster.begin()
    assert other.heart_beat(Cell("default", "k", "v")) is False
    lock = lock_at(cluster, "k", "v", t.txn_ts)
    assert lock.ttl == pytest.approx(1.8) and lock.for_update_ts is not None
    cluster.clock.advance(1.5)                     # past its first ttl, within the raised one
    assert cluster.begin().get("k", "v") is None   # readers skip it; it is still there
    assert lock_at(cluster, "k", "v", t.txn_ts) is not None


def test_check_txn_status_resolving_pessimistic_lock(make_cluster):
    """TiKV's ``test_check_txn_status_resolving_pessimistic_lock``
    (src/storage/txn/commands/check_txn_status.rs): a pessimistic primary lock within its ttl
    is alive; once its ttl passed it is rolled back (unlocked), whatever its client's token
    says (here the worker keeps it fresh)."""
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks(), LockTTL()])
    cluster.lockservice.register("W")
    t = cluster.begin(client="W")
    t.get_for_update("k", "v")
    checker = cluster.Cleanup(Session(cluster, "checker"))
    primary = Cell("default", "k", "v")
    cluster.clock.advance(0.5)
    lock = the_lock(cluster, "k", "v")
    assert checker.check_txn_status(primary, lock.start_ts).alive
    cluster.clock.advance(1.0)
    cluster.lockservice.heartbeat("W")
    status = checker.check_txn_status(primary, lock.start_ts)
    assert (status.alive, status.commit_ts) == (False, None)
    assert all_locks(cluster) == []


def test_cleanup_check_ttl_with_a_lock_request_as_the_caller(make_cluster):
    """TiKV's ``test_cleanup_check_ttl`` (src/storage/mod.rs), the caller being a lock
    request: while the holder's ttl runs the request is refused (it waits); after it, the
    holder (a hung transaction of a live worker) is rolled back and the request gets the lock.
    Before the fix the request still waited after 30 ttls."""
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks(), LockTTL()])
    committed(cluster, {("x", "v"): 110})
    cluster.lockservice.register("W")
    hung = cluster.begin(client="W")
    hung.get_for_update("x", "v")
    waiter = cluster.begin()
    with attach(waiter.session, Until(cluster, deadline=0.5, keep_alive=["W"])):
        with pytest.raises(Blocked):
            waiter.get_for_update("x", "v")
    with attach(waiter.session, Until(cluster, deadline=30.0, keep_alive=["W"])):
        assert waiter.get_for_update("x", "v") == 110
    assert cluster.clock.now() > 1.0
    waiter.set("x", "v", 111)
    assert waiter.commit()
    hung.set("x", "v", 0)
    assert hung.commit() is False
    assert fresh_view(cluster) == {("x", "v"): 111} and all_locks(cluster) == []


# -- 3. ownership by transaction -------------------------------------------------------------
def test_two_transactions_of_one_worker_do_not_share_a_pessimistic_lock(make_cluster):
    """TiKV decides ownership by start_ts (``lock.ts != start_ts`` -> KeyIsLocked,
    src/storage/txn/actions/acquire_pessimistic_lock.rs), not by client."""
    cluster = make_cluster(variants=[PessimisticLocks()])
    committed(cluster, {("x", "v"): 1})
    cluster.lockservice.register("W")
    first, second = cluster.begin(client="W"), cluster.begin(client="W")
    assert first.get_for_update("x", "v") == 1
    with attach(second.session, Until(cluster, deadline=5.0)):
        with pytest.raises(Blocked):
            second.get_for_update("x", "v")
    first.set("x", "v", 2)
    assert first.commit()
    assert second.get_for_update("x", "v") == 2
    second.set("x", "v", 3)
    assert second.commit()
    assert fresh_view(cluster) == {("x", "v"): 3} and all_locks(cluster) == []
    assert cluster.check_history().ok


# -- 4. the wait-for graph: cleaned up when a wait ends, entries expire --------------------------
def test_a_wait_that_ends_with_an_exception_leaves_no_edge(make_cluster):
    """T2's wait for T1 ends with an exception; T1 then waits for T2: no deadlock (nobody
    waits for T1). Before the fix T1 was refused as a deadlock."""
    cluster = make_cluster(variants=[PessimisticLocks()])
    committed(cluster, {("a", "v"): 1, ("b", "v"): 1})
    t1, t2 = cluster.begin(), cluster.begin()
    t1.get_for_update("a", "v")
    t2.get_for_update("b", "v")
    with attach(t2.session, Until(cluster, deadline=1.0, keep_alive=[t1.client])):
        with pytest.raises(Blocked):
            t2.get_for_update("a", "v")
    with attach(t1.session, Until(cluster, deadline=2.0, keep_alive=[t2.client])):
        with pytest.raises(Blocked):                # it waits; not Deadlock
            t1.get_for_update("b", "v")
    assert wait_for_graph(cluster).waits() == {}


def test_detect_table_expire(make_cluster):
    """TiKV's ``test_detect_table_expire`` (src/server/lock_manager/deadlock.rs): an edge
    expires (here after the lock TTL); recording it again keeps it."""
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks()])
    graph = wait_for_graph(cluster)
    assert graph.wait(1, 2)
    assert not graph.wait(2, 1)                     # deadlock
    cluster.clock.advance(1.5)
    assert graph.wait(2, 1)                         # 1 -> 2 expired: no deadlock
    assert graph.waits() == {2: 1}
    graph.done(2)
    assert graph.wait(1, 2)
    cluster.clock.advance(0.6)
    assert graph.wait(1, 2)                         # recorded again: its deadline moves
    cluster.clock.advance(0.6)
    assert not graph.wait(2, 1)
    graph.done(1)
    assert graph.waits() == {}


# -- 5. the crash audit --------------------------------------------------------------------
def test_two_clusters_on_one_redis_store_detect_a_crossing_deadlock(redis_url):
    """The wait-for graph lives on the Redis server: two ``Cluster`` objects (two processes'
    clients) with crossing get_for_updates; the second waiter is refused as a deadlock and
    the first then gets its lock. Before the fix both still waited after 4 s."""
    a = Cluster(backend=redis_url, variants=[PessimisticLocks()])
    b = Cluster(backend=redis_url, variants=[PessimisticLocks()])
    committed(a, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    t1, t2 = a.begin(), b.begin()
    assert (t1.get_for_update("Bob", "bal"), t2.get_for_update("Joe", "bal")) == (10, 2)
    waiting, result = Steps(), {}

    def first():
        try:
            with attach(t1.session, waiting, Until(a, deadline=time.monotonic() + 20)):
                result["t1"] = t1.get_for_update("Joe", "bal")
        except Exception as failure:            # reported below
            result["t1"] = failure

    thread = threading.Thread(target=first)
    thread.start()
    began = time.monotonic()
    while waiting.seen.count(ACQUIRE) < 2 and time.monotonic() - began < 10:
        time.sleep(0.01)
    with attach(t2.session, Until(b, deadline=time.monotonic() + 4)):
        with pytest.raises(Deadlock):
            t2.get_for_update("Bob", "bal")
    thread.join(30)
    assert result["t1"] == 2
    t1.set("Bob", "bal", 3)
    t1.set("Joe", "bal", 9)
    assert t1.commit()
    assert fresh_view(b) == {("Bob", "bal"): 3, ("Joe", "bal"): 9} and all_locks(b) == []


@pytest.mark.parametrize("holder", ["pessimistic", "prewritten"])
def test_get_for_update_backs_off_on_a_dead_clients_lock_until_its_ttl(make_cluster, holder):
    """A crashed client's lock whose ttl has not passed: get_for_update backs off (on the
    manual clock, time moves) and gets the cell once the ttl passed. Before the fix it spun
    without a backoff (never ending on a manual clock) or took the lock before the ttl."""
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks(), LockTTL()])
    committed(cluster, {("x", "v"): 1})
    dead = cluster.begin()
    if holder == "pessimistic":
        dead.get_for_update("x", "v")
    else:
        dead.set("x", "v", 99)
        assert dead.prewrite(next(iter(dead.writes.values())), Cell("default", "x", "v"))
    dead.session.crash()
    waiter = cluster.begin()
    with attach(waiter.session, Until(cluster, most=2_000)):
        assert waiter.get_for_update("x", "v") == 1
    assert cluster.clock.now() > 1.0
    waiter.set("x", "v", 2)
    assert waiter.commit()
    assert fresh_view(cluster) == {("x", "v"): 2} and all_locks(cluster) == []


def test_a_lock_ttl_counts_from_the_prewrite_so_no_lock_is_born_expired(make_cluster):
    """A transaction that read for 1.5 s with a 1 s ttl, then prewrote: its lock is alive (a
    reader waits) and it commits. Before the fix the reader rolled it back at once."""
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL()])
    committed(cluster, {("a", "v"): "old"})
    t = cluster.begin()
    cluster.clock.advance(1.5)
    t.set("a", "v", "new")
    t.set("b", "v", "new")
    primary = Cell("default", "a", "v")
    for m in t.writes.values():
        assert t.prewrite(m, primary)
    reader = cluster.begin()
    with attach(reader.session, Until(cluster, deadline=cluster.clock.now() + 0.5)):
        with pytest.raises(Blocked):
            reader.get("a", "v")
    t.commit_ts = t.commit_timestamp()
    assert t.commit_primary(t.writes[primary])
    assert fresh_view(cluster)[("a", "v")] == "new"


class AheadClock(WallClock):
    """A client whose clock runs 1000 s ahead of the others'."""

    def now(self) -> float:
        return super().now() + 1000.0


def test_lock_ttl_on_redis_is_judged_on_the_servers_clock(redis_url):
    """A reader whose own clock runs ahead must not roll a live transaction back: the ttl
    counts on the server's clock, as liveness tokens do. Before the fix it did at once."""
    writer = Cluster(backend=redis_url, lock_ttl=5.0, variants=[LockTTL()])
    reader = Cluster(backend=redis_url, lock_ttl=5.0, clock=AheadClock(), variants=[LockTTL()])
    committed(writer, {("a", "v"): "old"})
    t = writer.begin()
    t.set("a", "v", "new")
    assert t.prewrite(t.writes[Cell("default", "a", "v")], Cell("default", "a", "v"))
    r = reader.begin()
    with attach(r.session, Until(reader, deadline=time.monotonic() + 1.0, clock=WallClock())):
        with pytest.raises(Blocked):
            r.get("a", "v")
    assert lock_at(writer, "a", "v", t.start_ts) is not None


def test_heart_beat_before_any_write_is_a_clear_error(make_cluster):
    cluster = make_cluster(variants=[LockTTL()])
    with pytest.raises(ValueError, match="has written nothing"):
        cluster.begin().heart_beat()


@pytest.mark.parametrize("arguments", [
    {"lock_ttl": 2 ** 80, "variants": [LockTTL()]},
    {"lock_ttl": 2 ** 80, "variants": [AsyncCommit(), LockTTL()]},
    {"lock_ttl": 1.0, "variants": [AsyncCommit(), LockTTL()]},
], ids=["huge-ttl", "huge-ttl-async-ttl", "async-ttl"])
def test_a_refused_cluster_on_redis_writes_nothing(redis_url, arguments):
    """Before the fix the refused Cluster had already set the oracle's counter, so the next
    Cluster on the URL began at the refused one's first_timestamp, not its own."""
    with pytest.raises(ValueError, match="lock_ttl|variants"):
        Cluster(backend=redis_url, first_timestamp=1000, clock=ManualClock(), **arguments)
    assert Cluster(backend=redis_url, clock=ManualClock()).begin().start_ts == 1


@pytest.mark.parametrize("epsilon_us", [2 ** 62, 2 ** 70, 60_000_001])
def test_spanner_timestamps_refuse_an_epsilon_out_of_bounds(epsilon_us):
    with pytest.raises(ValueError, match="epsilon_us"):
        SpannerTimestamps(epsilon_us=epsilon_us)


def test_spanner_timestamps_never_hand_out_zero(make_cluster):
    cluster = make_cluster(variants=[SpannerTimestamps(epsilon_us=0)])
    assert min(cluster.begin().start_ts for _ in range(6)) >= 1


def test_spanner_timestamps_past_max_timestamp_are_refused():
    from percolator_ref.errors import OracleExhausted
    cluster = Cluster(clock=ManualClock(1e13), variants=[SpannerTimestamps()])
    with pytest.raises(OracleExhausted):
        cluster.begin()


# -- issue 29: 4, 7, 8 -------------------------------------------------------------------------
def test_a_transaction_never_judges_its_own_pessimistic_lock_dead(make_cluster):
    """Issue 29 item 4: past its client's TTL, a transaction's own read met its own lock,
    judged its client dead and erased it; its commit then failed. Now it reads past it."""
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks()])
    committed(cluster, {("x", "v"): 1})
    t = cluster.begin()
    assert t.get_for_update("x", "v") == 1
    cluster.clock.advance(2.0)
    assert t.get("x", "v") == 1
    assert the_lock(cluster, "x", "v") is not None
    t.set("x", "v", 2)
    assert t.commit()
    assert fresh_view(cluster) == {("x", "v"): 2} and all_locks(cluster) == []


@pytest.mark.parametrize("variants", [
    lambda: [PessimisticLocks()],
    lambda: [AsyncCommit(), PessimisticLocks()],
    lambda: [PessimisticLocks(), AsyncCommit()],
    lambda: [OnePC(), PessimisticLocks()],
], ids=["pess", "async-pess", "pess-async", "1pc-pess"])
def test_a_locked_but_unwritten_cell_whose_lock_was_lost_aborts_the_commit(make_cluster,
                                                                          variants):
    """Issue 29 item 4: t locked x and y, writes y from x; its lock on x is rolled back (t
    judged dead) and u commits x. t must abort (TiKV: PessimisticLockNotFound); before the
    fix it committed: write skew. Whatever variant commits, in either order."""
    cluster = make_cluster(lock_ttl=1.0, variants=variants())
    committed(cluster, {("x", "v"): 1, ("y", "v"): 0})
    t = cluster.begin()
    x = t.get_for_update("x", "v")
    t.get_for_update("y", "v")
    t.set("y", "v", x + 1)
    cluster.clock.advance(2.0)
    u = cluster.begin()
    assert u.get_for_update("x", "v") == 1
    u.set("x", "v", 5)
    assert u.commit()
    assert t.commit() is False
    assert fresh_view(cluster) == {("x", "v"): 5, ("y", "v"): 0} and all_locks(cluster) == []
    assert cluster.check_history().ok


def test_get_for_update_after_a_scan_is_refused(make_cluster):
    """Issue 29 item 7: a scan fixes the snapshot as a get does."""
    cluster = make_cluster(variants=[PessimisticLocks()])
    committed(cluster, {("x", "v"): 1, ("y", "v"): 1})
    t = cluster.begin()
    t.scan()
    with pytest.raises(ValueError, match="before any plain get or scan"):
        t.get_for_update("x", "v")


@pytest.mark.parametrize("crash_after", [1, 2])
def test_a_crashed_pessimistic_client_writes_nothing_more(make_cluster, crash_after):
    """Issue 29 item 8: after ClientCrash no row transaction of the client runs (before the
    fix its locks were released after the crash)."""
    cluster = make_cluster(variants=[PessimisticLocks()])
    committed(cluster, {("x", "v"): 1, ("y", "v"): 1, ("z", "v"): 1})
    t = cluster.begin()
    for row in "xyz":
        t.get_for_update(row, "v")
    t.set("x", "v", 2)
    t.set("y", "v", 2)
    steps = Steps()
    with attach(t.session, steps):
        with pytest.raises(ClientCrash):
            t.commit(crash_after=crash_after)
    assert len(steps.seen) == crash_after and RELEASE not in steps.seen
    assert all(the_lock(cluster, row, "v") is not None for row in "xyz")


def test_lock_columns_named_as_stored():
    assert lock_col("v") == "v:lock"           # lock_at reads this column


# -- capabilities: CheckTxnStatus's answers kept apart; a reader pushing min_commit_ts ---------
def prewritten(cluster, values: dict):
    """A transaction that prewrote ``values`` (first cell primary) and hangs."""
    t = cluster.begin()
    for (row, column), value in values.items():
        t.set(row, column, value)
    primary = next(iter(t.writes))
    for m in t.writes.values():
        assert t.prewrite(m, primary)
    return t


@pytest.mark.parametrize("records", [False, True], ids=["paper", "rollback-records"])
def test_check_txn_status_keeps_its_answers_apart(make_cluster, records):
    """TiKV's ``TxnStatus`` (src/storage/txn/actions/check_txn_status.rs): committed at its
    commit_ts; uncommitted with the lock; ttl expired (rolled back now); no lock (rolled back
    now); rolled back before (a rollback record, with a variant that keeps them);
    PrimaryMismatch at a secondary (nothing decided there)."""
    from percolator_ref.variants.lock_ttl import (COMMITTED, LOCK_NOT_EXIST, ROLLED_BACK,
                                                  TTL_EXPIRED, UNCOMMITTED, PrimaryMismatch)
    from percolator_ref.variants.rollback_records import RollbackRecords
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL()] + ([RollbackRecords()] if records
                                                                 else []))
    check = cluster.Cleanup(Session(cluster, "checker")).check_txn_status
    a, b = Cell("default", "a", "v"), Cell("default", "b", "v")
    done = cluster.begin()
    done.set("a", "v", 1)
    assert done.commit()
    assert check(a, done.start_ts)[:3] == (False, done.commit_ts, COMMITTED)
    t = prewritten(cluster, {("a", "v"): 2, ("b", "v"): 2})
    with pytest.raises(PrimaryMismatch):
        check(b, t.start_ts)
    status = check(a, t.start_ts)
    assert (status.alive, status.action, status.lock) == (True, UNCOMMITTED,
                                                         lock_at(cluster, "a", "v", t.start_ts))
    cluster.clock.advance(1.5)
    assert check(a, t.start_ts)[:3] == (False, None, TTL_EXPIRED)
    assert lock_at(cluster, "a", "v", t.start_ts) is None
    assert check(a, t.start_ts).action == (ROLLED_BACK if records else LOCK_NOT_EXIST)
    never = cluster.oracle.get_timestamp()
    assert check(a, never).action == LOCK_NOT_EXIST


@pytest.mark.parametrize("variants", [
    lambda: [LockTTL(push_min_commit_ts=True)],
    lambda: [PessimisticLocks(), LockTTL(push_min_commit_ts=True)],
    lambda: [LockTTL(push_min_commit_ts=True), PessimisticLocks()],
], ids=["ttl", "pess-ttl", "ttl-pess"])
def test_a_reader_pushes_min_commit_ts_and_does_not_wait(make_cluster, variants):
    """TiKV's CheckTxnStatus with the caller's start_ts (``check_txn_status_lock_exists``):
    a reader that meets a live large transaction's lock pushes its ``min_commit_ts`` past its
    own start_ts and reads past the lock at once; the writer's commit then takes a newer
    commit_ts (TiKV's ``CommitTsExpired`` and retry), so the reader's snapshot stays a
    snapshot (the checker agrees)."""
    cluster = make_cluster(lock_ttl=10.0, variants=variants())
    committed(cluster, {("a", "v"): "old", ("b", "v"): "old"})
    writer = cluster.begin()
    if any(isinstance(v, PessimisticLocks) for v in cluster.variants):
        writer.get_for_update("a", "v")
    writer.set("a", "v", "new")
    writer.set("b", "v", "new")
    primary = Cell("default", "a", "v")
    for m in writer.writes.values():
        assert writer.prewrite(m, primary)
    writer.commit_ts = writer.commit_timestamp()        # taken before the reader begins
    reader = cluster.begin()
    assert reader.start_ts > writer.commit_ts
    began = cluster.clock.now()
    assert (reader.get("b", "v"), reader.get("a", "v")) == ("old", "old")
    assert cluster.clock.now() == began                 # no backoff: it did not wait
    assert lock_at(cluster, "a", "v", writer.start_ts).min_commit_ts == reader.start_ts + 1
    assert writer.commit_primary(writer.writes[primary])
    assert writer.commit_ts > reader.start_ts           # committed after the reader's snapshot
    writer.commit_secondary(writer.writes[Cell("default", "b", "v")])
    assert fresh_view(cluster) == {("a", "v"): "new", ("b", "v"): "new"}
    assert cluster.begin().get("b", "v") == "new"


def test_without_pushing_a_reader_waits_for_a_live_lock(make_cluster):
    """The default LockTTL (no large transactions): the reader waits, as in the paper."""
    cluster = make_cluster(lock_ttl=10.0, variants=[LockTTL()])
    committed(cluster, {("a", "v"): "old", ("b", "v"): "old"})
    prewritten(cluster, {("a", "v"): "new", ("b", "v"): "new"})
    reader = cluster.begin()
    with attach(reader.session, Until(cluster, deadline=2.0)):
        with pytest.raises(Blocked):
            reader.get("b", "v")


def test_a_transaction_that_notifies_is_not_pushed(make_cluster):
    """Its notifications are written at commit_ts before the commit point; a pushed commit
    would leave them behind, so its locks carry no min_commit_ts and a reader waits."""
    cluster = make_cluster(lock_ttl=10.0, variants=[LockTTL(push_min_commit_ts=True)])
    committed(cluster, {("a", "v"): "old", ("b", "v"): "old"})
    cluster.observe("default", "v")(lambda txn, row, column: None)
    t = prewritten(cluster, {("a", "v"): "new", ("b", "v"): "new"})
    assert lock_at(cluster, "b", "v", t.start_ts).min_commit_ts is None
    reader = cluster.begin()
    with attach(reader.session, Until(cluster, deadline=2.0)):
        with pytest.raises(Blocked):
            reader.get("b", "v")


def test_lock_ttl_push_min_commit_ts_must_be_a_bool():
    with pytest.raises(TypeError, match="push_min_commit_ts"):
        LockTTL(push_min_commit_ts=1)


def test_the_stepped_pushing_reader_reads_at_once_and_the_waiting_one_backs_off():
    """Notebook 09's scene (workloads.tikv.pushing_reader_stepper): the writer stands before
    its commit point; a reader that pushes reads the old balances at once, one status check
    and no backoff; without pushing it backs off until the writer commits."""
    from percolator_ref.variants.lock_ttl import CHECK_TXN_STATUS
    from percolator_ref.viz.frames import stepper_frame
    from percolator_ref.workloads import tikv
    pushed = tikv.drive_pushing_reader(tikv.pushing_reader_stepper(
        lambda: [LockTTL(push_min_commit_ts=True)]))
    waited = tikv.drive_pushing_reader(tikv.pushing_reader_stepper(lambda: [LockTTL()]))
    for s in (pushed, waited):
        assert [r.result for r in s.runners] == [True, (10, 2)]
        assert s.cluster.check_history().ok
    frames = {name: stepper_frame(s.frames) for name, s in (("pushed", pushed),
                                                            ("waited", waited))}
    checks = {name: int((f.step == CHECK_TXN_STATUS).sum()) for name, f in frames.items()}
    assert checks == {"pushed": 1, "waited": 6 // 2}
    assert frames["pushed"].clock.max() == 0 < frames["waited"].clock.max()


@pytest.mark.parametrize("combination", [
    ("lock-ttl",), ("pessimistic-locks", "lock-ttl"), ("one-pc", "lock-ttl"),
    ("pessimistic-locks", "one-pc", "lock-ttl", "rollback-records"),
], ids="+".join)
def test_readers_that_push_keep_every_guarantee_under_crashes_and_faults(combination):
    """Issue 29's audit (crashes after every step, store faults, late duplicates, dying
    readers) with LockTTL(push_min_commit_ts=True): no anomaly, nothing lost or partial."""
    from percolator_ref.workloads.variant_audit import KIT, audit_combination, memory_maker
    figures = audit_combination(memory_maker(), combination, depth=1, factory=lambda c: [
        LockTTL(push_min_commit_ts=True) if f == "lock-ttl" else KIT[f]() for f in c])
    assert figures.ok, figures.problems
    assert (figures.anomalies, figures.lost, figures.partial, figures.g1a) == (0, 0, 0, 0)
    assert figures.crashes and figures.faults and figures.schedules >= 30
