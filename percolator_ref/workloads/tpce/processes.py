"""Conveniences: a cluster for the workload, CPU per trade against SQLite, and several
client processes on one shared store (Redis)."""
from __future__ import annotations

import time
from statistics import median

from .schema import TpceConfig, positive_int
from .stats import merge_summaries
from .stores import PercolatorStore, SqliteStore
from .workload import Tpce


def new_cluster(backend=None, record_history: bool = False, clock=None):
    """A cluster for the workload (wall clock unless ``clock`` is given)."""
    from ...cluster import Cluster
    return Cluster(clock=clock, backend=backend, record_history=record_history)


def cpu_per_trade(rounds: int = 400, customers: int = 200, seed: int = 0,
                  broker_fix: bool = False, repeats: int = 3) -> dict:
    """CPU per Trade-Result: Percolator vs SQLite in memory.

    One client, deterministic: both stores run the same sequence of transactions,
    timed on the calling thread's CPU clock (``time.thread_time``: other threads'
    work is not counted). ``repeats`` pairs run the two stores back to back; each
    store's figures are the median over its runs, and ``ratio`` (Percolator's CPU
    over SQLite's) is the median of the pairs' ratios, so one preempted or
    warming-up run does not decide it. The ratio is the kit's own comparison: the
    paper's "about 30 times the CPU of the baseline system" (§3.3) was measured
    against another system, on many machines.
    """
    positive_int(rounds, "rounds")
    positive_int(repeats, "repeats")
    config = TpceConfig(customers=customers, seed=seed, broker_fix=broker_fix)
    runs = {"percolator": [], "sqlite": []}
    for _ in range(repeats):
        runs["percolator"].append(cpu_run(PercolatorStore(new_cluster(clock=manual_clock())),
                                          config, rounds))
        runs["sqlite"].append(cpu_run(SqliteStore(), config, rounds))
    out = {name: {**results[0], "cpu_seconds": median([r["cpu_seconds"] for r in results]),
                  "cpu_ms_per_trade_result": median([r["cpu_ms_per_trade_result"]
                                                     for r in results]),
                  "violations": max(r["violations"] for r in results)}
           for name, results in runs.items()}
    out["ratio"] = round(median([p["cpu_seconds"] / q["cpu_seconds"]
                                 for p, q in zip(runs["percolator"], runs["sqlite"])]), 2)
    return out


def manual_clock():
    from ...services.clock import ManualClock
    return ManualClock()


def cpu_run(store, config: TpceConfig, rounds: int) -> dict:
    """One store's deterministic one-client run: its counts and CPU (this thread's)."""
    w = Tpce(store, config)
    cpu0 = time.thread_time()
    w.run_rounds(clients=1, rounds=rounds)
    cpu = time.thread_time() - cpu0
    return {"trade_results": w.stats.trade_results,
            "transactions": sum(w.stats.committed.values()),
            "cpu_seconds": round(cpu, 4),
            "cpu_ms_per_trade_result": round(1000 * cpu / max(w.stats.trade_results, 1), 4),
            "violations": len(w.check_invariants())}


def process_worker(cluster, index: int, config: TpceConfig, threads: int, seconds: float,
                   latency: float) -> dict:
    """One client process: emulator threads on the shared database (loaded by the parent)."""
    w = Tpce(cluster, config, load=False, trade_id_prefix=f"T{index:02d}-", stream=index + 1)
    summary = w.run_threads(threads=threads, seconds=seconds, latency=latency, drain=False)
    latencies = list(w.stats.latencies)
    w.drain()
    return {"summary": summary, "latencies": latencies, "violations": list(w.stats.violations),
            "trade_results_total": w.stats.trade_results}


def run_processes(backend: str, config: TpceConfig, processes: int = 2, threads: int = 1,
                  seconds: float = 2.0, latency: float = 0.0, progress: bool = False) -> tuple:
    """TPC-E with ``processes`` client processes (``threads`` emulators each) on one store.

    The parent loads the database, the workers run for ``seconds`` and drain
    their pending trades; the parent then aggregates (broker fix) and checks
    the invariants over the shared store. Returns ``(result, workload)``:
    ``result`` has the keys of :meth:`Tpce.summary` summed over the processes
    (tpsE is the sum of the processes' rates; latency percentiles over every
    process's latencies), ``invariants_ok``, ``violations`` (all of them) and
    ``per_process``.
    """
    from ...harness.multiprocess import run_processes as start_all
    positive_int(processes, "processes")
    positive_int(threads, "threads")
    w = Tpce(new_cluster(backend=backend), config)
    run = start_all(backend, process_worker, processes, (config, threads, seconds, latency),
                    cluster_options={"record_history": False}, progress=progress)
    failed = [r.error or f"exit code {r.exitcode}" for r in run.workers if not
              (r.error is None and r.exitcode == 0)]
    if failed:
        raise RuntimeError("a TPC-E worker process failed:\n" + "\n".join(failed))
    outs = [r.result for r in run.workers]
    return merge_process_results(w, outs, processes, threads, latency), w


def merge_process_results(w: Tpce, outs: list, processes: int, threads: int,
                          latency: float) -> dict:
    """Fold the worker processes' outcomes into ``w``, aggregate, check, and summarize."""
    w.stats.trade_results = sum(o["trade_results_total"] for o in outs)
    w.stats.violations = [v for o in outs for v in o["violations"]]
    if w.config.broker_fix:
        w.aggregate()                      # fold what the workers left for the observer
    violations = w.check_invariants()
    result = merge_summaries([o["summary"] for o in outs], [o["latencies"] for o in outs])
    result.update(processes=processes, threads_per_process=threads, threads=processes * threads,
                  latency_s=latency, invariants_ok=not violations, violations=violations,
                  violation_count=len(violations),
                  per_process=[{k: o["summary"][k] for k in ("tpsE", "trade_results", "committed",
                                                           "aborts", "seconds")} for o in outs])
    return result
