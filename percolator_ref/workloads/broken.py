"""Clients that break the protocol on purpose, to show what a rule of the paper buys.

:class:`EarlyCommitTimestamp` takes its commit timestamp BEFORE it writes its
locks. Paper §2.3 argues why the order matters: a writer W asks the oracle
for its commit timestamp only after all its locks are written, and a reader
R cannot read before it has its start timestamp; so if ``commit_ts(W) <
start_ts(R)``, W's locks were written before R read anything, and R sees
either W's lock (and waits) or W's committed write. Take the timestamp first
and a reader can start after it, find no lock, and miss a write that then
commits below its snapshot: a stale read, which ``cluster.check_history()``
names.

:func:`read_during_commit` runs the schedule that shows it, deterministically,
for any transaction class: the writer stops right after it has its commit
timestamp; a reader begins and reads; right after the reader's first read
attempt the writer finishes; then the reader completes its read.

The protocol core (:mod:`percolator_ref.transaction`) is not changed: the
broken client is a subclass that reorders the core's public steps.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Optional

from ..interceptors import Counter, attach
from ..model import DEFAULT_TABLE, TxStatus, check_cell
from ..step import Step
from ..transaction import Transaction

__all__ = ["EarlyCommitTimestamp", "ParkAfterCommitTimestamp", "RaceResult",
           "ReleaseWhenReaderWaits", "commit_into", "read_during_commit"]

WAIT_SECONDS = 10          # a schedule step that takes longer than this is a bug


class EarlyCommitTimestamp(Transaction):
    """BROKEN on purpose: takes ``commit_ts`` before its prewrites (violates §2.3).

    Otherwise Figure 6's commit, run by the core itself: this class only takes
    the timestamp first and hands it to the core's oracle call, which comes
    after the prewrites.
    """

    def two_phase_commit(self) -> bool:
        if self.writes or self.notifies:
            self.commit_ts = early = self.session.timestamp()   # too early: no lock written yet
            self.session.timestamp = lambda: early      # the core's own call, after the locks
        committed = super().two_phase_commit()
        if not committed:
            self.commit_ts = None
        return committed


class ParkAfterCommitTimestamp:
    """Interceptor for a writer's session: park it before its first row transaction
    that starts after it has a ``commit_ts``, until :meth:`release`.

    ``reached`` is set when it parks, ``step`` is the step it parked before.
    """

    def __init__(self, writer: Transaction):
        self.writer = writer
        self.reached, self.go = threading.Event(), threading.Event()
        self.step: Optional[str] = None

    def before(self, rt) -> None:
        if self.writer.commit_ts is not None and not self.reached.is_set():
            self.step = rt.step
            self.reached.set()
            if not self.go.wait(WAIT_SECONDS):
                raise RuntimeError("the parked writer was never released")

    def release(self) -> None:
        self.go.set()


class ReleaseWhenReaderWaits:
    """Interceptor for a reader's session: let the parked writer finish (and wait for it)
    when the reader tries its get a second time, i.e. after it met a lock and backed off.

    :meth:`release` does the same from outside, once the reader has read.
    """

    def __init__(self, park: ParkAfterCommitTimestamp, thread: threading.Thread):
        self.park, self.thread, self.gets = park, thread, 0

    def before(self, rt) -> None:
        if rt.step == Step.GET:
            self.gets += 1
            if self.gets == 2:
                self.release()

    def release(self) -> None:
        if not self.park.go.is_set():
            self.park.release()
            self.thread.join(WAIT_SECONDS)
            if self.thread.is_alive():
                raise RuntimeError("the writer did not finish its commit")


@dataclass
class RaceResult:
    """What :func:`read_during_commit` saw.

    ``parked_before``: the writer's step the reader ran before (the first row
    transaction after the writer took ``commit_ts``); ``attempts``: the
    reader's get row transactions (more than one: it met the writer's lock
    and waited); ``value``: what the reader read; ``committed``: the writer's
    commit result.
    """
    writer: Transaction
    reader: Transaction
    parked_before: str
    attempts: int
    value: Any
    committed: bool

    @property
    def waited(self) -> bool:
        return self.attempts > 1


def commit_into(txn: Transaction, outcome: dict) -> None:
    """``outcome["ok"] = txn.commit()``, or ``outcome["error"]`` if it raised (for a thread)."""
    try:
        outcome["ok"] = txn.commit()
    except Exception as error:          # handed back to the caller's thread
        outcome["error"] = error


def read_during_commit(cluster, writer: Transaction, row: str, column: str,
                       table: str = DEFAULT_TABLE, reader_client: Optional[str] = None) -> RaceResult:
    """§2.3's schedule: a reader begins right after ``writer`` took its commit timestamp.

    ``writer`` is an open transaction with buffered writes. Its commit runs in
    a thread parked (:class:`ParkAfterCommitTimestamp`) before its first row
    transaction after ``commit_ts``; the reader begins (so its ``start_ts`` is
    larger) and gets ``table``/``row``/``column``. The writer finishes when the
    reader, having met its lock, backs off and tries again
    (:class:`ReleaseWhenReaderWaits`), or else once the reader's get returned.
    Every hand-over waits on an event: deterministic.
    """
    check_cell(row, column, table)
    if writer.status != TxStatus.OPEN or not writer.writes:
        raise ValueError(f"writer must be an open transaction with writes, got {writer!r}")
    park, outcome = ParkAfterCommitTimestamp(writer), {}
    parked = attach(writer.session, park)
    thread = threading.Thread(target=commit_into, args=(writer, outcome), daemon=True)
    thread.start()
    if not park.reached.wait(WAIT_SECONDS):
        raise RuntimeError(f"{writer.client} never took a commit timestamp")
    reader = cluster.begin(reader_client)
    counter, handover = Counter(), ReleaseWhenReaderWaits(park, thread)
    attach(reader.session, counter, handover)
    value = reader.get(row, column, table)
    handover.release()                  # the reader did not wait: the writer finishes now
    reader.commit()
    parked.detach()
    if "error" in outcome:
        raise outcome["error"]
    return RaceResult(writer, reader, park.step, counter.counts.get(Step.GET, 0), value,
                      outcome.get("ok", False))
