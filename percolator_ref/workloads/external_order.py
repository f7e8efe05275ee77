"""The oracle against TrueTime on the same transactions (notebook 10).

- :func:`truetime_cluster`: an in-memory cluster whose timestamps come from
  TrueTime (:class:`~percolator_ref.variants.truetime.SpannerTimestamps`) on
  simulated machines, on a :class:`~percolator_ref.ManualClock`;
- :func:`write_then_read`: a writer commits on one machine; a little later in
  real time a reader on another machine reads the cell. Did it see the write,
  and what does the checker say?
- :func:`read_across_a_commit`: a reader reads one cell before a writer commits
  and one after: a whole snapshot, or half of the writer?
- :func:`transfer_latencies`: two-cell transfers one after another, each row
  transaction (and, for the oracle, each timestamp) paying a modelled round
  trip on the cluster clock: the real time from ``begin()`` to the commit's
  acknowledgement, and the waits TrueTime added.

Everything runs on the manual clock, so every number is the same on every run.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import mean
from typing import Optional

from ..checking.checker import CheckReport
from ..cluster import Cluster
from ..interceptors import attach
from ..services.clock import ManualClock
from ..services.truetime import EPSILON_US
from ..variants import Variant
from ..variants.truetime import SpannerTimestamps, on_node, truetime_source


def truetime_cluster(epsilon_us: int = EPSILON_US, offsets: Optional[dict] = None,
                     nodes=("A", "B"), *, commit_wait: bool = True,
                     read_at_safe_time: bool = True, start_s: float = 1.0,
                     seed: int = 0) -> Cluster:
    """An in-memory cluster on ``ManualClock(start_s)`` with TrueTime timestamps on ``nodes``."""
    variant = SpannerTimestamps(epsilon_us, list(nodes), offsets, seed, commit_wait=commit_wait,
                                read_at_safe_time=read_at_safe_time)
    return Cluster(clock=ManualClock(start_s), variants=[variant])


@dataclass(frozen=True)
class WriteThenRead:
    """What :func:`write_then_read` saw. Times in seconds on the cluster clock."""
    value: object                 # what the reader read
    writer_start_ts: int
    writer_commit_ts: int
    acknowledged_at: float        # the writer's commit returned
    reader_began_at: float
    reader_start_ts: int
    report: CheckReport

    @property
    def missed(self) -> bool:
        return self.value != "new"


def write_then_read(cluster: Cluster, gap_s: float = 0.001, writer_node: str = "A",
                    reader_node: str = "B") -> WriteThenRead:
    """W sets ``x`` to ``"new"`` on ``writer_node`` and commits; ``gap_s`` seconds after the
    acknowledgement R begins on ``reader_node`` and reads ``x``. (An oracle cluster ignores
    the nodes.)"""
    with on_node(writer_node):
        w = cluster.begin()
        w.set("x", "c", "new")
        assert w.commit()
    acknowledged = cluster.clock.now()
    cluster.clock.advance(gap_s)
    with on_node(reader_node):
        began = cluster.clock.now()
        r = cluster.begin()
        value = r.get("x", "c")
        assert r.commit()
    return WriteThenRead(value, w.start_ts, w.commit_ts, acknowledged, began, r.start_ts,
                         cluster.check_history())


def read_across_a_commit(cluster: Cluster, reader_node: str = "A",
                         writer_node: str = "B") -> tuple:
    """R (on ``reader_node``) reads ``x``; W (on ``writer_node``) sets ``x`` and ``y`` to
    ``"new"`` and commits; R then reads ``y``. ``(x, y)`` as R read them, and the
    checker's report. Both start at ``"old"``."""
    with on_node(reader_node):
        setup = cluster.begin()
        setup.set("x", "c", "old")
        setup.set("y", "c", "old")
        assert setup.commit()
        r = cluster.begin()
        x = r.get("x", "c")
    with on_node(writer_node):
        w = cluster.begin()
        w.set("x", "c", "new")
        w.set("y", "c", "new")
        assert w.commit()
    with on_node(reader_node):
        y = r.get("y", "c")
        assert r.commit()
    return (x, y), cluster.check_history()


class ClockRoundTrip:
    """Interceptor: every row transaction pays ``seconds`` on the cluster clock first."""

    def __init__(self, clock, seconds: float):
        self.clock, self.seconds = clock, seconds

    def before(self, rt) -> None:
        self.clock.sleep(self.seconds)


class RemoteOracle(Variant):
    """The oracle one round trip away: each timestamp pays ``seconds`` on the cluster clock."""

    name = "remote-oracle"

    def __init__(self, seconds: float):
        self.seconds = seconds

    def timestamps(self, cluster, oracle):
        return RemoteSource(cluster.clock, oracle, self.seconds)


class RemoteSource:
    """A timestamp source that pays a round trip on ``clock`` before each timestamp."""

    def __init__(self, clock, oracle, seconds: float):
        self.clock, self.oracle, self.seconds = clock, oracle, seconds

    def get_timestamp(self) -> int:
        self.clock.sleep(self.seconds)
        return self.oracle.get_timestamp()

    def peek(self) -> int:
        return self.oracle.peek()


def run_transfers(cluster: Cluster, transfers: int, round_trip_s: float, seed: int) -> list:
    """``transfers`` two-cell transfers one after another (row transactions pay the round trip);
    the latency of each, in seconds, from the history's real times."""
    rng = random.Random(seed)
    t = cluster.begin()
    t.set("Bob", "bal", 1_000)
    t.set("Joe", "bal", 1_000)
    assert t.commit()
    with attach(cluster.bigtable, ClockRoundTrip(cluster.clock, round_trip_s)):
        for _ in range(transfers):
            t = cluster.begin()
            bob, joe = t.get("Bob", "bal"), t.get("Joe", "bal")
            amount = rng.randint(1, 9)
            t.set("Bob", "bal", bob - amount)
            t.set("Joe", "bal", joe + amount)
            assert t.commit()
    assert cluster.check_history().ok
    return [r.ended_at - r.began_at for r in cluster.history.records[1:]]


def transfer_latencies(epsilon_us: int, round_trip_s: float, transfers: int = 20,
                       seed: int = 0) -> list:
    """Rows ``{timestamps, epsilon_ms, latency_ms, start_wait_ms, commit_wait_ms}`` for the
    oracle and for TrueTime with commit wait only, and with commit wait plus reads at a safe
    time (three machines, clock offsets drawn with ``seed`` within ±ε). Without any wait
    the transfers themselves go wrong (a transfer on a machine whose clock is behind
    misses the one before it), so there is no latency to compare."""
    rows = []
    oracle = Cluster(clock=ManualClock(1.0), variants=[RemoteOracle(round_trip_s)])
    latencies = run_transfers(oracle, transfers, round_trip_s, seed)
    rows.append(latency_row("oracle (one round trip)", None, latencies, [0], [0]))
    for label, waits in (("TrueTime, commit wait", (True, False)),
                         ("TrueTime, commit wait + safe-time reads", (True, True))):
        cluster = truetime_cluster(epsilon_us, None, ("A", "B", "C"), commit_wait=waits[0],
                                   read_at_safe_time=waits[1], seed=seed)
        latencies = run_transfers(cluster, transfers, round_trip_s, seed)
        source = truetime_source(cluster)
        rows.append(latency_row(label, epsilon_us, latencies, source.waits.start[1:],
                                source.waits.commit[1:]))
    return rows


def latency_row(label: str, epsilon_us, latencies: list, start_waits_us: list,
                commit_waits_us: list) -> dict:
    """One row of :func:`transfer_latencies` (milliseconds, means over the transfers)."""
    return {"timestamps": label,
            "epsilon_ms": None if epsilon_us is None else epsilon_us / 1000,
            "latency_ms": round(mean(latencies) * 1000, 3),
            "start_wait_ms": round(mean(start_waits_us) / 1000, 3),
            "commit_wait_ms": round(mean(commit_waits_us) / 1000, 3)}
