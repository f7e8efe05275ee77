"""Conveniences: a cluster for the workload, CPU per trade against SQLite, and several
client processes on one shared store (Redis)."""
from __future__ import annotations

import time

from .schema import TpceConfig, positive_int
from .stats import merge_summaries
from .stores import PercolatorStore, SqliteStore
from .workload import Tpce


def new_cluster(backend=None, record_history: bool = False, clock=None):
    """A cluster for the workload (wall clock unless ``clock`` is given)."""
    from ...cluster import Cluster
    return Cluster(clock=clock, backend=backend, record_history=record_history)


def cpu_per_trade(rounds: int = 400, customers: int = 200, seed: int = 0,
                  broker_fix: bool = False) -> dict:
    """CPU (``time.process_time``) per Trade-Result: Percolator vs SQLite in memory.

    One client, deterministic: both stores run the same sequence of transactions.
    """
    from ...clock import ManualClock
    out = {}
    for store in (PercolatorStore(new_cluster(clock=ManualClock())), SqliteStore()):
        w = Tpce(store, TpceConfig(customers=customers, seed=seed, broker_fix=broker_fix))
        cpu0 = time.process_time()
        w.run_rounds(clients=1, rounds=rounds)
        cpu = time.process_time() - cpu0
        out[store.name] = {"trade_results": w.stats.trade_results,
                           "transactions": sum(w.stats.committed.values()),
                           "cpu_seconds": round(cpu, 4),
                           "cpu_ms_per_trade_result": round(1000 * cpu / w.stats.trade_results, 4),
                           "violations": len(w.check_invariants())}
    out["ratio"] = round(out["percolator"]["cpu_ms_per_trade_result"]
                         / out["sqlite"]["cpu_ms_per_trade_result"], 2)
    out["paper_ratio"] = 30
    return out


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
