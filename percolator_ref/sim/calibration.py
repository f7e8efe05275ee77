"""Service times for the simulation, measured on this machine (:func:`measure`).

Every number is a measurement of the kit's own code, in CPU seconds
(``time.process_time``, which other processes on the machine do not inflate)
or, for the network, wall seconds:

``row_transaction_s`` and ``worker_cpu_s``
    the CPU of a one-client TPC-E run on the in-memory cluster, per row
    transaction, split by the share of wall time spent inside row
    transactions (the tablet server's time: the row lock, reads, applying
    the mutations, and the protocol's logic inside the row transaction) and
    outside them (the worker's: the transactions' and the workload's code);
``oracle_request_s``
    one call of the in-memory :class:`~percolator_ref.services.oracle.TimestampOracle`
    (``get_timestamps(1)``): the oracle's time per request;
``oracle_timestamp_s``
    the oracle's extra time per timestamp in a batch (handing out the
    consecutive timestamps of one ``get_timestamps(1000)``);
``lock_service_s``
    one in-memory :meth:`LockService.is_alive` check;
``rpc_round_trip_s``
    a loopback round trip of a small message to an echo thread (a socket
    pair): the network latency of every remote call. It occupies no server.

RPC handling costs inside the servers are not modeled: a server's time is
its in-memory work only.
"""
from __future__ import annotations

import json
import math
import os
import socket
import statistics
import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import Callable

FIELDS = ("row_transaction_s", "worker_cpu_s", "oracle_request_s", "oracle_timestamp_s",
          "lock_service_s", "rpc_round_trip_s")


@dataclass(frozen=True)
class Calibration:
    """Service times in seconds (see the module docstring); ``source`` says where from."""
    row_transaction_s: float
    worker_cpu_s: float
    oracle_request_s: float
    oracle_timestamp_s: float
    lock_service_s: float
    rpc_round_trip_s: float
    source: str = "measured on this machine"

    def __post_init__(self):
        for name in FIELDS:
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value <= 0):
                raise ValueError(f"calibration {name} must be a positive number of seconds, "
                                 f"got {value!r}")

    def to_dict(self) -> dict:
        """The fields, plus the oracle's capacities they imply (timestamps per second)."""
        out = asdict(self)
        out["oracle_timestamps_per_s_one_per_request"] = round(1 / self.oracle_request_s)
        out["oracle_timestamps_per_s_batched"] = round(1 / self.oracle_timestamp_s)
        return out

    @classmethod
    def from_dict(cls, data: dict, source: str) -> "Calibration":
        """From :meth:`to_dict`'s output (extra keys ignored); errors name the missing key."""
        if not isinstance(data, dict):
            raise ValueError(f"calibration must be a JSON object, got {type(data).__name__}")
        missing = [name for name in FIELDS if name not in data]
        if missing:
            raise ValueError(f"calibration lacks {', '.join(missing)}")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in FIELDS},
                   source=source)


def load(path: str) -> Calibration:
    """A calibration from a JSON file: a calibration object, or a ``percolator scale --json``
    output (its ``calibration`` key)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"--calibration {path!r}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"--calibration {path!r} is not JSON: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("calibration"), dict):
        data = data["calibration"]
    try:
        return Calibration.from_dict(data, source=f"file {os.path.basename(path)}")
    except (TypeError, ValueError) as e:
        raise ValueError(f"--calibration {path!r}: {e}") from None


def _per_call(fn: Callable[[int], None], n: int, repeats: int = 5) -> float:
    """Median CPU seconds per unit of ``fn(n)`` (which does ``n`` units) over ``repeats``."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn(n)
        times.append((time.process_time() - t0) / n)
    return statistics.median(times)


class Stopwatch:
    """An interceptor timing the inside (``before`` to ``after``) and the outside (``after``
    to the next ``before``) of one client's row transactions, in wall seconds."""

    def __init__(self):
        self.inside: list = []
        self.outside: list = []
        self._mark = None

    def before(self, rt) -> None:
        now = time.perf_counter()
        if self._mark is not None:
            self.outside.append(now - self._mark)
        self._mark = now

    def after(self, rt) -> None:
        now = time.perf_counter()
        self.inside.append(now - self._mark)
        self._mark = now


def _trimmed_sum(values: list, keep: float = 0.995) -> float:
    """The sum without the slowest 0.5 % (a preempted interval is not the code's time)."""
    ordered = sorted(values)
    return sum(ordered[:max(1, int(len(ordered) * keep))])


def tpce_profile(rounds: int = 300) -> dict:
    """A one-client TPC-E run: CPU per row transaction, split into the part inside row
    transactions (the tablet server's) and outside them (the worker's) by wall time."""
    from ..services.clock import ManualClock
    from ..cluster import Cluster
    from ..workloads.tpce import Tpce, TpceConfig
    from ..interceptors import attach
    cluster = Cluster(clock=ManualClock(), record_history=False)
    w = Tpce(cluster, TpceConfig(customers=200, broker_fix=True, aggregation="periodic"))
    watch = Stopwatch()
    watching = attach(cluster.bigtable, watch)
    cpu0 = time.process_time()
    w.run_rounds(clients=1, rounds=rounds)
    cpu = time.process_time() - cpu0
    watching.detach()
    inside, outside = _trimmed_sum(watch.inside), _trimmed_sum(watch.outside)
    per_row_transaction = cpu / len(watch.inside)
    return {"row_transactions": len(watch.inside),
            "row_transaction_s": per_row_transaction * inside / (inside + outside),
            "worker_cpu_s": per_row_transaction * outside / (inside + outside)}


def oracle_times() -> tuple:
    """``(seconds per oracle request, extra seconds per timestamp in a batch)``."""
    from ..services.oracle import TimestampOracle
    oracle = TimestampOracle()

    def requests(n: int) -> None:
        for _ in range(n):
            oracle.get_timestamps(1)

    def batched(n: int) -> None:
        for _ in range(n // 1000):
            for _ts in oracle.get_timestamps(1000):
                pass
    request = _per_call(requests, 20000)
    per_timestamp = max(_per_call(batched, 200000) - request / 1000, 1e-9)
    return request, per_timestamp


def lock_service_time() -> float:
    """CPU seconds per in-memory liveness check."""
    from ..services.clock import ManualClock
    from ..services.lockservice import LockService
    service = LockService(ManualClock())
    service.register("worker")

    def checks(n: int) -> None:
        for _ in range(n):
            service.is_alive("worker")
    return _per_call(checks, 20000)


def loopback_round_trip(n: int = 2000, repeats: int = 5) -> float:
    """Median wall seconds of a 16-byte round trip to an echo thread over a socket pair."""
    a, b = socket.socketpair()

    def echo() -> None:
        while data := b.recv(64):
            b.sendall(data)
    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    times = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(n):
                a.sendall(b"0123456789abcdef")
                a.recv(64)
            times.append((time.perf_counter() - t0) / n)
    finally:
        a.close()
        thread.join(timeout=5)
        b.close()
    return statistics.median(times)


def measure(repeats: int = 3) -> Calibration:
    """Measure every service time on this machine (a few seconds); medians of ``repeats``."""
    tpce_profile(rounds=50)                   # warm up: imports, caches
    profiles = [tpce_profile() for _ in range(repeats)]
    request, per_timestamp = oracle_times()
    return Calibration(
        row_transaction_s=statistics.median(p["row_transaction_s"] for p in profiles),
        worker_cpu_s=statistics.median(p["worker_cpu_s"] for p in profiles),
        oracle_request_s=request, oracle_timestamp_s=per_timestamp,
        lock_service_s=lock_service_time(), rpc_round_trip_s=loopback_round_trip())
