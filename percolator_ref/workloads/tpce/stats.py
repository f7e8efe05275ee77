"""Counts and summaries of a TPC-E run: :class:`Stats`, percentiles, merged summaries."""
from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Stats:
    """Counts of one run: commits and aborted attempts per transaction type, latencies."""
    committed: Counter = field(default_factory=Counter)
    aborted: Counter = field(default_factory=Counter)
    gave_up: Counter = field(default_factory=Counter)
    trade_results: int = 0
    latencies: list = field(default_factory=list)      # seconds per committed logical txn
    violations: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> "Stats":
        """A copy of the counts so far (taken under the lock), to summarize a window."""
        with self.lock:
            return Stats(Counter(self.committed), Counter(self.aborted), Counter(self.gave_up),
                         self.trade_results, list(self.latencies), list(self.violations))

    def abort_rate(self, names=None) -> float:
        names = names or set(self.committed) | set(self.aborted)
        attempts = sum(self.committed[n] + self.aborted[n] for n in names)
        return sum(self.aborted[n] for n in names) / attempts if attempts else 0.0

    def to_frame(self):
        """A pandas DataFrame, one row per transaction type (index ``transaction``):
        ``committed``, ``aborted`` (attempts), ``gave_up`` and ``abort_rate``
        (aborted / attempts). ``aggregate`` counts the broker fix's aggregation
        runs. pandas is imported here, when called."""
        import pandas as pd
        with self.lock:
            names = sorted(set(self.committed) | set(self.aborted) | set(self.gave_up))
            rows = [(n, self.committed[n], self.aborted[n], self.gave_up[n]) for n in names]
        frame = pd.DataFrame(rows, columns=["transaction", "committed", "aborted", "gave_up"])
        attempts = frame.committed + frame.aborted
        frame["abort_rate"] = (frame.aborted / attempts.where(attempts > 0)).fillna(0.0).round(4)
        return frame.set_index("transaction")


def percentile(values: list, p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``; 0.0 if empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(p / 100 * len(ordered))           # nearest-rank definition
    return ordered[min(len(ordered), max(rank, 1)) - 1]


def latency_percentiles(latencies_ms: list) -> dict:
    """``latency_ms_p50/p90/p99`` of a list of milliseconds."""
    return {f"latency_ms_p{p}": round(percentile(latencies_ms, p), 3) for p in (50, 90, 99)}


def summarize(stats: Stats, elapsed: float, cpu: Optional[float] = None) -> dict:
    """tpsE, abort rates and latency percentiles of ``stats`` over ``elapsed`` seconds."""
    s = stats
    with s.lock:
        out = {"seconds": round(elapsed, 3), "trade_results": s.trade_results,
               "tpsE": round(s.trade_results / elapsed, 2) if elapsed > 0 else 0.0,
               "committed": sum(s.committed.values()), "aborts": sum(s.aborted.values()),
               "abort_rate": round(s.abort_rate(), 4),
               "trade_result_abort_rate": round(s.abort_rate(["trade_result"]), 4),
               "gave_up": sum(s.gave_up.values()),
               **latency_percentiles([x * 1000 for x in s.latencies]),
               "mix": dict(sorted(s.committed.items())),
               "aborted_by_txn": dict(sorted(s.aborted.items()))}
    if cpu is not None:
        out["cpu_seconds"] = round(cpu, 3)
        out["cpu_ms_per_trade_result"] = (round(1000 * cpu / s.trade_results, 3)
                                          if s.trade_results else None)
    return out


def merge_summaries(summaries: list, latencies: list) -> dict:
    """One summary of several processes' runs (rates summed, percentiles over all latencies)."""
    committed, aborted = Counter(), Counter()
    for s in summaries:
        committed.update(s["mix"])
        aborted.update(s["aborted_by_txn"])
    stats = Stats(committed=committed, aborted=aborted)
    trade_results = sum(s["trade_results"] for s in summaries)
    cpu = sum(s["cpu_seconds"] for s in summaries)
    return {"seconds": max(s["seconds"] for s in summaries), "trade_results": trade_results,
            "tpsE": round(sum(s["tpsE"] for s in summaries), 2),
            "committed": sum(committed.values()), "aborts": sum(aborted.values()),
            "abort_rate": round(stats.abort_rate(), 4),
            "trade_result_abort_rate": round(stats.abort_rate(["trade_result"]), 4),
            "gave_up": sum(s["gave_up"] for s in summaries),
            **latency_percentiles([x * 1000 for per in latencies for x in per]),
            "mix": dict(sorted(committed.items())), "aborted_by_txn": dict(sorted(aborted.items())),
            "cpu_seconds": round(cpu, 3),
            "cpu_ms_per_trade_result": round(1000 * cpu / trade_results, 3) if trade_results
            else None}
