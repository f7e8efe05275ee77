"""Figure 8 with concurrent client processes over Redis (``percolator bench --clients N``).

The paper's Figure 8 compares raw Bigtable single-cell reads and writes with
Percolator's single-cell read and write transactions, measured with many
clients (§3.2). Here ``clients`` processes share one Redis server. Each
process is one worker:

- ``threads`` threads run operations concurrently (so a process has several
  transactions in flight, as a Percolator worker does);
- one :class:`~percolator_ref.oracle.BatchingOracleClient` per store: at most
  one request to the oracle in flight, and every transaction waiting
  meanwhile is served by the next request (``get_timestamps(n)``, one
  script on the server): the paper's batching of timestamp requests (§2.3);
- one liveness token per process, shared by its transactions (the paper's
  workers hold one Chubby token); read-only transactions make no token call
  at all (:class:`~percolator_ref.session.Session`).

The operations run in phases of ``seconds`` each, every process at once
(all start at the same instant), interleaved in ``rounds`` (median kept):
raw read, Percolator read (``begin`` + ``get`` + ``commit``), raw write,
Percolator write with conditional mutations (``?conditional=1``: prewrite and
the commit point are one script each) and without them (``?conditional=0``:
a read under a lease, then the write). Reads use preloaded rows nobody
writes during the run; every thread writes rows of its own (no conflicts).

Besides the rates, each phase records what it cost: server calls, row
scripts, oracle requests and timestamps (so ``server_calls_per_op`` shows
the oracle amortized), and CPU seconds of the client processes
(``time.process_time``) and of the server (``INFO cpu``), per operation.
On a machine with few cores the clients' Python, not the server, is
usually what bounds a ratio: the CPU per operation says which.
"""
from __future__ import annotations

import multiprocessing
import os
import statistics
import threading
import time
from .figure8 import (COLUMN, PAPER_FIGURE_8, RAW_TABLE, TABLE, Figure8Store, figure8_frame,
                      figure8_records)
from ..services.clock import WallClock
from ..services.oracle import BatchingOracleClient
from ..stores import url_with

OPS = ("bigtable_read", "percolator_get", "bigtable_write", "percolator_write",
       "percolator_write_separate", "oracle_timestamp")
RATE_KEYS = {"bigtable_read": "bigtable_reads_per_s", "percolator_get": "percolator_reads_per_s",
             "bigtable_write": "bigtable_writes_per_s",
             "percolator_write": "percolator_writes_per_s",
             "percolator_write_separate":
                 "percolator_writes_per_s_without_conditional_mutations",
             "oracle_timestamp": "oracle_timestamps_per_s"}
WRITE_ROWS = 1000          # rows each thread cycles through when writing
READ_ROWS = 1000           # preloaded rows, only read during the run


def check_count(value, argument: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{argument} must be >= {minimum}, got {value}")
    return value


def check_seconds(value, argument: str = "seconds") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{argument} must be a number of seconds > 0, got {value!r}")
    return float(value)


# -- one client process -----------------------------------------------------------

class ClientProcess:
    """One worker process's stores and operations (built inside the process).

    ``url`` is the run's store (its own prefix); the process opens it twice,
    with and without conditional mutations, each with a batching oracle client.
    """

    def __init__(self, url: str, index: int, threads: int, read_rows: int = READ_ROWS):
        from ..cluster import Cluster
        self.index, self.threads, self.read_rows = index, threads, read_rows
        self.worker = f"bench-client-{index}"
        self.clusters = {}
        for mode, conditional in (("combined", 1), ("separate", 0)):
            cluster = Cluster(clock=WallClock(), backend=url_with(url, conditional=conditional),
                              record_history=False)
            cluster.oracle.start()      # its one-time setup call, not counted in a phase
            cluster.oracle = BatchingOracleClient(cluster.oracle)
            cluster.lockservice.register(self.worker)
            self.clusters[mode] = cluster
        self.raw_ts = {t: 0 for t in range(threads)}     # per-thread raw write timestamps

    def operation(self, op: str, thread: int):
        """``fn(i)`` doing operation ``op`` number ``i`` of ``thread``."""
        key = f"{self.index:03d}.{thread:03d}"
        cluster = self.clusters["separate" if op == "percolator_write_separate" else "combined"]
        bt, reads = cluster.bigtable, self.read_rows
        offset = (self.index * 64 + thread) * 7919

        def read_row(i):
            return f"r{(offset + i) % reads:05d}"
        if op == "bigtable_read":
            return lambda i: bt.read(RAW_TABLE, read_row(i), COLUMN)
        if op == "percolator_get":
            return lambda i: self.percolator_get(cluster, read_row(i))
        if op == "oracle_timestamp":                  # the oracle alone, batched as above
            return lambda i: cluster.oracle.get_timestamp()
        if op == "bigtable_write":
            return lambda i: self.bigtable_write(bt, thread, f"w{key}-{i % WRITE_ROWS:04d}", i)
        prefix = "s" if op == "percolator_write_separate" else "c"
        return lambda i: self.percolator_write(cluster, f"{prefix}{key}-{i % WRITE_ROWS:04d}", i)

    def percolator_get(self, cluster, row: str):
        t = cluster.begin(self.worker)
        value = t.get(row, COLUMN, table=TABLE)
        t.commit()
        return value

    def percolator_write(self, cluster, row: str, i: int) -> bool:
        t = cluster.begin(self.worker)
        t.set(row, COLUMN, i, table=TABLE)
        if not t.commit():
            raise RuntimeError(f"a single-cell write on the client's own row {row} aborted")
        return True

    def bigtable_write(self, bt, thread: int, row: str, i: int) -> None:
        self.raw_ts[thread] += 1
        bt.write(RAW_TABLE, row, COLUMN, i, self.raw_ts[thread])

    def counters(self) -> dict:
        """Server calls, row scripts, oracle requests and timestamps so far (both stores)."""
        out = {"server_calls": 0, "round_trips": 0, "oracle_requests": 0, "timestamps": 0}
        for cluster in self.clusters.values():
            out["server_calls"] += cluster.bigtable.server_calls
            out["round_trips"] += cluster.bigtable.round_trips
            out["oracle_requests"] += cluster.oracle.requests
            out["timestamps"] += cluster.oracle.served
        out["cpu_s"] = time.process_time()
        return out

    def run_phase(self, op: str, start_at: float, seconds: float) -> dict:
        """Every thread runs ``op`` from ``start_at`` (wall time) for ``seconds``."""
        done = [0] * self.threads
        errors: list = []

        def loop(thread: int) -> None:
            fn = self.operation(op, thread)
            time.sleep(max(0.0, start_at - time.time()))
            deadline, i = start_at + seconds, 0
            try:
                while time.time() < deadline:
                    fn(i)
                    i += 1
            except Exception as e:              # reported to the parent, never swallowed
                errors.append(f"{type(e).__name__}: {e}")
            done[thread] = i
        before = self.counters()
        workers = [threading.Thread(target=loop, args=(t,)) for t in range(self.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        after = self.counters()
        delta = {k: after[k] - before[k] for k in before}
        return {"ops": sum(done), "errors": errors, **delta}

    def close(self) -> None:
        for cluster in self.clusters.values():
            cluster.lockservice.release(self.worker)
            cluster.bigtable.close()


def client_main(url: str, index: int, threads: int, conn) -> None:
    """A client process: build its stores, then run the phases the parent sends."""
    try:
        client = ClientProcess(url, index, threads)
    except Exception as e:
        conn.send({"error": f"{type(e).__name__}: {e}"})
        return
    conn.send({"ready": os.getpid()})
    while (message := conn.recv()) is not None:
        conn.send(client.run_phase(*message))
    client.close()


# -- the parent -------------------------------------------------------------------

class ClientPool:
    """``clients`` started client processes, driven phase by phase (a context manager)."""

    def __init__(self, url: str, clients: int, threads: int, timeout: float = 60.0):
        ctx = multiprocessing.get_context("fork")
        self.timeout = timeout
        self.conns, self.processes = [], []
        for i in range(clients):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=client_main, args=(url, i, threads, child), daemon=True)
            p.start()
            self.conns.append(parent)
            self.processes.append(p)
        for reply in self.gather():
            if "error" in reply:
                self.close()
                raise RuntimeError(f"a bench client process failed to start: {reply['error']}")

    def gather(self) -> list:
        replies = []
        for conn in self.conns:
            if not conn.poll(self.timeout):
                raise RuntimeError(f"a bench client process did not answer in {self.timeout} s")
            replies.append(conn.recv())
        return replies

    def phase(self, op: str, seconds: float) -> list:
        start_at = time.time() + 0.05 + 0.01 * len(self.conns)
        for conn in self.conns:
            conn.send((op, start_at, seconds))
        return self.gather()

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for p in self.processes:
            p.join(10)
            if p.is_alive():
                p.terminate()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def server_cpu(bigtable) -> float:
    """The Redis server's CPU seconds so far (user + system, ``INFO cpu``)."""
    info = bigtable.call(bigtable.redis.info, "cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def measure_phase(pool: ClientPool, probe, op: str, seconds: float) -> dict:
    """One phase of ``op`` on every client: ops, counters and CPU summed over the clients."""
    cpu0 = server_cpu(probe)
    replies = pool.phase(op, seconds)
    server = server_cpu(probe) - cpu0
    errors = [e for r in replies for e in r["errors"]]
    if errors:
        raise RuntimeError(f"{op}: {len(errors)} client thread(s) failed, e.g. {errors[0]}")
    total = {k: sum(r[k] for r in replies) for k in ("ops", "server_calls", "round_trips",
                                                      "oracle_requests", "timestamps", "cpu_s")}
    total["server_cpu_s"] = server
    total["rate"] = total["ops"] / seconds
    return total


def preload(url: str) -> Figure8Store:
    """The read rows (Percolator cells and raw cells), written once before the run."""
    return Figure8Store(READ_ROWS, url_with(url, conditional=1), client="bench-loader")


def run_clients(url: str, clients: int = 16, threads: int = 4, seconds: float = 1.0,
                rounds: int = 3, progress: bool = True) -> dict:
    """Figure 8 with ``clients`` processes x ``threads`` threads on the Redis store ``url``.

    ``url`` should carry a prefix of the run's own (its keys are deleted at
    the end). Returns one flat dict (see ``percolator bench --clients``).
    """
    from tqdm.auto import tqdm
    check_count(clients, "clients")
    check_count(threads, "threads")
    check_count(rounds, "rounds")
    seconds = check_seconds(seconds)
    store = preload(url)
    samples: dict = {op: [] for op in OPS}
    try:
        with ClientPool(url, clients, threads) as pool, \
                tqdm(total=rounds * len(OPS), desc=f"figure 8, {clients} clients", unit="phase",
                     disable=not progress, leave=False) as bar:
            for _ in range(rounds):
                for op in OPS:
                    samples[op].append(measure_phase(pool, store.bigtable, op, seconds))
                    bar.update(1)
    finally:
        store.close()
    return summarize(samples, clients, threads, seconds, rounds)


def median_phase(phases: list) -> dict:
    """The phase with the median rate (its counters stay consistent with its rate)."""
    ordered = sorted(phases, key=lambda p: p["rate"])
    return ordered[(len(ordered) - 1) // 2]


def per_op_costs(phase: dict) -> dict:
    """Calls and CPU per operation of one phase."""
    ops = max(phase["ops"], 1)
    return {"server_calls": round(phase["server_calls"] / ops, 3),
            "round_trips": round(phase["round_trips"] / ops, 3),
            "oracle_requests": round(phase["oracle_requests"] / ops, 3),
            "timestamps_per_oracle_request": (round(phase["timestamps"]
                                                    / phase["oracle_requests"], 2)
                                              if phase["oracle_requests"] else None),
            "token_and_other_calls": round((phase["server_calls"] - phase["round_trips"]
                                            - phase["oracle_requests"]) / ops, 3),
            "client_cpu_us": round(1e6 * phase["cpu_s"] / ops, 1),
            "server_cpu_us": round(1e6 * phase["server_cpu_s"] / ops, 1)}


def summarize(samples: dict, clients: int, threads: int, seconds: float, rounds: int) -> dict:
    """The JSON of :func:`run_clients` from each op's phases."""
    rates = {op: statistics.median(p["rate"] for p in phases) for op, phases in samples.items()}
    costs = {op: per_op_costs(median_phase(phases)) for op, phases in samples.items()}
    result = {"clients": clients, "threads_per_client": threads,
              "concurrent_operations": clients * threads, "seconds_per_phase": seconds,
              "rounds": rounds, "cpu_count": os.cpu_count()}
    result.update({RATE_KEYS[op]: round(rate, 1) for op, rate in rates.items()})
    for name, op, raw in (("read_relative", "percolator_get", "bigtable_read"),
                          ("write_relative", "percolator_write", "bigtable_write"),
                          ("write_relative_without_conditional_mutations",
                           "percolator_write_separate", "bigtable_write")):
        result[name] = round(rates[op] / rates[raw], 3)
    result["cpu_relative"] = cpu_relative(costs)
    result["store_cpu"] = store_cpu(costs)
    result["server_calls_per_op"] = {op: c["server_calls"] for op, c in costs.items()}
    result["costs_per_op"] = costs
    result["cpu_share"] = {op: {"clients": round(median_phase(p)["cpu_s"] / seconds, 2),
                                "server": round(median_phase(p)["server_cpu_s"] / seconds, 2)}
                           for op, p in samples.items()}
    result["paper"] = dict(PAPER_FIGURE_8)
    return result


def cpu_relative(costs: dict) -> dict:
    """The ratios CPU alone would give: raw CPU per op / Percolator CPU per op, on the client
    side and on the server side. The measured ratio follows the side that is saturated."""
    pairs = {"read_relative": ("bigtable_read", "percolator_get"),
             "write_relative": ("bigtable_write", "percolator_write"),
             "write_relative_without_conditional_mutations": ("bigtable_write",
                                                               "percolator_write_separate")}
    return {name: {side: round(costs[raw][f"{side}_cpu_us"] / costs[op][f"{side}_cpu_us"], 3)
                   if costs[op][f"{side}_cpu_us"] else None for side in ("client", "server")}
            for name, (raw, op) in pairs.items()}


def store_cpu(costs: dict) -> dict:
    """The server's CPU per operation with the oracle's share taken out (§3.2 left it out).

    The oracle shares the Redis server; the ``oracle_timestamp`` phase gives its
    CPU per request, charged to each operation by its oracle requests. What
    remains is the store's (row scripts; tokens if any). ``relative``: raw
    store CPU / Percolator store CPU, the ratio a store-bound server would show.
    """
    oracle = costs["oracle_timestamp"]
    per_request = (oracle["server_cpu_us"] / oracle["oracle_requests"]
                   if oracle["oracle_requests"] else 0.0)
    own = {op: c["server_cpu_us"] - c["oracle_requests"] * per_request
           for op, c in costs.items() if op != "oracle_timestamp"}
    oracle_us = {op: round(costs[op]["oracle_requests"] * per_request, 1) for op in own}
    pairs = {"read_relative": ("bigtable_read", "percolator_get"),
             "write_relative": ("bigtable_write", "percolator_write"),
             "write_relative_without_conditional_mutations": ("bigtable_write",
                                                               "percolator_write_separate")}
    return {"oracle_server_cpu_us_per_request": round(per_request, 1),
            "oracle_server_cpu_us": oracle_us,
            "store_server_cpu_us": {op: round(v, 1) for op, v in own.items()},
            "relative": {name: round(own[raw] / own[op], 3) if own[op] > 0 else None
                         for name, (raw, op) in pairs.items()}}


def profile_client(url: str, op: str, n: int = 2000, top: int = 12) -> dict:
    """cProfile (CPU time) of one client thread doing ``n`` operations ``op``: where client CPU goes.

    ``{"op", "n", "total_s", "by_package": {package: own seconds}, "top": [{"function",
    "calls", "own_s", "cumulative_s"}]}``: ``by_package`` sums the functions' own time
    by where they live (the redis client library, this kit, sockets and builtins, ...).
    """
    import cProfile
    import pstats
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    store = preload(url)
    client = ClientProcess(url, 0, 1)
    try:
        fn = client.operation(op, 0)
        profiler = cProfile.Profile(time.process_time)      # CPU, not waiting
        profiler.runcall(lambda: [fn(i) for i in range(check_count(n, "n"))])
    finally:
        client.close()
        store.close()
    entries = pstats.Stats(profiler).stats.items()
    rows = [{"function": f"{os.path.basename(f)}:{line}({name})", "calls": nc,
             "own_s": round(tt, 4), "cumulative_s": round(ct, 4), "package": package_of(f)}
            for (f, line, name), (cc, nc, tt, ct, _) in entries]
    by_package: dict = {}
    for r in rows:
        by_package[r["package"]] = round(by_package.get(r["package"], 0) + r["own_s"], 4)
    return {"op": op, "n": n, "total_s": round(sum(r["own_s"] for r in rows), 4),
            "by_package": dict(sorted(by_package.items(), key=lambda kv: -kv[1])),
            "top": sorted(rows, key=lambda r: -r["own_s"])[:top]}


def package_of(filename: str) -> str:
    """Where a profiled function lives: ``redis`` (the client library), ``percolator_ref``,
    ``sockets/builtins``, or another package's name."""
    parts = filename.replace("\\", "/").split("/")
    for name in ("redis", "percolator_ref", "sortedcontainers", "threading"):
        if name in parts or parts[-1] == f"{name}.py":
            return name
    if filename.startswith("~") or parts[-1] in ("socket.py", "selectors.py"):
        return "sockets/builtins"
    return "other"


clients_frame = figure8_frame
"""The rates and ratios of :func:`run_clients` beside the paper's (a pandas DataFrame):
the table :func:`.figure8.figure8_frame` builds."""
clients_records = figure8_records
"""The same as dicts (no pandas needed): :func:`.figure8.figure8_records`, under the name
notebook 08 uses."""


def costs_frame(result: dict):
    """Calls and CPU per operation (``costs_per_op``) as a pandas DataFrame."""
    import pandas as pd
    return pd.DataFrame(result["costs_per_op"]).T


def fresh_prefix_url(url: str, tag: str = "f8c") -> str:
    """``url`` under a key prefix of this run's own."""
    from urllib.parse import parse_qs, urlparse
    base = parse_qs(urlparse(url).query).get("prefix", ["pc"])[-1]
    return url_with(url, prefix=f"{base}-{tag}-{os.getpid()}-{int(time.time() * 1000)}")


def format_report(result: dict) -> str:
    """A plain-text report of :func:`run_clients`."""
    lines = [f"Figure 8 with {result['clients']} client processes x "
             f"{result['threads_per_client']} threads on {result.get('backend', 'Redis')} "
             f"({result['rounds']} rounds of {result['seconds_per_phase']} s, median)",
             f"{'':8} {'Bigtable':>10} {'Percolator':>11} {'Relative':>9} {'Paper':>6}"]
    for label, bt, pc, rel in (("Read/s", "bigtable_reads_per_s", "percolator_reads_per_s",
                                "read_relative"),
                               ("Write/s", "bigtable_writes_per_s", "percolator_writes_per_s",
                                "write_relative")):
        lines.append(f"{label:8} {result[bt]:10.0f} {result[pc]:11.0f} {result[rel]:9.3f} "
                     f"{PAPER_FIGURE_8[rel]:6.2f}")
    lines.append(f"write relative without conditional mutations: "
                 f"{result['write_relative_without_conditional_mutations']:.3f}")
    lines.append(f"{'per operation':26} {'calls':>6} {'oracle':>7} {'ts/req':>7} "
                 f"{'client us':>10} {'server us':>10}")
    for op, c in result["costs_per_op"].items():
        lines.append(f"{op:26} {c['server_calls']:6.2f} {c['oracle_requests']:7.3f} "
                     f"{c['timestamps_per_oracle_request'] or 0:7.2f} "
                     f"{c['client_cpu_us']:10.1f} {c['server_cpu_us']:10.1f}")
    return "\n".join(lines)
