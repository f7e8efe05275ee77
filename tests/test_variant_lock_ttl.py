"""TiKV's lock TTL and CheckTxnStatus (percolator_ref.variants.lock_ttl).

The anomaly it removes: a worker whose liveness token is fresh (its other
threads keep working) but whose transaction hung after prewriting blocks
every reader of those cells for as long as the worker lives. With the variant
the lock's own ttl decides: the reader rolls the hung transaction back once
the ttl passes. A live transaction keeps its primary alive by heartbeats; a
crashed one is waited for until its ttl passes, whatever its token says.
"""
from __future__ import annotations

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.interceptors import attach
from percolator_ref.model import Cell, Lock, WriteKind
from percolator_ref.stores.redis_codec import decode, encode
from percolator_ref.variants.lock_ttl import CHECK_TXN_STATUS, LockTTL
from percolator_ref.variants.locks import TiKVLock

from helpers import all_locks, fresh_view


class Blocked(Exception):
    """The reader was still waiting when the test's deadline passed."""


class WorkerKeepsWorking:
    """Interceptor on a reader's session: before each of its row transactions the hung
    transaction's worker ``W`` heartbeats its token (its other threads are busy), and the
    reader gives up once the cluster clock passes ``deadline``."""

    def __init__(self, cluster, deadline):
        self.cluster, self.deadline = cluster, deadline

    def before(self, rt):
        self.cluster.lockservice.heartbeat("W")
        if self.cluster.clock.now() > self.deadline:
            raise Blocked(f"still blocked at clock {self.cluster.clock.now():g}")


def hung_transaction(cluster):
    """Worker W's transaction prewrites a, b and then hangs (never commits)."""
    t = cluster.begin()
    t.set("a", "v", "old")
    t.set("b", "v", "old")
    assert t.commit()
    cluster.lockservice.register("W")
    hung = cluster.begin(client="W")
    hung.set("a", "v", "new")
    hung.set("b", "v", "new")
    primary = next(iter(hung.writes))
    for m in hung.writes.values():
        assert hung.prewrite(m, primary)
    return hung


def read_b(cluster, deadline):
    reader = cluster.begin()
    with attach(reader.session, WorkerKeepsWorking(cluster, deadline)):
        return reader.get("b", "v")


def test_without_lock_ttl_a_hung_transaction_of_a_live_worker_blocks_readers(make_cluster):
    cluster = make_cluster(lock_ttl=1.0)
    hung_transaction(cluster)
    with pytest.raises(Blocked):
        read_b(cluster, deadline=30.0)          # 30 lock TTLs, still waiting
    assert len(all_locks(cluster)) == 2


def test_with_lock_ttl_the_reader_rolls_the_hung_transaction_back_after_its_ttl(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL()])
    hung = hung_transaction(cluster)
    assert read_b(cluster, deadline=30.0) == "old"
    assert cluster.clock.now() > hung.wall + 1.0        # not before the ttl passed
    assert all_locks(cluster) == []             # the primary, then the cell read
    assert fresh_view(cluster) == {("a", "v"): "old", ("b", "v"): "old"}
    assert all_locks(cluster) == []


def test_a_heartbeat_keeps_a_slow_transaction_alive_and_it_commits(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL()])
    hung = hung_transaction(cluster)
    for _ in range(4):                  # four times 0.8 s and a reader's wait: past 3 TTLs
        cluster.clock.advance(0.8)
        assert hung.heart_beat()
        beat = cluster.clock.now()
        with pytest.raises(Blocked):            # a reader waits: the lock is alive
            read_b(cluster, deadline=cluster.clock.now() + 0.5)
    lock = cluster.bigtable.versions("default", "a", "v:lock")[0][1]
    assert isinstance(lock, TiKVLock) and lock.ttl == pytest.approx(beat - hung.wall + 1.0)
    hung.commit_ts = hung.commit_timestamp()
    mutations = list(hung.writes.values())
    assert hung.commit_primary(mutations[0])    # its primary lock was never rolled back
    hung.commit_secondary(mutations[1])
    assert fresh_view(cluster) == {("a", "v"): "new", ("b", "v"): "new"}


def test_a_crashed_clients_lock_is_waited_for_until_its_ttl_whatever_its_token_says(
        make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL()])
    hung = hung_transaction(cluster)
    cluster.lockservice.crash("W")              # the token says: dead now
    statuses = []
    with attach(cluster.bigtable, type("Steps", (), {"after": lambda self, rt:
                                                       statuses.append(rt.step)})()):
        assert cluster.begin().get("b", "v") == "old"
    assert cluster.clock.now() > hung.wall + 1.0
    assert statuses.count(CHECK_TXN_STATUS) > 1         # it checked, waited, checked again


def test_check_txn_status_is_one_row_transaction_at_the_primary(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[LockTTL()])
    hung_transaction(cluster)
    cluster.clock.advance(2.0)
    seen = []
    with attach(cluster.bigtable, type("Steps", (), {"after": lambda self, rt:
                                                       seen.append((rt.step, rt.row))})()):
        assert cluster.begin().get("b", "v") == "old"
    assert seen == [("get", "b"), (CHECK_TXN_STATUS, "a"), ("roll-back", "b"), ("get", "b")]


def test_lock_fields_round_trip_through_the_redis_codec():
    plain = Lock(5, Cell("default", "a", "v"), True, "T5", WriteKind.PUT)
    assert encode(plain) == 'L[5, ["default", "a", "v"], true, "T5", "data"]'   # unchanged
    assert type(decode(encode(plain))) is Lock and decode(encode(plain)) == plain
    rich = TiKVLock(5, Cell("default", "a", "v"), True, "T5", WriteKind.DELETE, ttl=1.5,
                    wall=0.25, min_commit_ts=9,
                    secondaries=(Cell("default", "b", "v"), Cell("t", "c", "w")),
                    for_update_ts=7)
    back = decode(encode(rich))
    assert back == rich and type(back) is TiKVLock and type(back.secondaries[0]) is Cell
    with pytest.raises(ValueError, match="not a lock field"):
        decode('L[5, ["default", "a", "v"], true, "T5", "data", {"colour": 1}]')


def test_every_lock_carries_the_ttl_and_the_start_time():
    cluster = Cluster(clock=ManualClock(3.0), lock_ttl=2.0, variants=[LockTTL()])
    t = cluster.begin()
    t.set("a", "v", 1)
    t.set("b", "v", 1)
    primary = next(iter(t.writes))
    for m in t.writes.values():
        assert t.prewrite(m, primary)
    for row in "ab":
        lock = cluster.bigtable.versions("default", row, "v:lock")[0][1]
        assert (lock.ttl, lock.wall) == (2.0, 3.0)
    assert str(lock) == "primary @ a.v; ttl 2 s"
