"""Jepsen-style bank test: concurrent transfers with crashed clients, a total that never moves.

The workload lives in ``percolator_ref.workloads.bank`` (notebooks reuse it).
Wall clock with a 50 ms lock TTL, so locks of dead or stalled clients are
cleaned up by whoever meets them.
"""
import pytest

from percolator_ref import WallClock, Write, WriteKind
from percolator_ref.model import Cell, Lock
from percolator_ref.workloads import bank


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bank_total_is_invariant_under_concurrent_transfers_and_crashes(make_cluster, seed):
    cluster = make_cluster(clock=WallClock(), lock_ttl=0.05)
    result = bank.run_bank(cluster, threads=4, transfers=300, crash_rate=0.15, seed=seed)
    print(f"\nbank seed={seed}: {result}")
    assert sum(result.outcomes.values()) == 300
    assert result.crashes > 0 and result.committed > 0
    assert len(result.totals_seen) >= 2
    assert result.bad_totals == [] and set(result.totals_seen) == {800}
    assert result.history.ok, result.history
    assert result.history.transactions >= 300 + len(result.totals_seen)
    assert result.violations == []
    assert result.ok
    # the final balances are what the committed transfers left, and sum to the total
    final = {row: value for row, _, value in cluster.begin().scan(bank.TABLE)}
    assert sorted(final) == [bank.account_name(i) for i in range(8)]
    assert sum(final.values()) == 800


def test_bank_without_crashes_commits_most_transfers(make_cluster):
    cluster = make_cluster(clock=WallClock(), lock_ttl=0.05)
    result = bank.run_bank(cluster, threads=4, transfers=120, crash_rate=0.0, seed=7)
    assert result.crashes == 0
    assert result.committed + result.aborts + result.outcomes.get("insufficient", 0) == 120
    assert result.ok


def test_transfer_outcomes(make_cluster):
    cluster = make_cluster()
    bank.setup_accounts(cluster, accounts=2, balance=10)
    a, b = bank.account_name(0), bank.account_name(1)
    assert bank.transfer(cluster, a, b, 11) == "insufficient"
    assert bank.transfer(cluster, a, b, 4) == "committed"
    assert bank.transfer(cluster, a, b, 1, crash_after=2) == "crashed"   # before the commit point
    assert bank.transfer(cluster, a, b, 2, crash_after=3) == "crashed"   # after it
    assert bank.read_total(cluster) == 20
    t = cluster.begin()
    assert (t.get(a, bank.COLUMN, table="bank"), t.get(b, bank.COLUMN, table="bank")) == (4, 16)
    assert bank.check_invariants(cluster) == []


def test_setup_accounts_rejects_too_few(make_cluster):
    with pytest.raises(ValueError, match="accounts"):
        bank.setup_accounts(make_cluster(), accounts=1)


# -- the invariant checker can fail --------------------------------------------

def _committed(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    bank.setup_accounts(cluster, accounts=2, balance=10)       # start 1, commit 2
    return cluster, bank.account_name(0)


def test_invariants_catch_two_locks_on_a_cell(make_cluster):
    cluster, a = _committed(make_cluster)
    primary = Cell("bank", a, "balance")
    for ts in (10, 11):
        cluster.bigtable.write("bank", a, "balance:lock", Lock(ts, primary, True, "ghost"), ts)
    found = bank.check_invariants(cluster, settle=False)
    assert any("2 locks" in v for v in found)


def test_invariants_catch_a_lock_that_survives_a_reader(make_cluster):
    cluster, a = _committed(make_cluster)
    primary = Cell("bank", a, "balance")
    # a lock whose holder is alive forever cannot be cleaned: plant it above every reader
    cluster.bigtable.write("bank", a, "balance:lock", Lock(10**9, primary, True, "ghost"), 10**9)
    assert any("still locked" in v for v in bank.check_invariants(cluster))


def test_invariants_catch_overlapping_write_intervals(make_cluster):
    cluster, a = _committed(make_cluster)
    bt = cluster.bigtable
    bt.write("bank", a, "balance:data", 5, 3)
    bt.write("bank", a, "balance:write", Write(3, WriteKind.PUT), 6)
    bt.write("bank", a, "balance:data", 7, 4)
    bt.write("bank", a, "balance:write", Write(4, WriteKind.PUT), 8)   # started before 6
    found = bank.check_invariants(cluster, settle=False)
    assert any("overlap" in v for v in found)


def test_invariants_catch_dangling_write_record(make_cluster):
    cluster, a = _committed(make_cluster)
    cluster.bigtable.write("bank", a, "balance:write", Write(3, WriteKind.PUT), 4)
    assert any("missing data" in v for v in bank.check_invariants(cluster, settle=False))


def test_invariants_catch_a_lost_committed_write(make_cluster):
    cluster, a = _committed(make_cluster)
    cluster.bigtable.erase("bank", a, "balance:write", 2)
    assert any("no write record" in v for v in bank.check_invariants(cluster))


def test_reader_total_catches_a_non_transactional_transfer(make_cluster):
    cluster, a = _committed(make_cluster)
    bt = cluster.bigtable
    bt.write("bank", a, "balance:data", 0, 3)                         # money vanishes
    bt.write("bank", a, "balance:write", Write(3, WriteKind.PUT), 4)
    cluster.oracle.get_timestamps(5)
    assert bank.read_total(cluster) == 10
