"""Run a workload in several client *processes* against one shared store (Redis).

Percolator's clients are independent processes that share only the store,
the timestamp oracle and the lock service. :func:`run_processes` starts
``processes`` workers; worker ``i`` opens its own ``Cluster(backend=url)``
(so its own connection, oracle client and liveness tokens on the shared
server) and calls ``workload(cluster, i, *args)``. The workload's return
value must be picklable; the runner gathers them with each worker's
operation counts, wall time and transaction history.

Histories survive a worker's death: each worker's
:class:`StreamingHistory` appends every finished transaction to a JSON-lines
file as it finishes, so a worker killed with SIGKILL leaves what it did on
disk (a workload can add its in-flight transaction with
:func:`write_pending`). :func:`load_history` merges the files for the
snapshot-isolation checker.

    >>> run = run_processes("redis://127.0.0.1:6379/0", my_workload, 4)   # doctest: +SKIP
    >>> [w.result for w in run.workers], run.check(cluster.bigtable)      # doctest: +SKIP
"""
from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..checking.checker import CheckReport, History, TxnRecord, check_history
from ..model import Cell, TxStatus
from ..stores.redis_codec import decode, encode


# -- histories as JSON lines -------------------------------------------------------

def record_to_json(record: TxnRecord) -> str:
    """One transaction record as a JSON line (values type-tagged, exact)."""
    return json.dumps({
        "client": record.client, "start_ts": record.start_ts, "commit_ts": record.commit_ts,
        "status": record.status,
        "reads": [[list(c), v, encode(x) if x is not None else None] for c, v, x in record.reads],
        "writes": [[list(c), k, encode(x) if x is not None else None] for c, k, x in record.writes],
    })


def record_from_json(line: str) -> TxnRecord:
    d = json.loads(line)
    dec = (lambda x: None if x is None else decode(x))
    return TxnRecord(d["client"], d["start_ts"], d["commit_ts"], TxStatus(d["status"]),
                     [(Cell(*c), v, dec(x)) for c, v, x in d["reads"]],
                     [(Cell(*c), k, dec(x)) for c, k, x in d["writes"]])


class StreamingHistory(History):
    """A History that also appends each finished record to ``path`` (flushed at once)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self._file = open(path, "a", buffering=1)

    def finish(self, txn) -> None:
        super().finish(txn)
        self._file.write(record_to_json(txn.record) + "\n")
        self._file.flush()


def write_pending(cluster, txn) -> None:
    """Append ``txn`` as a "crashed" record now (call just before the process may die).

    The checker settles it by its primary: committed iff the primary has a
    write record (see :meth:`History.resolve_crashed`).
    """
    record = TxnRecord(txn.client, txn.start_ts, txn.commit_ts, TxStatus.CRASHED,
                       list(txn.record.reads) if txn.record is not None else [],
                       [(m.cell, m.kind.name, m.value) for m in txn.writes.values()])
    history = cluster.history
    history._file.write(record_to_json(record) + "\n")
    history._file.flush()


def load_history(paths) -> History:
    """Merge JSON-lines history files into one History (records sorted by start_ts).

    A record that appears as "crashed" (written by :func:`write_pending`) and
    later as finished keeps the finished one.
    """
    by_start: dict[int, TxnRecord] = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = record_from_json(line)
                    if r.start_ts not in by_start or by_start[r.start_ts].status == TxStatus.CRASHED:
                        by_start[r.start_ts] = r
    history = History()
    history.records = [by_start[ts] for ts in sorted(by_start)]
    return history


# -- the runner ------------------------------------------------------------------

@dataclass
class WorkerResult:
    index: int
    pid: int
    result: Any = None
    error: Optional[str] = None          # the worker's traceback, if it raised
    elapsed: float = 0.0                 # seconds inside the workload
    counts: dict = field(default_factory=dict)
    exitcode: Optional[int] = None       # -9 for a SIGKILLed worker


@dataclass
class MultiprocessRun:
    workers: list
    history_paths: list
    elapsed: float

    @property
    def ok(self) -> bool:
        return all(w.error is None and w.exitcode == 0 for w in self.workers)

    def history(self) -> History:
        return load_history(self.history_paths)

    def check(self, bigtable) -> CheckReport:
        """Settle crashed records by their primaries on ``bigtable``, then check SI."""
        history = self.history()
        history.resolve_crashed(bigtable)
        return check_history(history.records)


def _child(backend, workload, index, args, cluster_options, history_path, conn) -> None:
    from ..cluster import Cluster
    out = WorkerResult(index, os.getpid())
    try:
        cluster = Cluster(backend=backend, **cluster_options)
        if history_path is not None and cluster.history is not None:
            cluster.history = StreamingHistory(history_path)
        t0 = time.perf_counter()
        out.result = workload(cluster, index, *args)
        out.elapsed = time.perf_counter() - t0
        out.counts = cluster.tracer.counts.snapshot()
    except BaseException:
        out.error = traceback.format_exc()
    conn.send(out)
    conn.close()


class WorkerProcess:
    """One started worker process (see :func:`start_worker`)."""

    def __init__(self, process, conn, index: int, history_path: Optional[str]):
        self.process, self.conn, self.index, self.history_path = process, conn, index, history_path

    @property
    def pid(self) -> int:
        return self.process.pid

    def join(self, timeout: Optional[float] = None) -> WorkerResult:
        """Wait for the worker; a killed worker gives a result with its exit code only."""
        result = None
        if self.conn.poll(timeout):
            try:
                result = self.conn.recv()
            except EOFError:
                result = None
        self.process.join(timeout)
        if result is None:
            result = WorkerResult(self.index, self.process.pid,
                                  error=None if self.process.exitcode is not None
                                  else "worker did not finish in time")
        result.exitcode = self.process.exitcode
        return result


def start_worker(backend: str, workload: Callable, index: int, args: tuple = (), *,
                 cluster_options: Optional[dict] = None, history_path: Optional[str] = None,
                 start_method: str = "fork") -> WorkerProcess:
    """Start one worker process running ``workload(Cluster(backend, **options), index, *args)``."""
    ctx = multiprocessing.get_context(start_method)
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, name=f"percolator-worker-{index}",
                    args=(backend, workload, index, args, dict(cluster_options or {}),
                          history_path, child))
    p.start()
    child.close()
    return WorkerProcess(p, parent, index, history_path)


def run_processes(backend: str, workload: Callable, processes: int, args: tuple = (), *,
                  cluster_options: Optional[dict] = None, history_dir: Optional[str] = None,
                  timeout: Optional[float] = None, start_method: str = "fork",
                  progress: bool = False) -> MultiprocessRun:
    """Run ``workload(cluster, i, *args)`` in ``processes`` processes on ``backend``; gather.

    ``workload`` must be a module-level function (picklable under "spawn").
    ``cluster_options`` go to each worker's ``Cluster(...)`` (e.g.
    ``{"record_history": False, "lock_ttl": 2.0}``). Histories are written to
    ``history_dir`` (a temp dir by default). A progress bar on stderr counts
    finished workers when ``progress``.
    """
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be an int >= 1, got {processes!r}")
    if not callable(workload):
        raise TypeError(f"workload must be callable, got {workload!r}")
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a store URL str, got {backend!r}")
    history_dir = history_dir or tempfile.mkdtemp(prefix="percolator-histories-")
    paths = [os.path.join(history_dir, f"worker-{i}.jsonl") for i in range(processes)]
    t0 = time.perf_counter()
    workers = [start_worker(backend, workload, i, args, cluster_options=cluster_options,
                            history_path=paths[i], start_method=start_method)
               for i in range(processes)]
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=processes, desc="worker processes", unit="proc")
    results = []
    for w in workers:
        results.append(w.join(timeout))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return MultiprocessRun(results, paths, time.perf_counter() - t0)
