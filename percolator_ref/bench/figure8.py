"""The paper's Figure 8 microbenchmark, with the operation counts behind it.

Section 3.2 of the paper compares raw Bigtable with Percolator on single-cell
reads and writes (the notes do not carry the setup):

=========  ========  ==========  ========
           Bigtable  Percolator  Relative
=========  ========  ==========  ========
Read/s       15513     14590       0.94
Write/s      31003      7232       0.23
=========  ========  ==========  ========

:func:`run_figure8` measures the same four operations on one store in one run
(ratios, because these machines are noisy):

- a raw single-cell Bigtable read (``cluster.bigtable.read``) and write
  (``cluster.bigtable.write``);
- a Percolator single-cell read transaction (``begin`` + ``get`` + ``commit``)
  and single-cell write transaction (``begin`` + ``set`` + ``commit``);

and beside them the limit (a bare ``dict`` and ``itertools.count`` against
:meth:`TimestampOracle.get_timestamp`) and what a user would pick for small
data (SQLite in memory running the same single-cell transactions).

:func:`operation_counts` counts what each operation costs from the tracer
(row transactions = RPCs, column reads / writes / erases) and the oracle
(``oracle.calls``): a Percolator read is one row transaction (reading
``c:lock``, ``c:write``, ``c:data``) plus one oracle call; a Percolator write is a prewrite (check
``c:write`` and ``c:lock``, write ``c:data`` and ``c:lock``) and a commit
(check the lock, write ``c:write``, erase ``c:lock``) plus two oracle calls.
:func:`rpc_model` is a round-trip model (every row transaction and oracle call
costing the same); it is NOT the paper's account. §3.2 puts the write cost on
the store's operations on one saturated tablet server (a lock-check read, a
write to add the lock, a write to remove it) and did not measure the oracle;
:mod:`percolator_ref.bench.store` counts and measures it that way.
:func:`run_modeled_latency` charges a modeled round trip on each round trip.

Both of those steps are *conditional mutations* (section 2.5): a read-check
and a write in one row transaction, one RPC. Without them each check would be
a separate read RPC before the write; :class:`SeparateChecks` models that
(a gate that issues the extra read RPC before each check-and-write step) so
the benchmark can measure what conditional mutations save.

Over Redis (``backend="redis://HOST:PORT/DB"``) the same operations cross a
real network round trip, and both ways of doing a check-and-write step are
real (:data:`REDIS_MODES`): ``"separate"``, the store's default, reads the row
under a short lease and then sends a conditional write (2 round trips);
``"combined"`` sends the check and the writes in ONE server-side script
(section 2.5's conditional mutation, ``?conditional=1``). The counts then add
``round_trips`` (row-transaction scripts, ``RedisBigtable.round_trips``) and
``server_calls`` (also the oracle's ``INCRBY``). The Percolator operations run
as one worker's transactions sharing its liveness token, as the paper's
workers hold one Chubby token (no token round trips per transaction).
"""
from __future__ import annotations

import itertools
import os
import sqlite3
import statistics
import threading
import time
from typing import Callable, Optional

from ..stores import is_redis, url_with
from ..services.clock import ManualClock
from ..interceptors import Latency, attach
from ..step import CHECK_AND_WRITE_STEPS, Step

PAPER_FIGURE_8 = {
    "bigtable_reads_per_s": 15513, "percolator_reads_per_s": 14590, "read_relative": 0.94,
    "bigtable_writes_per_s": 31003, "percolator_writes_per_s": 7232, "write_relative": 0.23,
}

TABLE = "bench"          # Percolator cells
RAW_TABLE = "raw"        # raw Bigtable cells (same store, another table)
COLUMN = "v"
REDIS_MODES = {"combined": "1", "separate": "0"}   # mode -> the store's ?conditional= option
WORKER = "bench-worker"                           # the Redis runs' shared client token
_store_ids = itertools.count(1)


def _check_positive_int(value, argument: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{argument} must be >= 1, got {value}")


# -- the operations -------------------------------------------------------------

class Figure8Store:
    """One cluster with ``n_rows`` preloaded cells and the four Figure 8 operations.

    Each operation method does exactly one operation on row ``i``; rows are
    named ``r00000`` ... so every operation touches an existing row.
    ``client``: run the Percolator operations as that one worker's
    transactions (one shared liveness token) instead of one client each.
    """

    def __init__(self, n_rows: int = 1000, backend=None, client: Optional[str] = None):
        from ..cluster import Cluster
        from ..model import check_name
        _check_positive_int(n_rows, "n_rows")
        if client is not None:
            check_name(client, "client")
        self.cluster = Cluster(clock=ManualClock(), backend=backend, record_history=False)
        self.bigtable = self.cluster.bigtable
        self.client = client
        if client is not None:
            self.cluster.lockservice.register(client)
        self.rows = [f"r{i:05d}" for i in range(n_rows)]
        self._raw_ts = itertools.count(1)
        t = self.cluster.begin(self.client)
        for row in self.rows:
            t.set(row, COLUMN, 0, table=TABLE)
        if not t.commit():
            raise RuntimeError("preload transaction failed")
        for row in self.rows:
            self.bigtable.write(RAW_TABLE, row, COLUMN, 0, next(self._raw_ts))

    def bigtable_read(self, i: int):
        return self.bigtable.read(RAW_TABLE, self.rows[i % len(self.rows)], COLUMN)

    def bigtable_write(self, i: int) -> None:
        self.bigtable.write(RAW_TABLE, self.rows[i % len(self.rows)], COLUMN, i,
                            next(self._raw_ts))

    def percolator_get(self, i: int):
        t = self.cluster.begin(self.client)
        value = t.get(self.rows[i % len(self.rows)], COLUMN, table=TABLE)
        t.commit()
        return value

    def percolator_write(self, i: int) -> bool:
        t = self.cluster.begin(self.client)
        t.set(self.rows[i % len(self.rows)], COLUMN, i, table=TABLE)
        return t.commit()


    def close(self) -> None:
        """Over Redis: delete this store's keys (its own prefix) and close the connection."""
        if hasattr(self.bigtable, "flush"):
            self.bigtable.flush()
            self.bigtable.close()


OPERATIONS = ("bigtable_read", "bigtable_write", "percolator_get", "percolator_write")


def redis_figure8_store(url: str, mode: str = "combined", n_rows: int = 1000) -> Figure8Store:
    """A :class:`Figure8Store` on Redis under a fresh key prefix, in ``mode`` (REDIS_MODES).

    Call ``close()`` when done (removes its keys).
    """
    if mode not in REDIS_MODES:
        raise ValueError(f"mode must be one of {tuple(REDIS_MODES)}, got {mode!r}")
    from urllib.parse import parse_qs, urlparse
    base = parse_qs(urlparse(url).query).get("prefix", ["pc"])[-1]
    prefix = f"{base}-f8-{os.getpid()}-{next(_store_ids)}"
    return Figure8Store(n_rows, url_with(url, prefix=prefix, conditional=REDIS_MODES[mode]),
                        client=WORKER)


# -- conditional mutations ---------------------------------------------------------

SEPARATE_READ = "separate-read"
"""The step label of :class:`SeparateChecks`'s extra read (a benchmark's model, not a step
of the protocol)."""


class SeparateChecks:
    """An interceptor modelling a store WITHOUT conditional mutations.

    Before each row transaction whose step both checks and writes (prewrite,
    commit of the primary, rollbacks, cleanup), it first runs a separate
    read-only row transaction on the same row (step ``"separate-read"``): the
    read RPC a client would need if the check could not travel with the
    write. Install with ``attach(bigtable, SeparateChecks(bigtable))``.
    """

    def __init__(self, bigtable):
        self.bigtable = bigtable
        self.local = threading.local()

    def before(self, rt) -> None:
        if rt.step not in CHECK_AND_WRITE_STEPS or getattr(self.local, "busy", False):
            return
        self.local.busy = True
        try:
            with self.bigtable.row_transaction(rt.table, rt.row, client=rt.client,
                                               step=SEPARATE_READ) as rt:
                rt.columns()
        finally:
            self.local.busy = False


def rpcs_without_conditional_mutations(events) -> int:
    """RPCs if every row transaction that reads AND changes cells were a read RPC plus a write RPC."""
    return sum(2 if (e.reads and e.changes) else 1 for e in events)


# -- counting ----------------------------------------------------------------------

def count_operation(store: Figure8Store, operation: str, i: int = 0) -> dict:
    """Exact cost of one ``operation``: row transactions, column ops, oracle calls, RPC models."""
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {OPERATIONS}, got {operation!r}")
    cluster = store.cluster
    bt = cluster.bigtable
    cluster.tracer.reset_counts()
    calls_before = cluster.oracle.calls
    trips_before = getattr(bt, "round_trips", None), getattr(bt, "server_calls", None)
    with cluster.tracer.record() as events:
        getattr(store, operation)(i)
    counts = cluster.tracer.counts.snapshot()
    counts["oracle_calls"] = cluster.oracle.calls - calls_before
    if trips_before[0] is not None:          # a real server: count what crossed the network
        counts["round_trips"] = bt.round_trips - trips_before[0]
        counts["server_calls"] = bt.server_calls - trips_before[1]
    counts["rpcs_with_conditional_mutations"] = len(events)
    counts["rpcs_without_conditional_mutations"] = rpcs_without_conditional_mutations(events)
    counts["column_ops"] = counts["reads"] + counts["writes"] + counts["erases"]
    return counts


def operation_counts(n_rows: int = 10, backend=None, mode: str = "combined") -> dict:
    """``{operation: counts}`` for the four Figure 8 operations, each on a fresh store.

    Over Redis, ``mode`` picks how check-and-write steps travel (REDIS_MODES).
    """
    if not is_redis(backend):
        return {op: count_operation(Figure8Store(n_rows, backend), op) for op in OPERATIONS}
    out = {}
    for op in OPERATIONS:
        store = redis_figure8_store(backend, mode, n_rows)
        try:
            out[op] = count_operation(store, op)
        finally:
            store.close()
    return out


def per_op(counts: dict, key: str) -> dict:
    """``{operation: counts[operation][key]}``, e.g. the round trips per operation."""
    return {op: c[key] for op, c in counts.items()}


# -- timing ------------------------------------------------------------------------

class OracleRoundTrip:
    """The cluster's oracle behind a modeled round trip: each call sleeps ``seconds`` first.

    Everything else (``calls``, ``peek`` ...) is the wrapped oracle's.
    """

    def __init__(self, oracle, seconds: float):
        _check_latency(seconds)
        self.oracle, self.seconds = oracle, float(seconds)

    def get_timestamp(self) -> int:
        time.sleep(self.seconds)
        return self.oracle.get_timestamp()

    def get_timestamps(self, n: int):
        time.sleep(self.seconds)
        return self.oracle.get_timestamps(n)

    def __getattr__(self, name):
        return getattr(self.oracle, name)


class LockedCounter:
    """The plainest correct timestamp source: an ``int`` behind a ``threading.Lock``."""

    def __init__(self, first: int = 1):
        self.lock, self.value = threading.Lock(), first - 1

    def next(self) -> int:
        with self.lock:
            self.value += 1
            return self.value


def thread_cpu_rate(fn: Callable, n: int) -> float:
    """Calls per second of ``fn(i)``, ``i`` in ``range(n)``, timed on this thread's CPU clock.

    CPU time, not wall time: a busy machine that preempts the thread does not count, which
    keeps the ratios of short, single-threaded measurements steady.
    """
    t0 = time.thread_time()
    for i in range(n):
        fn(i)
    elapsed = time.thread_time() - t0
    return n / elapsed if elapsed > 0 else float("inf")


def run_oracle_rates(ops: int = 20000, rounds: int = 5, batch: int = 1000,
                     progress: bool = True) -> dict:
    """Timestamps per second: :class:`TimestampOracle` against a :class:`LockedCounter`.

    In each of ``rounds`` (interleaved): ``ops`` calls of ``LockedCounter.next``,
    ``ops`` of ``oracle.get_timestamp`` and ``ops // batch`` calls of
    ``oracle.get_timestamps(batch)`` (every timestamp materialised), timed on
    the thread's CPU clock (:func:`thread_cpu_rate`). Rates are medians over
    the rounds; each ratio to the counter is the median of the rounds' ratios.
    """
    from tqdm.auto import tqdm
    from ..services.oracle import TimestampOracle
    for value, name in ((ops, "ops"), (rounds, "rounds"), (batch, "batch")):
        _check_positive_int(value, name)
    counter, oracle, calls = LockedCounter(), TimestampOracle(), max(ops // batch, 1)
    timed = {"locked_counter_per_s": (lambda i: counter.next(), ops, 1),
             "oracle_per_s": (lambda i: oracle.get_timestamp(), ops, 1),
             "oracle_batched_per_s": (lambda i: list(oracle.get_timestamps(batch)), calls, batch)}
    samples: dict = {name: [] for name in timed}
    for _ in tqdm(range(rounds), desc="oracle", disable=not progress, leave=False):
        for name, (fn, n, per_call) in timed.items():
            samples[name].append(per_call * thread_cpu_rate(fn, n))
    result = {"ops": ops, "rounds": rounds, "batch": batch, "clock": "thread CPU time"}
    result.update({k: round(statistics.median(v), 1) for k, v in samples.items()})
    for name in ("oracle", "oracle_batched"):
        result[f"{name}_vs_locked_counter"] = round(statistics.median(
            a / b for a, b in zip(samples[f"{name}_per_s"], samples["locked_counter_per_s"])), 3)
    return result


def _rate(fn: Callable, n: int, start: int = 0, tick: Optional[Callable] = None) -> float:
    """Operations per second of ``fn(i)`` for ``i`` in ``range(start, start + n)``."""
    t0 = time.perf_counter()
    for i in range(start, start + n):
        fn(i)
    elapsed = time.perf_counter() - t0
    if tick is not None:
        tick(n)
    return n / elapsed if elapsed > 0 else float("inf")


def _sqlite_ops():
    """Single-cell read and write transactions on SQLite in memory (autocommit off per txn)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE cells (row TEXT PRIMARY KEY, v INTEGER)")
    conn.executemany("INSERT INTO cells VALUES (?, 0)", [(f"r{i:05d}",) for i in range(1000)])
    rows = [f"r{i:05d}" for i in range(1000)]

    def read(i):
        conn.execute("BEGIN")
        value = conn.execute("SELECT v FROM cells WHERE row = ?", (rows[i % 1000],)).fetchone()
        conn.execute("COMMIT")
        return value

    def write(i):
        conn.execute("BEGIN")
        conn.execute("UPDATE cells SET v = ? WHERE row = ?", (i, rows[i % 1000]))
        conn.execute("COMMIT")
    return read, write


def _check_latency(latency) -> None:
    if isinstance(latency, bool) or not isinstance(latency, (int, float)):
        raise TypeError(f"latency must be a number of seconds, got {latency!r}")
    if latency < 0:
        raise ValueError(f"latency must be >= 0 seconds, got {latency!r}")


def _stores(n_rows: int, backend, latency: float):
    """The store with conditional mutations and the one without (Redis: both modes, for real)."""
    if is_redis(backend):
        store = redis_figure8_store(backend, "combined", n_rows)
        split = redis_figure8_store(backend, "separate", n_rows)
    else:
        store = Figure8Store(n_rows, backend)
        split = Figure8Store(n_rows, backend)
        attach(split.bigtable, SeparateChecks(split.bigtable))
    if latency:
        for s in (store, split):
            attach(s.bigtable, Latency(latency))
            s.cluster.oracle = OracleRoundTrip(s.cluster.oracle, latency)
    return store, split


def _close(*stores) -> None:
    for store in stores:
        store.close()


def _measure(timed: dict, ops: int, rounds: int, desc: str, progress: bool) -> dict:
    """Median ops/s per entry of ``timed``, the entries interleaved in each round."""
    from tqdm.auto import tqdm
    samples = {name: [] for name in timed}
    with tqdm(total=ops * rounds * len(timed), desc=desc, unit="op",
              disable=not progress, leave=False) as bar:
        for r in range(rounds):
            for name, fn in timed.items():
                samples[name].append(_rate(fn, ops, r * ops, bar.update))
    return {name: statistics.median(v) for name, v in samples.items()}


def run_modeled_latency(latency: float = 0.0002, ops: int = 300, rounds: int = 3,
                        n_rows: int = 1000, backend=None, progress: bool = True) -> dict:
    """Figure 8 where every round trip also pays a modeled ``latency`` s.

    The paper puts its write cost on round trips (§3.2): oracle, prewrite,
    oracle, commit. An in-process store is CPU-bound; sleeping ``latency``
    before each row transaction (outside the store's lock) and each oracle
    call (:class:`OracleRoundTrip`) puts the round trips back, so the ratios
    follow the round-trip counts of :func:`rpc_model`.
    """
    _check_latency(latency)
    for value, name in ((ops, "ops"), (rounds, "rounds"), (n_rows, "n_rows")):
        _check_positive_int(value, name)
    store, split = _stores(n_rows, backend, latency)
    try:
        rates = _measure({
            "bigtable_reads_per_s": store.bigtable_read,
            "bigtable_writes_per_s": store.bigtable_write,
            "percolator_reads_per_s": store.percolator_get,
            "percolator_writes_per_s": store.percolator_write,
            "percolator_writes_per_s_without_conditional_mutations": split.percolator_write,
        }, ops, rounds, f"figure 8, {latency * 1e6:.0f} us/RPC", progress)
    finally:
        _close(store, split)
    result = {"latency_s": latency, "ops": ops, "rounds": rounds}
    result.update({k: round(v, 1) for k, v in rates.items()})
    _add_relatives(result, rates)
    return result


def _add_relatives(result: dict, rates: dict) -> None:
    result["read_relative"] = round(rates["percolator_reads_per_s"]
                                    / rates["bigtable_reads_per_s"], 3)
    result["write_relative"] = round(rates["percolator_writes_per_s"]
                                     / rates["bigtable_writes_per_s"], 3)
    result["write_relative_without_conditional_mutations"] = round(
        rates["percolator_writes_per_s_without_conditional_mutations"]
        / rates["bigtable_writes_per_s"], 3)


def run_figure8(ops: int = 3000, rounds: int = 3, n_rows: int = 1000, backend=None,
                progress: bool = True, latency: float = 0.0) -> dict:
    """Measure Figure 8 (and the limit, SQLite, and no conditional mutations) in one run.

    Each of the ``rounds`` times every operation ``ops`` times, interleaved, so
    that machine noise hits all of them alike; rates are the median over the
    rounds. ``latency`` adds a modeled round trip per row transaction.
    Returns one flat dict (see ``percolator bench --json``).
    """
    _check_positive_int(ops, "ops")
    _check_positive_int(rounds, "rounds")
    _check_positive_int(n_rows, "n_rows")
    _check_latency(latency)
    store, split = _stores(n_rows, backend, latency)
    try:
        result = _run_figure8_on(store, split, ops, rounds, n_rows, backend, progress, latency)
    finally:
        _close(store, split)
    if is_redis(backend):
        _add_redis_modes(result, backend)
    else:
        result["mode"] = "in-process"
        result["counts"] = operation_counts(backend=backend)
    result["paper"] = dict(PAPER_FIGURE_8)
    return result


def _run_figure8_on(store, split, ops, rounds, n_rows, backend, progress, latency) -> dict:
    oracle, counter = store.cluster.oracle, itertools.count()
    bare = {row: 0 for row in store.rows}
    keys = store.rows
    sqlite_read, sqlite_write = _sqlite_ops()
    timed = {
        "bigtable_reads_per_s": store.bigtable_read,
        "bigtable_writes_per_s": store.bigtable_write,
        "percolator_reads_per_s": store.percolator_get,
        "percolator_writes_per_s": store.percolator_write,
        "percolator_writes_per_s_without_conditional_mutations": split.percolator_write,
        "dict_reads_per_s": lambda i: bare[keys[i % n_rows]],
        "dict_writes_per_s": lambda i: bare.__setitem__(keys[i % n_rows], i),
        "itertools_count_per_s": lambda i: next(counter),
        "oracle_timestamps_per_s": lambda i: oracle.get_timestamp(),
        "sqlite_reads_per_s": sqlite_read,
        "sqlite_writes_per_s": sqlite_write,
    }
    if is_redis(backend):          # reads in the separate mode too (the same row transaction)
        timed["percolator_reads_per_s_separate_mode"] = split.percolator_get
    t_start = time.perf_counter()
    rates = _measure(timed, ops, rounds, "figure 8", progress)
    result = {"backend": backend or "memory", "latency_s": latency, "ops": ops,
              "rounds": rounds, "n_rows": n_rows,
              "seconds": round(time.perf_counter() - t_start, 3), "cpu_count": os.cpu_count()}
    result.update({k: round(v, 1) for k, v in rates.items()})
    _add_relatives(result, rates)
    result["percolator_vs_sqlite_read"] = round(rates["percolator_reads_per_s"]
                                                / rates["sqlite_reads_per_s"], 3)
    result["percolator_vs_sqlite_write"] = round(rates["percolator_writes_per_s"]
                                                 / rates["sqlite_writes_per_s"], 3)
    result["bigtable_vs_dict_read"] = round(rates["bigtable_reads_per_s"]
                                            / rates["dict_reads_per_s"], 4)
    result["bigtable_vs_dict_write"] = round(rates["bigtable_writes_per_s"]
                                             / rates["dict_writes_per_s"], 4)
    result["oracle_vs_itertools_count"] = round(rates["oracle_timestamps_per_s"]
                                                / rates["itertools_count_per_s"], 4)
    return result


def _add_redis_modes(result: dict, backend: str) -> None:
    """Over Redis: per-mode ratios, round trips and server calls per operation.

    The top-level Percolator figures are the ``combined`` mode (the paper's
    conditional mutations); ``*_without_conditional_mutations`` the
    ``separate`` mode, measured for real.
    """
    counts = {mode: operation_counts(backend=backend, mode=mode) for mode in REDIS_MODES}
    result["mode"] = "both"
    result["counts"] = counts["combined"]
    result["round_trips_per_op"] = {m: per_op(c, "round_trips") for m, c in counts.items()}
    result["server_calls_per_op"] = {m: per_op(c, "server_calls") for m, c in counts.items()}
    reads = {"combined": result["percolator_reads_per_s"],
             "separate": result["percolator_reads_per_s_separate_mode"]}
    writes = {"combined": result["percolator_writes_per_s"],
              "separate": result["percolator_writes_per_s_without_conditional_mutations"]}
    result["modes"] = {m: {
        "mode": m, "percolator_reads_per_s": reads[m], "percolator_writes_per_s": writes[m],
        "read_relative": round(reads[m] / result["bigtable_reads_per_s"], 3),
        "write_relative": round(writes[m] / result["bigtable_writes_per_s"], 3),
        "round_trips_per_op": result["round_trips_per_op"][m],
        "server_calls_per_op": result["server_calls_per_op"][m],
        "counts": counts[m]} for m in REDIS_MODES}


def round_trips(counts: dict, op: str, conditional_mutations: bool = True) -> int:
    """Round trips of one operation: its row transactions (RPCs) plus its oracle calls."""
    key = ("rpcs_with_conditional_mutations" if conditional_mutations
           else "rpcs_without_conditional_mutations")
    return counts[op][key] + counts[op]["oracle_calls"]


def rpc_model(counts: dict) -> dict:
    """Relative throughput predicted if every round trip cost the same.

    A round trip is a row transaction or an oracle call: a write is 1/4 of a
    raw write, a read 1/2 of a raw read; without conditional mutations each
    check-and-write step is two RPCs: 1/6. ``*_row_transactions_only``: the
    oracle left out. A model of a latency-bound client, not the paper's
    account of Figure 8 (see :mod:`percolator_ref.bench.store`).
    """
    def ratio(raw: str, op: str, cm: bool = True, oracle: bool = True) -> float:
        trips = round_trips(counts, op, cm) - (0 if oracle else counts[op]["oracle_calls"])
        return round_trips(counts, raw) / trips
    return {"read_relative": ratio("bigtable_read", "percolator_get"),
            "write_relative": ratio("bigtable_write", "percolator_write"),
            "write_relative_without_conditional_mutations":
                ratio("bigtable_write", "percolator_write", cm=False),
            "read_relative_row_transactions_only":
                ratio("bigtable_read", "percolator_get", oracle=False),
            "write_relative_row_transactions_only":
                ratio("bigtable_write", "percolator_write", oracle=False)}


def figure8_rows(result: dict) -> list:
    """``[(label, bigtable/s, percolator/s, relative, paper relative)]`` for a table."""
    return [("Read/s", result["bigtable_reads_per_s"], result["percolator_reads_per_s"],
             result["read_relative"], PAPER_FIGURE_8["read_relative"]),
            ("Write/s", result["bigtable_writes_per_s"], result["percolator_writes_per_s"],
             result["write_relative"], PAPER_FIGURE_8["write_relative"])]


def format_report(result: dict) -> str:
    """A plain-text report of :func:`run_figure8` (plus optional modeled-latency run)."""
    lines = [f"Figure 8 on backend {result['backend']} "
             f"({result['ops']} ops x {result['rounds']} rounds, median)",
             f"{'':8} {'Bigtable':>12} {'Percolator':>12} {'Relative':>9} {'Paper':>6}"]
    runs = [("in-process store" if result.get("mode", "in-process") == "in-process" else
             "real round trips; Percolator: combined check-and-write, 'without conditional "
             "mutations': separate", result)]
    if "modeled_latency" in result:
        m = result["modeled_latency"]
        runs.append((f"with {m['latency_s'] * 1e6:.0f} us modeled round trip per RPC", m))
    for title, run in runs:
        lines.append(f"-- {title}")
        for label, bt, pc, rel, paper in figure8_rows(run):
            lines.append(f"{label:8} {bt:12.0f} {pc:12.0f} {rel:9.3f} {paper:6.2f}")
        lines.append(f"{'':8} write relative without conditional mutations: "
                     f"{run['write_relative_without_conditional_mutations']:.3f}")
    lines.append("-- cost per operation (row transactions = RPCs)")
    lines.append(f"{'':18} {'RPCs':>5} {'no-CM':>6} {'reads':>6} {'writes':>7} {'erases':>7} "
                 f"{'oracle':>7}")
    for op, c in result["counts"].items():
        lines.append(f"{op:18} {c['row_transactions']:5} "
                     f"{c['rpcs_without_conditional_mutations']:6} {c['reads']:6} "
                     f"{c['writes']:7} {c['erases']:7} {c['oracle_calls']:7}")
    for mode, m in result.get("modes", {}).items():
        lines.append(f"-- Redis, {mode} check-and-write: read {m['read_relative']:.3f}, "
                     f"write {m['write_relative']:.3f}; round trips per op "
                     + ", ".join(f"{op} {n}" for op, n in m["round_trips_per_op"].items())
                     + "; server calls per op "
                     + ", ".join(f"{op} {n}" for op, n in m["server_calls_per_op"].items()))
    lines.append("-- the limit and SQLite in memory (ops/s)")
    for key in ("dict_reads_per_s", "dict_writes_per_s", "itertools_count_per_s",
                "oracle_timestamps_per_s", "sqlite_reads_per_s", "sqlite_writes_per_s"):
        lines.append(f"{key:28} {result[key]:14.0f}")
    return "\n".join(lines)


def counts_frame(counts: dict):
    """:func:`operation_counts` as a pandas DataFrame, one row per operation, with round trips."""
    import pandas as pd
    rows = [{"operation": op, "row transactions (RPCs)": c["row_transactions"],
             "oracle calls": c["oracle_calls"], "round trips": round_trips(counts, op),
             "round trips without conditional mutations": round_trips(counts, op, False),
             "column reads": c["reads"], "writes": c["writes"], "erases": c["erases"]}
            for op, c in counts.items()]
    return pd.DataFrame(rows).set_index("operation")


def figure8_records(result: dict) -> list:
    """Reads and writes of a :func:`run_figure8` / :func:`run_modeled_latency` result, with
    the paper's relative figures beside the measured ones: one dict per line, the line's
    name under ``""`` (no pandas needed; ``viz.table(..., index="")`` shows them)."""
    rows = [{"": label, "Bigtable ops/s": bt, "Percolator ops/s": pc, "relative": rel,
             "paper relative": paper} for label, bt, pc, rel, paper in figure8_rows(result)]
    rows.append({"": "Write/s without conditional mutations",
                 "Bigtable ops/s": result["bigtable_writes_per_s"],
                 "Percolator ops/s": result["percolator_writes_per_s_without_conditional_mutations"],
                 "relative": result["write_relative_without_conditional_mutations"],
                 "paper relative": None})
    return rows


def figure8_frame(result: dict):
    """:func:`figure8_records` as a pandas DataFrame indexed by the line's name."""
    import pandas as pd
    return pd.DataFrame(figure8_records(result)).set_index("")


def oracle_frame(result: dict):
    """:func:`run_oracle_rates` as a pandas DataFrame: timestamps/s and the ratio to the counter."""
    import pandas as pd
    rows = [("LockedCounter.next", result["locked_counter_per_s"], 1.0),
            ("TimestampOracle.get_timestamp", result["oracle_per_s"],
             result["oracle_vs_locked_counter"]),
            (f"TimestampOracle.get_timestamps({result['batch']})", result["oracle_batched_per_s"],
             result["oracle_batched_vs_locked_counter"])]
    return pd.DataFrame(rows, columns=["timestamp source", "timestamps/s", "vs locked counter"])
