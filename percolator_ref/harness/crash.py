"""Kill a real client process in the middle of its commit (SIGKILL), for tests and notebooks.

A Percolator client is a process; when it dies mid-commit its locks stay in
the shared store until someone meets them. :func:`kill_mid_commit` starts a
worker process (:func:`~percolator_ref.harness.multiprocess.start_worker`)
that runs one transfer and, right before the row transaction of the chosen
step (``"prewrite-secondary"``, ``"commit-primary"``, ``"commit-secondary"``
...), signals the parent through a file and stops for good (a
:attr:`Bigtable.gate <percolator_ref.bigtable.Bigtable.gate>` that never
returns). The parent then kills it with SIGKILL: no ``finally``, no
goodbye, exactly what the protocol has to survive.

    >>> killed = kill_mid_commit(url, "commit-secondary")        # doctest: +SKIP
    >>> print(killed)      # client T7 (start 7, commit 8) killed with SIGKILL ...
"""
from __future__ import annotations

import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

from .multiprocess import StreamingHistory, start_worker, write_pending


def freeze_at_step(cluster, step: str, ready_path: str, current: dict) -> None:
    """Install a gate: when ``current["txn"]`` reaches ``step``, report and stop forever.

    The report (``ready_path``) holds ``"start_ts commit_ts"``; with a
    streaming history the transaction is also written as "crashed" first, so
    the history survives the kill.
    """
    def gate(client, table, row, at_step):
        t = current.get("txn")
        if t is None or client != t.client or at_step != step:
            return
        if isinstance(cluster.history, StreamingHistory):
            write_pending(cluster, t)
        with open(ready_path + ".tmp", "w") as f:
            f.write(f"{t.start_ts} {t.commit_ts}\n")
        os.replace(ready_path + ".tmp", ready_path)       # the parent sees it whole
        while True:                                       # SIGKILL arrives here
            time.sleep(1)

    cluster.bigtable.gate = gate


def transfer_frozen_at(cluster, index: int, step: str, ready_path: str, src: str = "Bob",
                       dst: str = "Joe", amount: int = 7, column: str = "bal",
                       table: str = "default"):
    """Worker: move ``amount`` from ``src`` (the primary) to ``dst``, stopping before ``step``."""
    current: dict = {}
    freeze_at_step(cluster, step, ready_path, current)
    t = current["txn"] = cluster.begin()
    a, b = t.get(src, column, table=table), t.get(dst, column, table=table)
    t.set(src, column, a - amount, table=table)
    t.set(dst, column, b + amount, table=table)
    t.commit()
    raise RuntimeError(f"the transfer committed without reaching step {step!r}")


@dataclass
class KilledClient:
    """What :func:`kill_mid_commit` did: which transaction died, where, and how."""
    client: str
    start_ts: int
    commit_ts: Optional[int]
    step: str
    exitcode: Optional[int]
    pid: int

    def __str__(self):
        when = f"commit {self.commit_ts}" if self.commit_ts is not None else "no commit ts yet"
        how = "SIGKILL" if self.exitcode == -signal.SIGKILL else f"exit code {self.exitcode}"
        return (f"client {self.client} (start {self.start_ts}, {when}) killed with {how} "
                f"right before its {self.step} row transaction")


def kill_mid_commit(url: str, step: str, src: str = "Bob", dst: str = "Joe", amount: int = 7,
                    *, cluster_options: Optional[dict] = None,
                    history_path: Optional[str] = None, timeout: float = 30.0) -> KilledClient:
    """Run a transfer in a new process on ``url``; SIGKILL it right before its ``step``.

    ``cluster_options`` go to the worker's ``Cluster`` (e.g. a ``ManualClock``
    and ``lock_ttl``). Returns once the process is dead; its locks are in the
    store. Raises RuntimeError if the worker ended without reaching ``step``.
    """
    if not isinstance(step, str) or not step:
        raise ValueError(f"step must be a row-transaction step name, got {step!r}")
    ready = os.path.join(tempfile.mkdtemp(prefix="percolator-kill-"), "ready")
    worker = start_worker(url, transfer_frozen_at, 0, (step, ready, src, dst, amount),
                          cluster_options=cluster_options, history_path=history_path)
    deadline = time.monotonic() + timeout
    while not os.path.exists(ready):
        if not worker.process.is_alive() or time.monotonic() > deadline:
            result = worker.join(1)
            worker.process.kill()
            raise RuntimeError(f"the worker never reached step {step!r}: "
                               f"{result.error or result.exitcode}")
        time.sleep(0.005)
    os.kill(worker.pid, signal.SIGKILL)
    result = worker.join(10)
    with open(ready) as f:
        start_ts, commit_ts = f.read().split()
    os.remove(ready)
    os.rmdir(os.path.dirname(ready))
    return KilledClient(f"T{start_ts}", int(start_ts),
                        None if commit_ts == "None" else int(commit_ts), step,
                        result.exitcode, worker.pid)
