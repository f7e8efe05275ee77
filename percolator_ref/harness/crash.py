"""Kill a real client process in the middle of its commit (SIGKILL), for tests and notebooks.

A Percolator client is a process; when it dies mid-commit its locks stay in
the shared store until someone meets them. :func:`kill_mid_commit` starts a
worker process (:func:`~percolator_ref.harness.multiprocess.start_worker`)
that runs one transfer and, right AFTER the named point of its commit
applied (the one meaning of a crash point, see :mod:`percolator_ref.step`:
``"prewrite-primary"``, ``"prewrite"``, ``"commit-primary"``, or a count of
row transactions, exactly as ``commit(crash_after=...)``), signals the
parent through a file and stops for good. The parent then kills it with
SIGKILL: no ``finally``, no goodbye, exactly what the protocol has to
survive.

The stop is an ``after(rt)`` interceptor on the transaction's session:
:class:`~percolator_ref.faults.CrashAfter`'s own counting, with a "crash"
that freezes the process instead of raising.

    >>> killed = kill_mid_commit(url, "commit-primary")          # doctest: +SKIP
    >>> print(killed)      # client T7 (start 7, commit 8) killed with SIGKILL ...
"""
from __future__ import annotations

import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Optional, Union

from ..faults import CrashAfter, check_crash_after
from ..interceptors import attach
from .multiprocess import StreamingHistory, start_worker, write_pending


class Freeze:
    """Stands in for a session's ``crash()``: report the transaction, then stop forever.

    The report (``ready_path``) holds ``"start_ts commit_ts"``; with a
    streaming history the transaction is also written as "crashed" first, so
    the history survives the kill.
    """

    def __init__(self, cluster, txn, ready_path: str):
        self.cluster, self.txn, self.ready_path = cluster, txn, ready_path

    def crash(self) -> None:
        if isinstance(self.cluster.history, StreamingHistory):
            write_pending(self.cluster, self.txn)
        with open(self.ready_path + ".tmp", "w") as f:
            f.write(f"{self.txn.start_ts} {self.txn.commit_ts}\n")
        os.replace(self.ready_path + ".tmp", self.ready_path)     # the parent sees it whole
        while True:                                               # SIGKILL arrives here
            time.sleep(1)


def freeze_after(cluster, txn, point, ready_path: str) -> CrashAfter:
    """Attach to ``txn``'s session: right after ``point`` applied, report and stop forever."""
    plan = CrashAfter(point, Freeze(cluster, txn, ready_path), prewrites=len(txn.writes))
    attach(txn.session, plan)
    return plan


def transfer_frozen_after(cluster, index: int, point, ready_path: str, src: str = "Bob",
                          dst: str = "Joe", amount: int = 7, column: str = "bal",
                          table: str = "default"):
    """Worker: move ``amount`` from ``src`` (the primary) to ``dst``, stopping after ``point``."""
    t = cluster.begin()
    a, b = t.get(src, column, table=table), t.get(dst, column, table=table)
    t.set(src, column, a - amount, table=table)
    t.set(dst, column, b + amount, table=table)
    freeze_after(cluster, t, point, ready_path)
    t.commit()
    raise RuntimeError(f"the transfer ended (status {t.status}) without reaching {point!r}")


@dataclass
class KilledClient:
    """What :func:`kill_mid_commit` did: which transaction died, where, and how."""
    client: str
    start_ts: int
    commit_ts: Optional[int]
    point: Union[str, int]
    exitcode: Optional[int]
    pid: int

    def __str__(self):
        when = f"commit {self.commit_ts}" if self.commit_ts is not None else "no commit ts yet"
        how = "SIGKILL" if self.exitcode == -signal.SIGKILL else f"exit code {self.exitcode}"
        where = {"prewrite-primary": "the primary's prewrite", "prewrite": "its last prewrite",
                 "commit-primary": "its commit point (commit-primary)"}.get(
                     self.point, f"row transaction {self.point} of its commit")
        return f"client {self.client} (start {self.start_ts}, {when}) killed with {how} " \
               f"right after {where}"


def kill_mid_commit(url: str, crash_after, src: str = "Bob", dst: str = "Joe", amount: int = 7,
                    *, cluster_options: Optional[dict] = None,
                    history_path: Optional[str] = None, timeout: float = 30.0) -> KilledClient:
    """Run a transfer in a new process on ``url``; SIGKILL it right after ``crash_after`` applied.

    ``crash_after``: ``"prewrite-primary"``, ``"prewrite"``, ``"commit-primary"``
    or an int n >= 1 (after the n-th row transaction of the commit), with the
    meaning of ``commit(crash_after=...)``. ``cluster_options`` go to the
    worker's ``Cluster`` (e.g. a ``ManualClock`` and ``lock_ttl``). Returns
    once the process is dead; its locks are in the store. Raises RuntimeError
    if the worker ended without reaching the point.
    """
    if crash_after is None:
        raise ValueError("crash_after must be a crash point or an int >= 1, got None")
    check_crash_after(crash_after)
    point = crash_after
    ready = os.path.join(tempfile.mkdtemp(prefix="percolator-kill-"), "ready")
    worker = start_worker(url, transfer_frozen_after, 0, (point, ready, src, dst, amount),
                          cluster_options=cluster_options, history_path=history_path)
    deadline = time.monotonic() + timeout
    while not os.path.exists(ready):
        if not worker.process.is_alive() or time.monotonic() > deadline:
            result = worker.join(1)
            worker.process.kill()
            raise RuntimeError(f"the worker never reached {point!r}: "
                               f"{result.error or result.exitcode}")
        time.sleep(0.005)
    os.kill(worker.pid, signal.SIGKILL)
    result = worker.join(10)
    with open(ready) as f:
        start_ts, commit_ts = f.read().split()
    os.remove(ready)
    os.rmdir(os.path.dirname(ready))
    return KilledClient(f"T{start_ts}", int(start_ts),
                        None if commit_ts == "None" else int(commit_ts), point,
                        result.exitcode, worker.pid)
