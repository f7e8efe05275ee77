"""Drivers of a :class:`~percolator_ref.workloads.tpce.Tpce` workload.

- :func:`run_rounds` is deterministic (``clients`` transactions run
  concurrently in each round: all read, then all commit in a seeded order),
  for tests and notebooks;
- :func:`run_threads` runs real emulator threads for a number of seconds
  (with ``latency`` modeling a round trip per row transaction) and measures tpsE
  over that window only: what finishes after it (in-flight transactions, the
  aggregator's backlog) is reported apart, never divided into the rate.
"""
from __future__ import annotations

import gc
import random
import threading
import time
from contextlib import contextmanager

from ...interceptors import Latency, attach
from .schema import BROKER_COMM, positive_int
from .stats import summarize
from .transactions import TRANSACTIONS


def run_rounds(w, clients: int = 4, rounds: int = 100, aggregate_every: int = 10,
               progress: bool = False):
    """Deterministic concurrency: in each round ``clients`` transactions all read, then
    all commit in a seeded order (so they are all concurrent); an aborted one is
    retried in the next round. With the broker fix, an aggregator runs every
    ``aggregate_every`` rounds. Ends with ``w.drain()``; returns ``w.stats``.
    """
    positive_int(clients, "clients")
    positive_int(rounds, "rounds", 0)
    positive_int(aggregate_every, "aggregate_every")
    from tqdm.auto import tqdm
    rng = random.Random(w.config.seed * 7919 + clients)
    jobs = [None] * clients
    for r in tqdm(range(rounds), desc=f"tpce rounds x{clients}", disable=not progress,
                  leave=False):
        run_round(w, jobs, rng)
        if w.config.broker_fix and (r + 1) % aggregate_every == 0:
            w.aggregate()
    for job in jobs:                                      # unfinished trade results go back
        if job is not None and job[0] == "trade_result":
            w.pending.appendleft(job[1][0])
    w.drain()
    return w.stats


def run_round(w, jobs: list, rng: random.Random) -> None:
    """One round: each client's job reads (new jobs drawn for idle clients), then all
    commit in a shuffled order; a committed client's slot in ``jobs`` becomes None."""
    staged = []
    for c in range(len(jobs)):
        if jobs[c] is None:
            feed_busy = any(j is not None and j[0] == "market_feed" for j in jobs)
            jobs[c] = w.next_job(rng, feed_busy)
        name, args = jobs[c]
        t = w.store.begin()
        staged.append((c, t, TRANSACTIONS[name](t, *args), time.perf_counter()))
    rng.shuffle(staged)
    for c, t, result, started in staged:
        name = jobs[c][0]
        if t.commit():
            w.record_commit(name, result, started)
            jobs[c] = None
        else:
            w.record_abort(name)


@contextmanager
def modeled_latency(cluster, seconds: float):
    """While inside, every row transaction on ``cluster`` first waits ``seconds`` (a
    modeled round trip, slept outside the store's lock so clients overlap)."""
    if not seconds:
        yield
        return
    with attach(cluster.bigtable, Latency(seconds)):
        yield


def check_thread_settings(w, threads, seconds, latency) -> None:
    """Raise TypeError/ValueError naming the bad argument of :func:`run_threads`."""
    positive_int(threads, "threads")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) or latency < 0:
        raise ValueError(f"latency must be a number of seconds >= 0, got {latency!r}")
    if latency and w.cluster is None:
        raise ValueError("latency is modeled on a Percolator cluster only")


def emulator_threads(w, threads: int, aggregate_period: float, stop: threading.Event) -> list:
    """The (unstarted) emulator threads, plus an aggregator thread with the broker fix."""
    def emulator(i: int) -> None:
        rng = random.Random(w.config.seed * 100003 + w.stream * 1009 + i)
        while not stop.is_set():
            w.emulate_one(rng)

    def aggregator() -> None:
        while not stop.wait(aggregate_period):
            w.aggregate(stop=stop)

    workers = [threading.Thread(target=emulator, args=(i,), daemon=True)
               for i in range(threads)]
    if w.config.broker_fix:
        workers.append(threading.Thread(target=aggregator, daemon=True))
    return workers


def run_threads(w, threads: int = 4, seconds: float = 2.0, latency: float = 0.0,
                aggregate_period: float = 0.05, progress: bool = False,
                drain: bool = True) -> dict:
    """Emulator threads for ``seconds``: each draws transactions from the mix (as customer
    or market emulator). ``latency`` (seconds) models a round trip per row transaction
    while the threads run (slept outside the store's lock, so threads overlap).

    Returns :func:`summarize` of the window (counts, tpsE and CPU up to the moment
    the threads are told to stop), plus ``stop_seconds`` (how long the threads then
    took to finish what they had in flight) and, with the broker fix,
    ``side_rows_unfolded`` (side rows still waiting for the aggregation when they
    had stopped). Then drains (untimed) unless ``drain=False``. Earlier garbage is
    collected before the window opens, so a full collection of what earlier work left
    behind (it stops every thread) is not charged to this window.
    """
    check_thread_settings(w, threads, seconds, latency)
    gc.collect()
    stop = threading.Event()
    workers = emulator_threads(w, threads, aggregate_period, stop)
    with modeled_latency(w.cluster, latency):
        cpu0, t0 = time.process_time(), time.perf_counter()
        for worker in workers:
            worker.start()
        wait_with_progress(w, seconds, t0, f"tpce {threads} threads", progress)
        stop.set()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        window = w.stats.snapshot()
        for worker in workers:
            worker.join()
        stopping = time.perf_counter() - t0 - elapsed
    summary = summarize(window, elapsed, cpu)
    summary.update(threads=threads, latency_s=latency, stop_seconds=round(stopping, 3),
                   side_rows_unfolded=count_side_rows(w) if w.config.broker_fix else None)
    if drain:
        w.drain()
    return summary


def count_side_rows(w) -> int:
    """Side rows (the broker fix's) not yet folded into their broker row."""
    t = w.store.begin()
    rows = {row for row, _col, _value in t.scan(BROKER_COMM)}
    t.commit()
    return len(rows)


def observer_sweep(cluster, stop: threading.Event) -> int:
    """One pass over the notifications pending now, ending early once ``stop`` is set;
    the observer runs that committed."""
    from ...observers import process_notification
    runs = 0
    for notification in list(cluster.bigtable.notifications()):
        if stop.is_set():
            break
        runs += process_notification(cluster, notification)
    return runs


def wait_with_progress(w, seconds: float, t0: float, desc: str, progress: bool) -> None:
    """Sleep until ``seconds`` after ``t0``, showing a progress bar with the live tpsE."""
    from tqdm.auto import tqdm
    with tqdm(total=round(seconds, 1), desc=desc, unit="s", disable=not progress,
              leave=False, bar_format="{l_bar}{bar}| {n:.1f}/{total}s {postfix}") as bar:
        while (elapsed := time.perf_counter() - t0) < seconds:
            time.sleep(min(0.1, seconds - elapsed))
            bar.n = round(min(time.perf_counter() - t0, seconds), 1)
            bar.set_postfix_str(f"tpsE={w.stats.trade_results / max(elapsed, 1e-9):.0f}")
