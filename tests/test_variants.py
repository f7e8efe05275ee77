"""Protocol variants (percolator_ref.variants): the extension point, and TiKV's rollback records.

The extension point: a variant overrides named steps of the transaction and of
cleanup through mixins, and may replace the timestamp source; several compose.
The rollback-records variant: the anomaly it removes (a late prewrite of a
rolled-back transaction re-locks its primary, which then commits without the
secondaries a cleaner rolled back), shown without the variant and gone with it;
and the variant keeps every guarantee the paper's protocol gives (Hermitage,
the bank with crashes, a crash after every step of a transfer), on memory and
Redis.
"""
from __future__ import annotations

import pytest

from percolator_ref import ClientCrash, Cluster, ManualClock
from percolator_ref.cleanup import Cleanup
from percolator_ref.interceptors import attach
from percolator_ref.model import Write, WriteKind
from percolator_ref.step import Step
from percolator_ref.transaction import Transaction
from percolator_ref.variants import Variant
from percolator_ref.variants.rollback_records import RollbackRecords
from percolator_ref.workloads import hermitage
from percolator_ref.workloads.bank import COLUMN, check_invariants, run_bank, transfer

from helpers import all_locks, cell_state, fresh_view

# ---------------------------------------------------------------------------
# The extension point
# ---------------------------------------------------------------------------


class Recorder(Variant):
    """Records, in order, each time its overriding steps run; calls the next one."""

    def __init__(self, label, calls):
        self.label, self.calls = label, calls
        variant = self

        class Txn:
            def commit_timestamp(self):
                variant.calls.append(f"{variant.label}: commit_timestamp")
                return super().commit_timestamp()

        class Clean:
            def resolve_primary(self, primary, start_ts, holder=None):
                variant.calls.append(f"{variant.label}: resolve_primary")
                return super().resolve_primary(primary, start_ts, holder)

        self.Transaction, self.Cleanup = Txn, Clean


class CountingTimestamps(Variant):
    """Wraps the timestamp source: counts the timestamps handed out."""

    class Source:
        def __init__(self, inner):
            self.inner, self.handed_out = inner, 0

        def get_timestamp(self):
            self.handed_out += 1
            return self.inner.get_timestamp()

        def peek(self):
            return self.inner.peek()

    def timestamps(self, cluster, oracle):
        return self.Source(oracle)


def test_no_variant_means_the_papers_classes():
    cluster = Cluster(clock=ManualClock())
    assert cluster.variants == ()
    assert cluster.Transaction is Transaction and cluster.Cleanup is Cleanup
    assert type(cluster.begin()) is Transaction


def test_variants_compose_first_one_outermost_and_each_calls_the_next():
    calls = []
    cluster = Cluster(clock=ManualClock(), lock_ttl=1.0,
                      variants=[Recorder("A", calls), Recorder("B", calls)])
    t = cluster.begin()
    assert isinstance(t, Transaction) and type(t) is cluster.Transaction
    t.set("a", "v", 1)
    t.set("b", "v", 1)
    with pytest.raises(ClientCrash):
        t.commit(crash_after="prewrite")
    assert calls == []                          # the crash came before the commit timestamp
    cluster.clock.advance(2.0)                  # the crashed client's token is stale
    assert cluster.begin().get("b", "v") is None
    assert calls == ["A: resolve_primary", "B: resolve_primary"]
    t = cluster.begin()
    t.set("a", "v", 2)
    assert t.commit()
    assert calls[2:] == ["A: commit_timestamp", "B: commit_timestamp"]


def test_a_variant_supplies_the_timestamp_source():
    counting = CountingTimestamps()
    cluster = Cluster(clock=ManualClock(), variants=[counting])
    assert isinstance(cluster.oracle, CountingTimestamps.Source)
    t = cluster.begin()
    t.set("a", "v", 1)
    assert t.commit()
    assert cluster.oracle.handed_out == 2       # start_ts and commit_ts, both from the source
    assert (t.start_ts, t.commit_ts) == (1, 2)


@pytest.mark.parametrize("bad, error, words", [
    (RollbackRecords(), TypeError, "variants must be a list"),
    ("rollback", TypeError, "variants must be a list"),
    ([object()], TypeError, "variants must hold Variant objects"),
    ([RollbackRecords(), RollbackRecords()], ValueError, "the same variant twice"),
])
def test_bad_variants_are_refused_naming_the_argument(bad, error, words):
    with pytest.raises(error, match=words):
        Cluster(variants=bad)


# ---------------------------------------------------------------------------
# Rollback records: the anomaly, and its absence
# ---------------------------------------------------------------------------


class LatePrewriteOfThePrimary:
    """Interceptor on T's session: just before T's commit point, T pauses for longer
    than the lock TTL; a reader meets T's secondary lock and rolls T back (primary
    and secondary); then T's prewrite of the primary arrives again (a retry whose
    first reply was lost). ``late_prewrite``: whether that prewrite succeeded."""

    def __init__(self, cluster, txn):
        self.cluster, self.txn = cluster, txn
        self.late_prewrite, self.done = None, False

    def before(self, rt) -> None:
        if rt.step is not Step.COMMIT_PRIMARY or self.done:
            return
        self.done = True
        self.cluster.clock.advance(self.cluster.lock_ttl * 2)      # T paused past its TTL
        assert self.cluster.begin().get("b", "v") == "old"      # the reader rolls T back
        primary = next(iter(self.txn.writes.values()))
        self.late_prewrite = self.txn.prewrite(primary, primary.cell)


def late_prewrite_run(cluster):
    t = cluster.begin()
    t.set("a", "v", "old")
    t.set("b", "v", "old")
    assert t.commit()
    t = cluster.begin()
    t.set("a", "v", "new")                      # the primary
    t.set("b", "v", "new")
    late = LatePrewriteOfThePrimary(cluster, t)
    with attach(t.session, late):
        try:
            committed = t.commit(crash_after="commit-primary")   # T dies after its commit point
        except ClientCrash:
            committed = None
    return t, late, committed


def test_without_rollback_records_a_late_prewrite_lets_a_rolled_back_transaction_commit(
        make_cluster):
    cluster = make_cluster(lock_ttl=1.0)
    t, late, committed = late_prewrite_run(cluster)
    assert late.late_prewrite is True           # the primary is locked again after its rollback
    assert committed is None                    # ... and T reached its commit point
    assert t.outcome() is True
    # atomicity is broken: the primary shows T's write, the secondary (rolled back) does not
    assert fresh_view(cluster) == {("a", "v"): "new", ("b", "v"): "old"}
    assert not cluster.check_history().ok
    assert check_invariants(cluster) != []


def test_with_rollback_records_the_late_prewrite_and_the_commit_are_refused(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[RollbackRecords()])
    t, late, committed = late_prewrite_run(cluster)
    assert late.late_prewrite is False          # refused: the rollback record at start_ts
    assert committed in (False, None) and t.outcome() is False
    assert fresh_view(cluster) == {("a", "v"): "old", ("b", "v"): "old"}
    for row in "ab":                            # the cleaner's marker, never read as data
        assert (t.start_ts, "rollback @ %d" % t.start_ts) in cell_state(cluster, row, "v")["write"]
    assert all_locks(cluster) == []
    assert cluster.check_history().ok
    assert check_invariants(cluster) == []


def test_an_aborting_client_writes_rollback_records_on_the_cells_it_had_locked(make_cluster):
    cluster = make_cluster(variants=[RollbackRecords()])
    first = cluster.begin()
    second = cluster.begin()
    second.set("b", "v", 2)
    assert second.commit()
    first.set("a", "v", 1)                      # the primary: prewritten
    first.set("b", "v", 1)                      # conflicts with second's write: abort
    assert first.commit() is False
    assert cell_state(cluster, "a", "v") == {
        "data": [], "lock": [], "write": [(first.start_ts, f"rollback @ {first.start_ts}")]}
    reader = cluster.begin()
    assert reader.get("a", "v") is None and reader.get("b", "v") == 2
    assert cluster.check_history().ok


def test_a_reader_skips_rollback_records_to_the_older_version(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[RollbackRecords()])
    t = cluster.begin()
    t.set("a", "v", "old")
    t.set("b", "v", "old")
    assert t.commit()
    t = cluster.begin()
    t.set("a", "v", "new")
    t.set("b", "v", "new")
    with pytest.raises(ClientCrash):
        t.commit(crash_after="prewrite")
    cluster.clock.advance(2.0)
    assert fresh_view(cluster) == {("a", "v"): "old", ("b", "v"): "old"}
    versions = cluster.bigtable.versions("default", "a", "v:write")
    assert versions[0] == (t.start_ts, Write(t.start_ts, WriteKind.ROLLBACK))
    assert fresh_view(cluster) == {("a", "v"): "old", ("b", "v"): "old"}


# ---------------------------------------------------------------------------
# Rollback records keep the paper's guarantees
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", hermitage.SCENARIOS, ids=lambda s: s.__name__)
def test_rollback_records_pass_the_hermitage_scenarios(make_cluster, scenario):
    cluster = make_cluster(variants=[RollbackRecords()])
    result = scenario(cluster)
    assert result.observed == result.expected and result.history_ok and result.ok
    assert cluster.check_history().ok


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_rollback_records_pass_the_bank_with_crashes(make_cluster):
    cluster = make_cluster(lock_ttl=0.05, variants=[RollbackRecords()])
    result = run_bank(cluster, threads=3, transfers=60, crash_rate=0.3, seed=7)
    assert result.ok, result
    assert result.history.ok and result.violations == []
    rollbacks = [w for table in cluster.bigtable.dump().values() for columns in table.values()
                 for column, versions in columns.items() if column.endswith(":write")
                 for _, w in versions if w.kind is WriteKind.ROLLBACK]
    assert rollbacks, "crashes before the commit point must leave rollback records"


TRANSFER_STEPS = 4          # prewrite primary, prewrite secondary, commit primary, commit secondary


@pytest.mark.parametrize("crash_after", range(1, TRANSFER_STEPS + 1))
def test_rollback_records_crash_after_every_step_of_a_two_cell_transfer(make_cluster,
                                                                         crash_after):
    cluster = make_cluster(lock_ttl=1.0, variants=[RollbackRecords()])
    t = cluster.begin()
    t.set("Bob", COLUMN, 10)
    t.set("Joe", COLUMN, 2)
    assert t.commit()
    assert transfer(cluster, "Bob", "Joe", 7, crash_after=crash_after, table="default") \
        == "crashed"
    cluster.clock.advance(2.0)
    committed = crash_after >= 3                # the commit point is the 3rd row transaction
    expected = {("Bob", COLUMN): 3, ("Joe", COLUMN): 9} if committed else \
        {("Bob", COLUMN): 10, ("Joe", COLUMN): 2}
    assert fresh_view(cluster) == expected
    assert fresh_view(cluster) == expected      # the cleanup is final
    assert all_locks(cluster) == []
    assert cluster.check_history().ok
    assert check_invariants(cluster) == []
