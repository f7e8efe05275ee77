"""Spanner's TrueTime as the kit simulates it, its timestamps, commit wait and the
external-order check (seed 004; notebook 10)."""
from __future__ import annotations

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.checker import TxnRecord, check_history
from percolator_ref.model import Cell
from percolator_ref.spanner.timestamps import TrueTimeTimestamps
from percolator_ref.spanner.truetime import EPSILON_US, TTInterval, TrueTime, true_us

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
