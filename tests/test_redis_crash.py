"""Real crashes against a real Redis server.

- Worker *processes* run the bank workload; one is killed with SIGKILL in
  the middle of a commit, right after a chosen crash point applied (the one
  meaning of a crash point, as ``commit(crash_after=...)``): an ``after(rt)``
  interceptor on its session (``harness.crash.freeze_after``) signals the
  parent and blocks until the process dies. The survivors meet its locks, wait for its liveness
  token to expire, clean them up through the primary, and finish. The total
  is intact, no lock is left, and the merged history (from every process's
  JSON-lines file) passes the snapshot-isolation checker.
- The Redis server itself is killed (SIGKILL) with persistence on and
  restarted: nothing committed is lost; a commit that meets a server that
  is down before its commit point aborts (False), a new transaction raises
  StoreUnavailable, and a retry succeeds once the server is back.
"""
import os
import random
import signal
import time

import pytest

from percolator_ref import (ClientCrash, Cluster, ManualClock, StoreUnavailable, TransactionClosed,
                            WallClock)
from percolator_ref.step import CRASH_POINTS
from percolator_ref.viz import figure4_setup
from percolator_ref.harness.crash import freeze_after, kill_mid_commit
from percolator_ref.interceptors import attach
from percolator_ref.harness.multiprocess import load_history, start_worker
from percolator_ref.harness.redis_server import LocalRedisServer
from percolator_ref.workloads import bank
from redis_fixtures import require_redis

from helpers import all_locks

ACCOUNTS, BALANCE, LOCK_TTL = 6, 100, 1.0

pytestmark = pytest.mark.redis


def _victim(cluster, index, kill_point, warmup, ready_path):
    """A client that commits ``warmup`` transfers, then stops forever right after ``kill_point``."""
    rng = random.Random(index)
    names = [bank.account_name(i) for i in range(ACCOUNTS)]
    for _ in range(warmup):
        source, target = rng.sample(names, 2)
        bank.transfer(cluster, source, target, rng.randint(1, 10))
    for _ in range(200):                               # retry until no survivor conflicts
        t = cluster.begin()
        a = t.get("acct00", bank.COLUMN, table=bank.TABLE)
        b = t.get("acct01", bank.COLUMN, table=bank.TABLE)
        t.set("acct00", bank.COLUMN, a - 7, table=bank.TABLE)      # the primary
        t.set("acct01", bank.COLUMN, b + 7, table=bank.TABLE)      # a secondary
        freeze_after(cluster, t, kill_point, ready_path)           # the history survives the kill
        t.commit()
    raise AssertionError("the victim never reached its kill point")


def _survivor(cluster, index, killed_path, transfers):
    """Transfers until the victim is dead and ``transfers`` are done; then one full read."""
    rng = random.Random(100 + index)
    names = [bank.account_name(i) for i in range(ACCOUNTS)]
    outcomes = {}
    done = 0
    while done < transfers or not os.path.exists(killed_path):
        source, target = rng.sample(names, 2)
        outcome = bank.transfer(cluster, source, target, rng.randint(1, 10))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        done += 1
    return outcomes, bank.read_total(cluster)


@pytest.mark.parametrize("kill_point, expect", [
    ("prewrite", "aborted"),               # after the last prewrite: both cells locked
    ("commit-primary", "committed"),       # after the commit point: secondary still locked
])
def test_sigkill_mid_commit_survivors_clean_up(redis_url, tmp_path, kill_point, expect):
    setup = Cluster(backend=redis_url, clock=WallClock(), lock_ttl=LOCK_TTL)
    bank.setup_accounts(setup, ACCOUNTS, BALANCE)
    ready, killed = str(tmp_path / "ready"), str(tmp_path / "killed")
    paths = [str(tmp_path / f"h{i}.jsonl") for i in range(3)]
    options = {"clock": WallClock(), "lock_ttl": LOCK_TTL}
    victim = start_worker(redis_url, _victim, 0, (kill_point, 5, ready),
                          cluster_options=options, history_path=paths[0])
    survivors = [start_worker(redis_url, _survivor, i, (killed, 15),
                              cluster_options=options, history_path=paths[i])
                 for i in (1, 2)]
    deadline = time.monotonic() + 30
    while not os.path.exists(ready):
        assert victim.process.is_alive(), victim.join(1).error
        assert time.monotonic() < deadline, "the victim never reached its kill point"
        time.sleep(0.01)
    os.kill(victim.pid, signal.SIGKILL)
    assert victim.join(10).exitcode == -signal.SIGKILL
    # the victim's locks are in the store right now, held by a dead process
    assert all_locks(setup), "the killed client left no lock"
    open(killed, "w").close()
    results = [s.join(60) for s in survivors]
    for r in results:
        assert r.error is None, r.error
        outcomes, total = r.result
        assert total == ACCOUNTS * BALANCE
        assert outcomes.get("committed", 0) >= 1
    # the survivors' final scans cleaned up every lock of the dead client
    assert all_locks(setup) == []
    history = load_history(paths)
    victim_record = [r for r in history.records if r.status == "crashed"]
    assert len(victim_record) == 1
    setup.history.records = sorted(setup.history.records + history.records,
                                   key=lambda r: r.start_ts)
    report = setup.check_history()
    assert report.ok, report
    assert victim_record[0].status == expect
    assert bank.read_total(setup) == ACCOUNTS * BALANCE
    assert bank.check_invariants(setup, settle=False) == []


def test_server_restart_with_persistence_loses_nothing_committed(tmp_path):
    require_redis()
    with LocalRedisServer(persistent=True) as server:
        url = f"{server.url}?prefix=persist"
        cluster = Cluster(backend=url, clock=ManualClock())
        bank.setup_accounts(cluster, 4, 50)
        committed = []
        for i in range(10):
            t = cluster.begin()
            t.set(f"k{i}", "v", i * 1.5)
            assert t.commit()
            committed.append((t.start_ts, t.commit_ts))
        before = cluster.bigtable.dump()
        server.restart(crash=True)                     # SIGKILL, then start on the same files
        again = Cluster(backend=url, clock=ManualClock())
        assert again.bigtable.dump() == before
        t = again.begin()
        assert t.start_ts > committed[-1][1]           # the oracle never goes back
        assert [t.get(f"k{i}", "v") for i in range(10)] == [i * 1.5 for i in range(10)]
        assert bank.read_total(again) == 200


def test_server_down_gives_store_unavailable_and_retry_succeeds():
    require_redis()
    with LocalRedisServer(persistent=True) as server:
        url = f"{server.url}?prefix=down&timeout=1"
        cluster = Cluster(backend=url, clock=ManualClock(), lock_ttl=1.0)
        t = cluster.begin()
        t.set("a", "x", 1)
        t.set("b", "x", 2)
        server.kill()
        assert t.commit() is False                     # before the commit point: aborted
        assert t.status == "aborted"
        with pytest.raises(StoreUnavailable, match="unavailable"):
            cluster.begin()
        with pytest.raises(StoreUnavailable, match="unavailable"):
            Cluster(backend=url, clock=ManualClock())
        server.start()
        assert cluster.bigtable.dump() == {}           # nothing half-applied
        retry = cluster.begin()
        retry.set("a", "x", 1)
        retry.set("b", "x", 2)
        assert retry.commit() is True
        assert cluster.begin().get("b", "x") == 2


def test_server_gone_mid_commit_then_retry_after_restart():
    """The server dies after the primary's prewrite: the row is whole, a retry commits."""
    require_redis()
    with LocalRedisServer(persistent=True) as server:
        url = f"{server.url}?prefix=mid&timeout=1"
        clock = ManualClock()
        cluster = Cluster(backend=url, clock=clock, lock_ttl=1.0)
        t = cluster.begin()
        t.set("a", "x", 1)
        t.set("b", "x", 2)

        class KillServer:                              # before the secondary's prewrite
            def before(self, rt):
                if rt.step == "prewrite-secondary":
                    server.kill()

        with attach(cluster.bigtable, KillServer()):
            assert t.commit() is False                 # before the commit point: aborted
        with pytest.raises(TransactionClosed):
            t.commit()
        server.start()
        a_row = cluster.bigtable.dump()["default"]["a"]
        assert sorted(a_row) == ["x:data", "x:lock"]   # the primary's prewrite: whole
        assert "b" not in cluster.bigtable.dump()["default"]
        clock.advance(2.0)                             # the failed client's token expires
        retry = cluster.begin()
        retry.set("a", "x", 10)
        retry.set("b", "x", 20)
        assert retry.commit() is False                 # met the stale lock: cleaned, aborted
        again = cluster.begin()
        again.set("a", "x", 10)
        again.set("b", "x", 20)
        assert again.commit() is True
        assert all_locks(cluster) == []
        assert cluster.check_history().ok


def _crashed_in_memory(point):
    """Figure 4's transfer with ``commit(crash_after=point)`` on the in-memory store."""
    cluster = Cluster(first_timestamp=5, clock=ManualClock(), lock_ttl=1.0)
    figure4_setup(cluster)
    t = cluster.begin()
    bob, joe = t.get("Bob", "bal"), t.get("Joe", "bal")
    t.set("Bob", "bal", bob - 7)
    t.set("Joe", "bal", joe + 7)
    with pytest.raises(ClientCrash):
        t.commit(crash_after=point)
    return cluster.bigtable.dump(), t.commit_ts


@pytest.mark.parametrize("point", list(CRASH_POINTS) + [1, 3])
def test_a_sigkilled_process_stops_where_crash_after_stops(redis_url, point):
    """One meaning of a crash point: the process is killed right AFTER the named step
    applied, leaving exactly the cells ``commit(crash_after=point)`` leaves."""
    cluster = Cluster(first_timestamp=5, clock=ManualClock(), lock_ttl=1.0, backend=redis_url)
    figure4_setup(cluster)
    killed = kill_mid_commit(redis_url, point,
                             cluster_options={"clock": ManualClock(), "lock_ttl": 1.0})
    assert killed.exitcode == -signal.SIGKILL
    assert (cluster.bigtable.dump(), killed.commit_ts) == _crashed_in_memory(point)
    assert str(killed).startswith(f"client T7 (start 7, ") and "right after" in str(killed)


def test_kill_mid_commit_refuses_a_step_name_that_is_not_a_crash_point(redis_url):
    with pytest.raises(ValueError, match="crash_after"):
        kill_mid_commit(redis_url, "commit-secondary")
    with pytest.raises(ValueError, match="crash_after"):
        kill_mid_commit(redis_url, 0)
