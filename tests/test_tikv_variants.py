"""TiKV's changes as protocol variants (issue 23, item 1): each keeps the paper's guarantees.

For every TiKV variant (alone, and composed with rollback records): the
Hermitage scenarios, the bank with crashes, a crash after every row
transaction of a two-cell transfer, on memory and Redis; the anomaly each one
removes is in its own test file (tests/test_variant_<name>.py).
"""
from __future__ import annotations

import pytest

from percolator_ref.variants.async_commit import AsyncCommit
from percolator_ref.variants.lock_ttl import LockTTL
from percolator_ref.variants.one_pc import OnePC
from percolator_ref.variants.pessimistic import PessimisticLocks
from percolator_ref.variants.rollback_records import RollbackRecords
from percolator_ref.workloads import hermitage
from percolator_ref.workloads.bank import COLUMN, check_invariants, run_bank, transfer

from helpers import all_locks, fresh_view

VARIANTS = {
    "lock-ttl": lambda: [LockTTL()],
    "lock-ttl+rollback-records": lambda: [LockTTL(), RollbackRecords()],
    "one-pc": lambda: [OnePC()],
    "one-pc+lock-ttl+rollback-records": lambda: [OnePC(), LockTTL(), RollbackRecords()],
    "async-commit": lambda: [AsyncCommit()],
    "async-commit+rollback-records": lambda: [AsyncCommit(), RollbackRecords()],
    "pessimistic-locks+rollback-records": lambda: [PessimisticLocks(), RollbackRecords()],
}
# (the row transaction that decides the commit, row transactions of a transfer's commit)
COMMIT_POINT = {name: (2, 4) if name.startswith("async") else (3, 4) for name in VARIANTS}


@pytest.mark.parametrize("variants", VARIANTS)
@pytest.mark.parametrize("scenario", hermitage.SCENARIOS, ids=lambda s: s.__name__)
def test_hermitage_scenarios_pass(make_cluster, backend, scenario, variants):
    cluster = make_cluster(variants=VARIANTS[variants]())
    result = scenario(cluster)
    assert result.history_ok and cluster.check_history().ok
    if variants.startswith("async") and any(move[1] == "crash after" for move in scenario.moves):
        # async commit: a client that dies after its last prewrite has COMMITTED (that is
        # the change), so G1a's "T1 aborts" does not happen; the SI check above still holds
        crashed = next(r for r in cluster.history.records if r.writes and r.client != "T2"
                       and any(v in (101, 102) for _, _, v in r.writes))
        assert crashed.status == "committed"
        return
    assert result.observed == result.expected and result.ok


@pytest.mark.parametrize("variants", VARIANTS)
@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_the_bank_with_crashes_keeps_its_invariants(make_cluster, variants):
    cluster = make_cluster(lock_ttl=0.05, variants=VARIANTS[variants]())
    result = run_bank(cluster, threads=3, transfers=60, crash_rate=0.3, seed=7)
    assert result.ok, result
    assert result.history.ok and result.violations == []


@pytest.mark.parametrize("variants", ["async-commit", "async-commit+rollback-records"])
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_the_bank_with_crashes_keeps_its_invariants_on_redis(make_cluster, variants):
    """Async commit's max_ts lives on the Redis server (stores/redis_max_ts.py)."""
    cluster = make_cluster(lock_ttl=0.05, variants=VARIANTS[variants]())
    result = run_bank(cluster, threads=3, transfers=60, crash_rate=0.3, seed=7)
    assert result.ok, result
    assert result.history.ok and result.violations == []


@pytest.mark.parametrize("variants", VARIANTS)
@pytest.mark.parametrize("crash_after", range(1, 5))
def test_a_crash_after_every_step_of_a_two_cell_transfer(make_cluster, backend, variants,
                                                         crash_after):
    cluster = make_cluster(lock_ttl=1.0, variants=VARIANTS[variants]())
    t = cluster.begin()
    t.set("Bob", COLUMN, 10)
    t.set("Joe", COLUMN, 2)
    assert t.commit()
    commit_point, steps = COMMIT_POINT[variants]
    outcome = transfer(cluster, "Bob", "Joe", 7, crash_after=crash_after, table="default")
    assert outcome == ("crashed" if crash_after <= steps else "committed")
    cluster.clock.advance(2.0)                  # past every lock's ttl
    committed = crash_after >= commit_point
    expected = {("Bob", COLUMN): 3, ("Joe", COLUMN): 9} if committed else \
        {("Bob", COLUMN): 10, ("Joe", COLUMN): 2}
    assert fresh_view(cluster) == expected
    assert fresh_view(cluster) == expected      # the cleanup is final
    assert all_locks(cluster) == []
    assert cluster.check_history().ok
    assert check_invariants(cluster) == []
