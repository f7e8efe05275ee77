"""Figure 8 the way §3.2 accounts for it: store operations, and the store's CPU.

§3.2 of the paper measured Figure 8 on **one tablet server** with all data in
its cache and Percolator's batching disabled; the tablet server was the
limiting factor. It explains the write ratio (0.23) by the store operations a
Percolator single-cell write needs beyond Bigtable's single write: **a read
to check for locks, a write to add the lock, and a second write to remove the
lock record**, the read being the expensive part; and the read ratio (0.94)
by a Percolator read being **one Bigtable operation** that also reads the
metadata columns. Timestamps were not measured (the tablet server was the
bottleneck, not the oracle).

- :func:`store_operations` counts, from the tracer, what each Figure 8
  operation asks of the store: store reads (row transactions that check or
  read cells) and store writes (row transactions that change cells), and the
  columns they touch;
- :func:`section32_prediction` turns those counts and the paper's own raw
  rates (a read costs the tablet server about twice a write) into the ratios
  a store-bound server would show;
- :func:`run_store_cpu` measures, on a real ``redis-server``, the **server's
  CPU per operation** (``INFO cpu``) for the four operations and for the
  oracle alone, beside the wall-clock rates of the same run. When the store
  is the bottleneck, throughput is inversely proportional to the store's CPU
  per operation, so ``raw CPU / Percolator CPU`` is the ratio a store-bound
  run would show; the oracle's share is reported apart (the part §3.2 did not
  measure).
"""
from __future__ import annotations

import statistics
import time

from .figure8 import OPERATIONS, PAPER_FIGURE_8, Figure8Store, redis_figure8_store

STORE_OPS = OPERATIONS + ("oracle_timestamp",)


def store_operations(n_rows: int = 10) -> dict:
    """``{operation: {"store_reads", "store_writes", "columns_read", "columns_written",
    "columns_erased", "oracle_calls", "steps"}}`` for one of each Figure 8 operation."""
    out = {}
    for op in OPERATIONS:
        store = Figure8Store(n_rows)
        calls = store.cluster.oracle.calls
        with store.cluster.tracer.record() as events:
            getattr(store, op)(1)
        out[op] = {"store_reads": sum(1 for e in events if e.reads),
                   "store_writes": sum(1 for e in events if e.changes),
                   "columns_read": sum(len(e.reads) for e in events),
                   "columns_written": sum(1 for e in events for c in e.changes if not c.erased),
                   "columns_erased": sum(1 for e in events for c in e.changes if c.erased),
                   "oracle_calls": store.cluster.oracle.calls - calls,
                   "steps": tuple(str(e.step) for e in events)}
    return out


def section32_prediction(lock_check_reads: int, writes: int, paper: dict = PAPER_FIGURE_8) -> dict:
    """Ratios on a store-bound server, costing a read as the paper's raw rates do.

    A raw write costs 1; a read costs ``raw writes/s / raw reads/s`` (about 2 in
    Figure 8). A Percolator write costs its lock-check reads plus its writes.
    """
    read_cost = paper["bigtable_writes_per_s"] / paper["bigtable_reads_per_s"]
    write_cost = lock_check_reads * read_cost + writes
    return {"read_cost_in_writes": round(read_cost, 3), "write_cost_in_writes": round(write_cost, 3),
            "write_relative": round(1 / write_cost, 3)}


def _server_cpu(bigtable) -> float:
    """The Redis server's CPU seconds so far (user + system, ``INFO cpu``)."""
    info = bigtable.call(bigtable.redis.info, "cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _operation(store: Figure8Store, op: str):
    if op == "oracle_timestamp":
        return lambda i: store.cluster.oracle.get_timestamp()
    return getattr(store, op)


def _phase(store: Figure8Store, op: str, ops: int, start: int) -> dict:
    """One timed run of ``ops`` operations: wall rate and server CPU per operation."""
    fn = _operation(store, op)
    cpu0, t0 = _server_cpu(store.bigtable), time.perf_counter()
    for i in range(start, start + ops):
        fn(i)
    wall, cpu = time.perf_counter() - t0, _server_cpu(store.bigtable) - cpu0
    return {"rate": ops / wall, "server_cpu_us": 1e6 * cpu / ops}


def run_store_cpu(url: str, ops: int = 500, rounds: int = 3, n_rows: int = 200) -> dict:
    """Server CPU per operation and wall rate, interleaved rounds (medians), on Redis ``url``.

    One client, one operation at a time (the client's CPU bounds the wall
    rates; the server's CPU per operation does not depend on that).
    """
    for value, name in ((ops, "ops"), (rounds, "rounds"), (n_rows, "n_rows")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    store = redis_figure8_store(url, "combined", n_rows)
    try:
        samples = {op: [] for op in STORE_OPS}
        for r in range(rounds):
            for op in STORE_OPS:
                samples[op].append(_phase(store, op, ops, start=r * ops))
    finally:
        store.close()
    return summarize_store_cpu(samples, ops, rounds)


def summarize_store_cpu(samples: dict, ops: int, rounds: int) -> dict:
    """Medians per operation, and the ratios the store's CPU and the wall clock give."""
    med = {op: {k: round(statistics.median(s[k] for s in runs), 2) for k in ("rate", "server_cpu_us")}
           for op, runs in samples.items()}
    oracle = med["oracle_timestamp"]["server_cpu_us"]
    timestamps = {"percolator_get": 1, "percolator_write": 2}     # start (and commit) timestamps
    store_cpu = {op: med[op]["server_cpu_us"] - oracle * timestamps.get(op, 0) for op in OPERATIONS}

    def ratio(raw, op, table):
        return round(table[raw] / table[op], 3) if table[op] > 0 else None
    rate = {op: med[op]["rate"] for op in OPERATIONS}
    return {"ops": ops, "rounds": rounds, "per_op": med, "oracle_server_cpu_us": oracle,
            "store_server_cpu_us": {op: round(c, 2) for op, c in store_cpu.items()},
            "read_relative": {"store_cpu": ratio("bigtable_read", "percolator_get", store_cpu),
                              "wall_clock": ratio("bigtable_read", "percolator_get", {
                                  k: 1 / v for k, v in rate.items()})},
            "write_relative": {"store_cpu": ratio("bigtable_write", "percolator_write", store_cpu),
                               "wall_clock": ratio("bigtable_write", "percolator_write", {
                                   k: 1 / v for k, v in rate.items()})},
            "paper": dict(PAPER_FIGURE_8)}
