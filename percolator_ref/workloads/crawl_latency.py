"""Figure 7, laptop-sized: median delay from crawl to clustering, against the crawl rate.

The paper's §3.1 (Figure 7) crawls documents at a uniform rate into a
repository of fixed size and measures the **median delay between a document
being crawled and being clustered**, against the **crawl rate** (percent of
the repository crawled per hour), for Percolator and for MapReduce. Here the
same measure is taken on the kit's indexing pipeline
(:mod:`percolator_ref.workloads.indexing`), on one worker per side:

- **incremental**: the observers process the notifications one at a time, in
  index order, whenever there is one; a document is *clustered* when the
  clustering observer's run for it commits (its acknowledgement
  ``parsed:ack_clustering`` is the run's primary);
- **batch**: :func:`~percolator_ref.workloads.indexing.batch_recompute` passes
  run back to back, as repeated MapReduces do; a pass covers the documents
  crawled before it started, and clusters them when it ends.

Time is a worker's busy time. ``cost="row_transactions"`` counts one unit per
row transaction (deterministic); ``cost="seconds"`` uses the CPU time each
step really took on this machine (the worker thread's own, so other processes
sharing the machine do not count as its work). The documents are crawled at evenly spaced
times; nothing sleeps: a worker that is idle jumps to the next crawl. The
hour is fixed by one measured quantity: a batch pass over the repository, at
the lowest rate, takes :data:`PASS_SHARE_OF_HOUR` of an hour (the paper's
three MapReduces took about 20 minutes per pass at 1%).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from .indexing import DOCS, batch_recompute, install, load, recrawl, synthetic_corpus

PASS_SHARE_OF_HOUR = 1 / 3          # a batch pass at the lowest rate = 20 minutes
COSTS = ("row_transactions", "seconds")


def _worker_cpu_time() -> float:
    """The worker thread's CPU seconds. Pyodide's ``time`` has no ``thread_time``; a
    browser's Python runs one thread, so there the process's CPU time is that thread's."""
    clock = getattr(time, "thread_time", None) or time.process_time
    return clock()


@dataclass
class LatencyPoint:
    """One crawl rate: the median crawl-to-clustering delay of each side, in minutes."""
    rate: float                       # share of the repository crawled per hour
    documents: int                    # documents crawled in the run
    incremental_median_min: float
    batch_median_min: float
    incremental_busy: float           # share of the crawl's duration the observers worked
    incremental_backlog: int          # documents not yet clustered when the crawl stopped


def _meter(cluster, cost: str):
    """``measure(work) -> cost`` of ``work()`` on ``cluster``, in the unit ``cost`` names."""
    def measure(work) -> float:
        before, start = cluster.tracer.counts.row_transactions, _worker_cpu_time()
        work()
        if cost == "seconds":
            return _worker_cpu_time() - start
        return float(cluster.tracer.counts.row_transactions - before)
    return measure


def _fresh(pages: list, incremental: bool):
    from ..services.clock import ManualClock
    from ..cluster import Cluster
    cluster = Cluster(clock=ManualClock())
    if incremental:
        install(cluster)
    load(cluster, pages)
    if incremental:
        cluster.run_observers()
    else:
        batch_recompute(cluster)
    return cluster


def _clustered_rows(cluster) -> list:
    """A list that collects the document rows whose clustering run commits (a subscription)."""
    rows: list = []

    def on_event(e) -> None:
        if e.table == DOCS and e.step == "commit-primary" and any(
                c.column.startswith("parsed:ack_clustering") for c in e.changes):
            rows.append(e.row)
    cluster.tracer.subscribe(on_event)
    return rows


def incremental_delays(pages: list, crawl: list, times: list, cost: str) -> tuple:
    """``(delays, busy, backlog at the crawl's end)``: the observers' worker, one notification a time."""
    from ..observers import process_notification
    cluster = _fresh(pages, incremental=True)
    measure, done = _meter(cluster, cost), _clustered_rows(cluster)
    waiting: dict = {}
    delays, now, busy, i, backlog = [], 0.0, 0.0, 0, None
    while i < len(crawl) or waiting:
        while i < len(crawl) and times[i] <= now:
            load(cluster, [crawl[i]])                      # the crawler's work, not the worker's
            waiting.setdefault(crawl[i].url, []).append(times[i])
            i += 1
        if backlog is None and i == len(crawl):
            backlog = sum(len(v) for v in waiting.values())
        note = next(iter(cluster.bigtable.notifications()), None)
        if note is None:
            now = times[i]                                  # idle until the next crawl
            continue
        spent = measure(lambda: process_notification(cluster, note))
        now, busy = now + spent, busy + spent
        for url in done:
            delays += [now - t for t in waiting.pop(url, [])]
        done.clear()
    return delays, busy, backlog or 0


def batch_delays(pages: list, crawl: list, times: list, cost: str) -> list:
    """Delays when back-to-back batch passes each cluster what was crawled before they began."""
    cluster = _fresh(pages, incremental=False)
    measure = _meter(cluster, cost)
    delays, now, i = [], 0.0, 0
    while i < len(crawl):
        now = max(now, times[i])                            # a pass needs something new
        first = i
        while i < len(crawl) and times[i] <= now:
            i += 1
        load(cluster, crawl[first:i])
        now += measure(lambda: batch_recompute(cluster))
        delays += [now - t for t in times[first:i]]
    return delays


def pass_cost(pages: list, cost: str) -> float:
    """What one batch pass over the repository costs (the clock's yardstick)."""
    cluster = _fresh(pages, incremental=False)
    return _meter(cluster, cost)(lambda: batch_recompute(cluster))


def crawl_latency_experiment(n_pages: int = 100, rates=(0.01, 0.1, 0.4, 0.8), hours: float = 1.0,
                             seed: int = 0, cost: str = "row_transactions") -> list:
    """One :class:`LatencyPoint` per crawl rate (share of the repository per hour)."""
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    if not rates or any(isinstance(r, bool) or not isinstance(r, (int, float)) or r <= 0
                        for r in rates):
        raise ValueError(f"rates must be positive numbers, got {rates!r}")
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours <= 0:
        raise ValueError(f"hours must be a positive number, got {hours!r}")
    pages = synthetic_corpus(n_pages, seed=seed)
    hour = pass_cost(pages, cost) / PASS_SHARE_OF_HOUR
    return [_point(pages, rate, hours, hour, seed, cost) for rate in rates]


def _point(pages: list, rate: float, hours: float, hour: float, seed: int, cost: str) -> LatencyPoint:
    n = max(1, round(rate * len(pages) * hours))
    crawl = []
    while len(crawl) < n:                                   # past 100%: pages come round again
        crawl += recrawl(pages, min(len(pages), n - len(crawl)), seed=seed + len(crawl))
    times = [(k + 0.5) * hours * hour / n for k in range(n)]
    inc, busy, backlog = incremental_delays(pages, crawl, times, cost)
    bat = batch_delays(pages, crawl, times, cost)
    minutes = 60 / hour
    return LatencyPoint(rate, n, round(statistics.median(inc) * minutes, 2),
                        round(statistics.median(bat) * minutes, 2),
                        round(busy / (hours * hour), 3), backlog)
