"""Bigtable (paper section 2.1): a sorted, multi-version, single-row-atomic map.

    (table, row, physical column, timestamp) -> value

Tables hold rows in sorted order (``SortedDict``); each row maps physical
columns such as ``bal:data``, ``bal:lock``, ``bal:write`` (and ``bal:notify``,
``bal:ack_O`` for observers) to versions keyed by timestamp.

The only way the protocol touches a row is a single-row transaction,
:meth:`Bigtable.row_transaction`: reads see the row as it is, writes and
erases are buffered and applied atomically when the block exits without an
exception (an exception inside the block applies nothing). Every row
transaction is counted and reported to the :class:`~percolator_ref.trace.Tracer`.

Columns ending in ``:notify`` are also kept in a separate sorted index
(:attr:`Bigtable.notify_index`), playing the paper's separate locality group
for notifications (§2.4): an observer scanner reads only dirty cells, never
the whole table.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, Optional

from sortedcontainers import SortedDict, SortedSet

from .model import check_name as _check_name
from .trace import Change, RowTransactionEvent, Tracer

NOTIFY_SUFFIX = ":notify"


def _check_ts(ts, argument: str = "ts") -> None:
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise TypeError(f"{argument} must be an int timestamp, got {ts!r}")
    if ts < 0:
        raise ValueError(f"{argument} must be >= 0, got {ts}")


class RowTransaction:
    """One atomic single-row transaction (use as a context manager).

    Reads return ``(ts, value)`` pairs or ``None``; ``write``/``erase`` are
    buffered and applied together at the end of the ``with`` block.
    ``explain(note)`` attaches the sentence the tracer reports ("why").
    """

    def __init__(self, bigtable: "Bigtable", table: str, row: str,
                 client: Optional[str], step: str, after: Optional[Callable] = None):
        self.bigtable, self.table, self.row = bigtable, table, row
        self.client, self.step, self.after = client, step, after
        self.note = ""
        self._reads: list[str] = []
        self._mutations: list[tuple[str, int, Any]] = []   # value None = erase
        self._row: dict = {}

    # -- lifecycle -------------------------------------------------------
    def __enter__(self) -> "RowTransaction":
        self.bigtable._enter(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.bigtable._exit(self, commit=exc_type is None)
        if exc_type is None and self.after is not None:
            self.after(self.step)      # e.g. crash injection: outside the row lock
        return False

    # -- reads -----------------------------------------------------------
    def read(self, column: str, max_ts: Optional[int] = None, min_ts: int = 0):
        """Newest version of ``column`` with ``min_ts <= ts <= max_ts`` as ``(ts, value)``, or None."""
        self._reads.append(column)
        versions = self._row.get(column)
        if not versions:
            return None
        idx = len(versions) if max_ts is None else versions.bisect_right(max_ts)
        if idx == 0:
            return None
        ts = versions.keys()[idx - 1]
        return (ts, versions[ts]) if ts >= min_ts else None

    def versions(self, column: str) -> list:
        """All versions of ``column``, newest first, as ``[(ts, value), ...]``."""
        self._reads.append(column)
        versions = self._row.get(column)
        return list(reversed(versions.items())) if versions else []

    def columns(self) -> list:
        """The physical columns present in this row, sorted."""
        return sorted(self._row)

    # -- writes ----------------------------------------------------------
    def write(self, column: str, ts: int, value: Any) -> None:
        if value is None:
            raise ValueError("value must not be None (use erase to remove a version)")
        self._mutations.append((column, ts, value))

    def erase(self, column: str, ts: int) -> None:
        self._mutations.append((column, ts, None))

    def explain(self, note: str) -> None:
        self.note = note


class RawCellOperations:
    """What every store shares: admission of a row transaction, and Figure 8's
    raw Bigtable operations, each one single-cell row transaction.

    A store needs ``row_transaction``, ``gate`` and ``latency``; a store whose
    values must be encodable checks them in ``_check_value`` before sending.
    """

    def _admit(self, rt) -> None:
        """Before a row transaction: the stepper's gate, then the modeled round trip."""
        if self.gate is not None:
            self.gate(rt.client, rt.table, rt.row, rt.step)
        if self.latency:
            time.sleep(self.latency)

    def _check_value(self, value: Any) -> None:
        """Raise TypeError before anything is written if ``value`` cannot be stored."""

    def write(self, table: str, row: str, bigtable_column: str, value: Any, ts: int) -> None:
        """Write one version: a one-cell row transaction (Figure 8's raw write)."""
        _check_name(bigtable_column, "bigtable_column")
        _check_ts(ts)
        self._check_value(value)
        with self.row_transaction(table, row, step="bigtable-write") as rt:
            rt.write(bigtable_column, ts, value)

    def read(self, table: str, row: str, bigtable_column: str, ts: Optional[int] = None):
        """Newest value at or below ``ts`` (newest of all if None), or None."""
        _check_name(bigtable_column, "bigtable_column")
        if ts is not None:
            _check_ts(ts)
        with self.row_transaction(table, row, step="bigtable-read") as rt:
            found = rt.read(bigtable_column, ts)
        return None if found is None else found[1]

    def erase(self, table: str, row: str, bigtable_column: str, ts: int) -> None:
        """Erase the version at exactly ``ts`` (no-op if absent)."""
        _check_name(bigtable_column, "bigtable_column")
        _check_ts(ts)
        with self.row_transaction(table, row, step="bigtable-erase") as rt:
            rt.erase(bigtable_column, ts)


class Bigtable(RawCellOperations):
    """The embedded in-memory Bigtable: one "tablet server" for all tables.

    Thread-safe: a row transaction holds the server's lock while it runs.
    ``gate`` (if set) is called as ``gate(client, table, row, step)`` before a
    row transaction starts, outside the lock: the stepper's scheduler uses it
    to let exactly one row transaction run at a time. ``latency`` (seconds)
    models a network round trip per row transaction, slept outside the lock.
    """

    def __init__(self, tracer: Optional[Tracer] = None):
        self.tracer = tracer or Tracer()
        self.gate: Optional[Callable] = None
        self.latency = 0.0
        self.notify_index = SortedSet()          # (table, row, column) with a notify
        self._tables: dict[str, SortedDict] = {}
        self._lock = threading.RLock()

    # -- row transactions ------------------------------------------------
    def row_transaction(self, table: str, row: str, *, client: Optional[str] = None,
                        step: str = "row-transaction",
                        after: Optional[Callable] = None) -> RowTransaction:
        """A single-row transaction on ``table``/``row`` (a context manager).

        ``client`` and ``step`` label the trace event; ``after(step)`` is
        called once the row transaction has been applied, outside the lock.
        """
        _check_name(table, "table")
        _check_name(row, "row")
        return RowTransaction(self, table, row, client, step, after)

    def _enter(self, rt: RowTransaction) -> None:
        self._admit(rt)
        self._lock.acquire()
        rows = self._tables.get(rt.table)
        rt._row = rows.get(rt.row, {}) if rows is not None else {}

    def _exit(self, rt: RowTransaction, commit: bool) -> None:
        try:
            if not commit:
                return
            changes = self._apply(rt.table, rt.row, rt._mutations)
            erases = sum(1 for m in rt._mutations if m[2] is None)
            seq = self.tracer.count(rt.step, len(rt._reads), len(rt._mutations) - erases, erases)
            if self.tracer.active:
                self.tracer.emit(RowTransactionEvent(
                    seq, rt.client, rt.table, rt.row, rt.step,
                    tuple(dict.fromkeys(rt._reads)), tuple(changes), rt.note))
        finally:
            self._lock.release()

    def _apply(self, table: str, row: str, mutations) -> list:
        if not mutations:
            return []
        cells = self._tables.setdefault(table, SortedDict()).setdefault(row, {})
        changes = []
        for column, ts, value in mutations:
            versions = cells.setdefault(column, SortedDict())
            old = versions.get(ts)
            if value is None:
                if old is None:
                    if not versions:          # erasing an absent version leaves no empty column
                        del cells[column]
                    continue
                del versions[ts]
            else:
                versions[ts] = value
            changes.append(Change(column, ts, old, value))
            if not versions:
                del cells[column]
            if column.endswith(NOTIFY_SUFFIX):
                key = (table, row, column[: -len(NOTIFY_SUFFIX)])
                (self.notify_index.add if versions else self.notify_index.discard)(key)
        if not cells:
            del self._tables[table][row]
        return changes

    # -- inspection (not counted: for rendering and checks) ---------------
    def versions(self, table: str, row: str, bigtable_column: str) -> list:
        """``[(ts, value), ...]`` newest first; [] if the cell is empty."""
        with self._lock:
            versions = self._tables.get(table, {}).get(row, {}).get(bigtable_column)
            return list(reversed(versions.items())) if versions else []

    def tables(self) -> list:
        with self._lock:
            return sorted(t for t, rows in self._tables.items() if rows)

    def rows(self, table: str, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """Row keys of ``table`` in ``[start_row, end_row)``, sorted."""
        with self._lock:
            rows = self._tables.get(table)
            if not rows:
                return []
            return list(rows.irange(start_row, end_row, inclusive=(True, False)))

    def columns(self, table: str, row: str) -> list:
        with self._lock:
            return sorted(self._tables.get(table, {}).get(row, {}))

    def dump(self, table: Optional[str] = None) -> dict:
        """A deep copy ``{table: {row: {column: [(ts, value), ...]}}}``, newest first."""
        with self._lock:
            names = [table] if table is not None else list(self._tables)
            return {t: {r: {c: list(reversed(v.items())) for c, v in cols.items()}
                        for r, cols in self._tables.get(t, {}).items()}
                    for t in names if self._tables.get(t)}

    def notifications(self, start: Optional[tuple] = None) -> Iterator[tuple]:
        """Pending ``(table, row, column)`` notifications from ``start`` on (a copy)."""
        with self._lock:
            return iter(list(self.notify_index.irange(minimum=start)))
