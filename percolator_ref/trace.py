"""The one stream of single-row Bigtable transactions.

Every row transaction of the protocol is reported here as a
:class:`RowTransactionEvent`: who ran it (the client), which row, which
protocol step, what it read, what it changed, and a sentence saying why. The
stepper, crash injection, benchmark counts and notebooks all read this
stream; nothing re-implements the protocol to show it.

Time a client spends waiting between row transactions (a backoff on a live
lock, a commit wait) is reported beside it, by :meth:`Tracer.waited`, to the
functions in ``Tracer.wait_subscribers``: the stepper says why its clock moved
from these, not by guessing.
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Change:
    """One physical-cell mutation: ``new is None`` means the version was erased."""
    column: str
    ts: int
    old: Any
    new: Any

    @property
    def erased(self) -> bool:
        return self.new is None


@dataclass(frozen=True)
class RowTransactionEvent:
    """A committed single-row Bigtable transaction."""
    seq: int
    client: Optional[str]
    table: str
    row: str
    step: str
    reads: tuple          # physical columns read
    changes: tuple        # tuple[Change, ...]
    note: str = ""

    @property
    def columns(self) -> tuple:
        """Physical columns touched (read or changed), in first-touch order."""
        seen = dict.fromkeys(self.reads)
        seen.update(dict.fromkeys(c.column for c in self.changes))
        return tuple(seen)

    def __str__(self):
        what = ", ".join(f"{'erase' if c.erased else 'write'} {self.row}/{c.column}@{c.ts}"
                         for c in self.changes) or "read only"
        return f"#{self.seq} {self.client or '-'} {self.step} {self.table}/{self.row}: {what}"


@dataclass
class Counts:
    """Operation counts: row transactions, column reads, writes and erases."""
    row_transactions: int = 0
    reads: int = 0
    writes: int = 0
    erases: int = 0
    by_step: Counter = field(default_factory=Counter)

    def snapshot(self) -> dict:
        return {"row_transactions": self.row_transactions, "reads": self.reads,
                "writes": self.writes, "erases": self.erases,
                "by_step": dict(self.by_step)}


class Tracer:
    """Counts every row transaction and hands each event to the subscribers.

    ``subscribe(fn)`` registers ``fn(event)``; it returns a function that
    unsubscribes. ``record()`` is a context manager collecting events into a
    list. Counting is always on; building events is skipped when nobody
    listens, so benchmarks pay only for the counters.
    """

    def __init__(self):
        self.counts = Counts()
        self._subscribers: list[Callable] = []
        self.wait_subscribers: list[Callable] = []    # fn(client, seconds, verb, purpose)
        self._seq = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return bool(self._subscribers)

    def subscribe(self, fn: Callable) -> Callable:
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def waited(self, client: Optional[str], seconds: float, verb: str, purpose: str) -> None:
        """Report, after the wait, that ``client`` waited ``seconds`` on the clock, and why:
        ``verb`` and ``purpose`` complete ``f"{client} {verb} {seconds:g} s on the clock
        {purpose}"`` (e.g. "T8 backs off 0.004 s on the clock before trying again")."""
        for fn in list(self.wait_subscribers):
            fn(client, seconds, verb, purpose)

    def record(self):
        return _Recording(self)

    def count(self, step: str, reads: int, writes: int, erases: int) -> int:
        """Count one row transaction; return its sequence number."""
        with self._lock:
            c = self.counts
            c.row_transactions += 1
            c.reads += reads
            c.writes += writes
            c.erases += erases
            c.by_step[step] += 1
            self._seq += 1
            return self._seq

    def emit(self, event: RowTransactionEvent) -> None:
        for fn in list(self._subscribers):
            fn(event)

    def reset_counts(self) -> None:
        with self._lock:
            self.counts = Counts()


class _Recording:
    def __init__(self, tracer):
        self.tracer = tracer
        self.events: list[RowTransactionEvent] = []
        self._unsubscribe = None

    def __enter__(self):
        self._unsubscribe = self.tracer.subscribe(self.events.append)
        return self.events

    def __exit__(self, *exc):
        self._unsubscribe()
        return False
