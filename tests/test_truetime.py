"""Spanner's TrueTime as the kit simulates it, its timestamps, commit wait and the
external-order check (seed 004; notebook 10)."""
from __future__ import annotations

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.checking.checker import TxnRecord, check_history
from percolator_ref.model import Cell
from percolator_ref.services.truetime import EPSILON_US, TTInterval, TrueTime, true_us
from percolator_ref.variants.truetime import (SpannerTimestamps, TrueTimeTimestamps,
                                              TrueTimeTransaction, on_node, truetime_source)
from percolator_ref.workloads import hermitage
from percolator_ref.workloads.bank import COLUMN, check_invariants, run_bank, transfer
from percolator_ref.workloads.external_order import (read_across_a_commit, transfer_latencies,
                                                     truetime_cluster, write_then_read)

from helpers import all_locks, fresh_view

X = Cell("default", "x", "c")


def two_nodes(clock=None, fast=EPSILON_US, slow=-EPSILON_US, epsilon_us=EPSILON_US):
    """Node A's clock runs ``fast`` us ahead of true time, node B's ``slow``."""
    return TrueTime(clock or ManualClock(1.0), epsilon_us, ["A", "B"], {"A": fast, "B": slow})


# -- TrueTime ------------------------------------------------------------------------

def test_epsilon_is_spanners_seven_milliseconds():
    assert EPSILON_US == 7_000


def test_now_is_an_interval_two_epsilon_wide_that_contains_true_time():
    clock = ManualClock(3.0)
    tt = TrueTime(clock, nodes=5, seed=11)
    for _ in range(50):
        for node in tt.nodes:
            interval = tt.now(node)
            assert isinstance(interval, TTInterval) and interval.width == 2 * EPSILON_US
            assert interval.earliest <= true_us(clock) <= interval.latest
        clock.advance(0.0013)


def test_offsets_are_bounded_by_epsilon_and_fixed_by_the_seed():
    a = TrueTime(ManualClock(), 500, nodes=8, seed=3)
    b = TrueTime(ManualClock(), 500, nodes=8, seed=3)
    c = TrueTime(ManualClock(), 500, nodes=8, seed=4)
    assert a.offsets == b.offsets != c.offsets
    assert all(abs(o) <= 500 for o in a.offsets.values())


def test_after_and_before_follow_the_interval():
    tt = two_nodes()                         # true time 1 s = 1_000_000 us; A reads 1_007_000
    assert tt.now("A") == TTInterval(1_000_000, 1_014_000)
    assert tt.after(999_999, "A") and not tt.after(1_000_000, "A")
    assert tt.before(1_014_001, "A") and not tt.before(1_014_000, "A")


def test_wait_until_after_sleeps_on_the_clock_until_earliest_passes():
    clock = ManualClock(1.0)
    tt = two_nodes(clock)
    waited = tt.wait_until_after(1_010_000, "B")        # B's earliest is true - 14 ms
    assert tt.after(1_010_000, "B")
    assert waited == 1_010_000 + 1 - (1_000_000 - 2 * EPSILON_US)
    assert true_us(clock) == 1_000_000 + waited


@pytest.mark.parametrize("kwargs, error", [
    ({"epsilon_us": -1}, ValueError), ({"epsilon_us": 1.5}, ValueError),
    ({"nodes": 0}, ValueError), ({"nodes": "AB"}, TypeError), ({"nodes": ["A", "A"]}, ValueError),
    ({"nodes": ["A"], "offsets": {"A": 8_000}}, ValueError),
    ({"nodes": ["A"], "offsets": {"B": 0}}, ValueError), ({"seed": "x"}, TypeError)])
def test_bad_arguments_are_refused_by_name(kwargs, error):
    with pytest.raises(error) as info:
        TrueTime(ManualClock(), **kwargs)
    assert list(kwargs)[-1] in str(info.value)


def test_an_unknown_node_is_refused_by_name():
    with pytest.raises(ValueError, match="node"):
        two_nodes().now("C")


# -- timestamps ------------------------------------------------------------------------

def test_timestamps_are_latest_and_strictly_increasing_per_node_on_a_stopped_clock():
    source = TrueTimeTimestamps(two_nodes(), commit_wait=False, read_at_safe_time=False)
    stamps = [source.timestamp("A") for _ in range(5)]
    assert stamps[0] >= source.truetime.now("A").latest
    assert all(b > a for a, b in zip(stamps, stamps[1:]))


def test_two_nodes_never_hand_out_the_same_timestamp():
    tt = TrueTime(ManualClock(1.0), 7_000, ["A", "B"], {"A": 0, "B": 0})    # same reading
    source = TrueTimeTimestamps(tt, commit_wait=False, read_at_safe_time=False)
    a = {source.timestamp("A") for _ in range(20)}
    b = {source.timestamp("B") for _ in range(20)}
    assert not a & b and len(a) == len(b) == 20


def test_commit_wait_returns_the_timestamp_only_once_it_has_certainly_passed():
    clock = ManualClock(1.0)
    source = TrueTimeTimestamps(two_nodes(clock))
    ts = source.commit_timestamp("A")
    assert source.truetime.after(ts, "A") and true_us(clock) > ts
    assert 0 < source.waits.commit[-1] <= 2 * EPSILON_US + 2      # at most 2ε (seed 004)


def test_without_commit_wait_true_time_can_be_below_the_commit_timestamp():
    clock = ManualClock(1.0)
    source = TrueTimeTimestamps(two_nodes(clock), commit_wait=False)
    ts = source.commit_timestamp("A")
    assert true_us(clock) < ts and source.waits.commit == [0]


def test_peek_is_a_lower_bound_on_every_later_timestamp():
    source = TrueTimeTimestamps(two_nodes(), commit_wait=False, read_at_safe_time=False)
    bound = source.peek()
    assert all(source.timestamp(n) >= bound for n in ("A", "B", "B", "A"))


def test_bad_source_arguments_are_refused_by_name():
    with pytest.raises(TypeError, match="truetime"):
        TrueTimeTimestamps(object())
    with pytest.raises(TypeError, match="commit_wait"):
        TrueTimeTimestamps(two_nodes(), commit_wait=1)


# -- the external-order check ----------------------------------------------------------

def record(client, start, commit=None, *, began, ended=None, reads=(), writes=()):
    r = TxnRecord(client, start, commit, "committed", list(reads), list(writes))
    r.began_at, r.ended_at = began, ended
    return r


def test_external_order_flags_a_reader_that_began_after_a_commit_and_missed_it():
    # W commits x at 1_014_000 (a fast clock) and is acknowledged at 1.0 s; R begins at
    # 1.002 s on a slow clock with start_ts 1_002_000: SI is satisfied, real time is not.
    writer = record("W", 1_000_500, 1_014_000, began=0.999, ended=1.0, writes=[(X, "PUT", 1)])
    reader = record("R", 1_002_000, began=1.002, ended=1.003, reads=[(X, None, None)])
    report = check_history([writer, reader])
    assert report.names() == ["external order"]
    assert report.anomalies[0].clients == ("R", "W")


def test_external_order_allows_a_reader_that_began_before_the_acknowledgement():
    writer = record("W", 1_000_500, 1_014_000, began=0.999, ended=1.0, writes=[(X, "PUT", 1)])
    reader = record("R", 1_002_000, began=1.0, reads=[(X, None, None)])     # not strictly after
    assert check_history([writer, reader]).ok


def test_external_order_ignores_records_without_real_times():
    writer = TxnRecord("W", 10, 20, "committed", [], [(X, "PUT", 1)])
    reader = TxnRecord("R", 15, None, "committed", [(X, None, None)], [])
    assert check_history([writer, reader]).ok


def run_reader_after_writer(cluster, clock, gap_s):
    """W writes x and commits; after ``gap_s`` seconds of real time R reads x."""
    w = cluster.begin()
    w.set("x", "c", "new")
    assert w.commit()
    clock.advance(gap_s)
    r = cluster.begin()
    value = r.get("x", "c")
    assert r.commit()
    return value


def test_the_oracle_keeps_the_external_order():
    clock = ManualClock()
    cluster = Cluster(clock=clock)
    for _ in range(5):
        assert run_reader_after_writer(cluster, clock, 0.001) == "new"
    report = cluster.check_history()
    assert report.ok and report.reads == 5
    assert all(r.began_at is not None for r in cluster.history.records)


# -- the variant: attached through the extension point -----------------------------------

FAST_A_SLOW_B = {"A": EPSILON_US, "B": -EPSILON_US}


def spanner(**kwargs):
    """A two-machine TrueTime: A's clock ε ahead of true time, B's ε behind."""
    kwargs.setdefault("offsets", {"A": EPSILON_US, "B": -EPSILON_US})
    return SpannerTimestamps(nodes=["A", "B"], **kwargs)


def test_the_variant_supplies_the_timestamp_source_and_the_commit_timestamp_step():
    clock = ManualClock(1.0)
    cluster = Cluster(clock=clock, variants=[spanner()])
    source = truetime_source(cluster)
    assert cluster.oracle is source and isinstance(source, TrueTimeTimestamps)
    assert "commit_timestamp" in vars(TrueTimeTransaction)
    assert set(vars(TrueTimeTransaction)) - set(vars(object)) - {"__module__", "__doc__",
                                                                 "__dict__", "__weakref__"} \
        == {"commit_timestamp"}
    with on_node("A"):
        t = cluster.begin()
        assert t.start_ts >= 1_000_000 + 2 * EPSILON_US          # A's latest
        t.set("x", "c", 1)
        assert t.commit()
    assert source.node_of(t.start_ts) == source.node_of(t.commit_ts) == "A"
    assert t.commit_ts > t.start_ts and true_us(clock) > t.commit_ts       # commit wait
    [waited] = source.waits.commit                  # 2ε on a still clock (+ the node's residue)
    assert 2 * EPSILON_US < waited <= 2 * EPSILON_US + 2


def test_a_cluster_without_the_variant_has_no_truetime_source():
    with pytest.raises(ValueError, match="SpannerTimestamps"):
        truetime_source(Cluster(clock=ManualClock()))


def test_bad_variant_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="epsilon_us"):
        SpannerTimestamps(epsilon_us=-1)
    with pytest.raises(TypeError, match="read_at_safe_time"):
        SpannerTimestamps(read_at_safe_time="yes")
    with pytest.raises(ValueError, match="node"):
        cluster = Cluster(clock=ManualClock(), variants=[spanner()])
        with on_node("C"):
            cluster.begin()


def test_without_commit_wait_a_later_reader_misses_the_write_and_the_checker_says_so():
    seen = write_then_read(truetime_cluster(offsets=FAST_A_SLOW_B, commit_wait=False))
    assert seen.value is None and seen.missed and seen.reader_start_ts < seen.writer_commit_ts
    assert seen.reader_began_at > seen.acknowledged_at
    assert seen.report.names() == ["external order"]      # snapshot isolation itself holds


def test_with_commit_wait_the_later_reader_sees_the_write():
    seen = write_then_read(truetime_cluster(offsets=FAST_A_SLOW_B, commit_wait=True))
    assert seen.value == "new" and seen.reader_start_ts > seen.writer_commit_ts
    assert seen.report.ok


def test_the_oracle_keeps_the_same_transactions_in_order():
    seen = write_then_read(Cluster(clock=ManualClock(1.0)))
    assert seen.value == "new" and seen.report.ok


def test_transfer_latencies_pay_two_epsilon_per_wait():
    rows = {r["timestamps"]: r for r in transfer_latencies(7_000, 1e-5, transfers=5)}
    oracle = rows["oracle (one round trip)"]
    both = rows["TrueTime, commit wait + safe-time reads"]
    only = rows["TrueTime, commit wait"]
    assert oracle["commit_wait_ms"] == oracle["start_wait_ms"] == 0
    assert 14.0 < only["commit_wait_ms"] <= 14.01 and only["start_wait_ms"] == 0
    assert 14.0 < both["start_wait_ms"] <= 14.01 and 14.0 < both["commit_wait_ms"] <= 14.01
    # eight round trips with the oracle (2 gets, 2 prewrites, 2 commits, 2 timestamps)
    assert oracle["latency_ms"] == pytest.approx(0.08, abs=1e-3)
    assert both["latency_ms"] == pytest.approx(0.06 + 28, abs=0.02)


def test_without_reads_at_a_safe_time_snapshot_isolation_breaks():
    cluster = truetime_cluster(offsets=FAST_A_SLOW_B, read_at_safe_time=False)
    seen, report = read_across_a_commit(cluster)     # R on fast A, W on slow B
    assert seen == ("old", "new")                    # half of W: a fractured read
    assert report.names() == ["stale read"]


def test_with_reads_at_a_safe_time_the_snapshot_is_whole():
    cluster = truetime_cluster(offsets=FAST_A_SLOW_B, read_at_safe_time=True)
    seen, report = read_across_a_commit(cluster)
    assert seen == ("old", "old") and report.ok


# -- TrueTime keeps the paper's guarantees -------------------------------------------------

@pytest.mark.parametrize("scenario", hermitage.SCENARIOS, ids=lambda s: s.__name__)
def test_truetime_passes_the_hermitage_scenarios(make_cluster, scenario):
    cluster = make_cluster(variants=[SpannerTimestamps(seed=1)])
    result = scenario(cluster)
    assert result.observed == result.expected and result.history_ok and result.ok
    assert cluster.check_history().ok


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
@pytest.mark.parametrize("seed", [3, 7])
def test_truetime_passes_the_bank_with_crashes(make_cluster, seed):
    cluster = make_cluster(lock_ttl=1.0, variants=[SpannerTimestamps(seed=seed)])
    result = run_bank(cluster, threads=3, transfers=60, crash_rate=0.3, seed=seed)
    assert result.ok, result
    assert result.history.ok and result.violations == []
    source = truetime_source(cluster)
    assert len(source.waits.commit) > 0 and min(source.waits.commit) > 0


TRANSFER_STEPS = 4          # prewrite primary, prewrite secondary, commit primary, commit secondary


@pytest.mark.parametrize("crash_after", range(1, TRANSFER_STEPS + 1))
def test_truetime_crash_after_every_step_of_a_two_cell_transfer(make_cluster, crash_after):
    cluster = make_cluster(lock_ttl=1.0, variants=[SpannerTimestamps(seed=2)])
    t = cluster.begin()
    t.set("Bob", COLUMN, 10)
    t.set("Joe", COLUMN, 2)
    assert t.commit()
    with cluster.tracer.record() as events:
        assert transfer(cluster, "Bob", "Joe", 7, crash_after=crash_after,
                        table="default") == "crashed"
    steps = [e.step for e in events if e.step not in ("get",)]
    assert steps == ["prewrite-primary", "prewrite-secondary", "commit-primary",
                     "commit-secondary"][:crash_after]
    cluster.clock.advance(2.0)
    committed = crash_after >= 3                # the commit point is the 3rd row transaction
    expected = {("Bob", COLUMN): 3, ("Joe", COLUMN): 9} if committed else \
        {("Bob", COLUMN): 10, ("Joe", COLUMN): 2}
    assert fresh_view(cluster) == expected
    assert fresh_view(cluster) == expected      # the cleanup is final
    assert all_locks(cluster) == []
    assert cluster.check_history().ok
    assert check_invariants(cluster) == []


def test_the_truetime_module_examples_run():
    import doctest

    from percolator_ref.services import truetime
    assert doctest.testmod(truetime).failed == 0


def test_the_oracle_keeps_the_external_order_under_threads_on_the_wall_clock():
    cluster = Cluster()                               # WallClock: real threads, real time
    result = run_bank(cluster, threads=3, transfers=60, crash_rate=0.0, seed=5)
    assert result.ok and result.history.ok            # the external-order check included
    records = [r for r in cluster.history.records if r.began_at is not None]
    acknowledged = [r for r in records if r.ended_at is not None and r.writes]
    ordered = sum(1 for w in acknowledged for r in records if r.began_at > w.ended_at
                  and {c for c, _, _ in r.reads} & {c for c, _, _ in w.writes})
    assert ordered > 0                  # the check had real-time-ordered pairs to check


# -- the simulation: no oracle, each machine its own TrueTime -----------------------------

def test_the_simulation_runs_tpce_on_truetime_deterministically():
    from percolator_ref.sim import Calibration, ScaleSettings, sweep
    fixed = Calibration(row_transaction_s=1.8e-05, worker_cpu_s=6.3e-06, oracle_request_s=1e-05,
                        oracle_timestamp_s=1.2e-08, lock_service_s=1.2e-07,
                        rpc_round_trip_s=1.2e-05, source="fixed")
    settings = ScaleSettings(reference_machines=2, seed=0, truetime_epsilon_us=EPSILON_US,
                             warmup_s=0.1, measure_s=0.05)
    first = sweep([1, 2], settings, fixed)["points"]
    assert first == sweep([1, 2], settings, fixed)["points"]      # same seed, same points
    for point in first:
        assert point["invariants_ok"] and point["trade_results"] > 0
        assert point["oracle_utilization"] == 0.0                  # no oracle at all
        assert point["latency_ms_p50"] >= 2 * EPSILON_US / 1000    # every transaction waits 2ε+


def test_scale_refuses_a_negative_truetime_epsilon(capsys):
    from percolator_ref.commands import main
    assert main(["scale", "--truetime", "-1", "--calibration", "x.json"]) == 2
    assert "--truetime" in capsys.readouterr().err
