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
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from sortedcontainers import SortedDict, SortedSet

from .model import check_name
from .stores.raw import RawCellOperations, check_ts  # noqa: F401 (check_ts: re-exported for the stores)
from .step import Step
from .trace import Change, RowTransactionEvent, Tracer

NOTIFY_SUFFIX = ":notify"


@dataclass(frozen=True)
class Condition:
    """One check of a conditional mutation (paper §2.5): a version of ``column``
    with ``min_ts <= ts <= max_ts`` (``max_ts`` None: no upper bound) must exist
    (``present=True``) or must not (``present=False``)."""
    column: str
    min_ts: int = 0
    max_ts: Optional[int] = None
    present: bool = False


class RowTransaction:
    """One atomic single-row transaction (use as a context manager).

    The interface every store offers, and the only way the protocol touches a
    row. Reads return ``(ts, value)`` pairs or ``None`` and see the row as it
    was when the transaction started; ``write``/``erase`` are buffered and
    applied together when the ``with`` block exits without an exception (an
    exception applies nothing). ``check_and_write`` is the conditional
    mutation: checks and writes together. ``explain(note)`` attaches the
    sentence the tracer reports ("why").

    Interceptors (see :mod:`percolator_ref.interceptors`) attach from outside:
    each one's ``before(rt)`` runs before the row transaction starts, and its
    ``after(rt)`` once it has applied, both outside the store's row lock.

    A store subclasses this only to change *how* (round trips, locking), never
    *what*: it implements ``begin(rt)``, ``fetch_row(rt)`` and ``end(rt, commit)``
    and may override :meth:`check_and_write` to send it in one round trip.
    Public state a store may use: ``row_data`` (``{column: SortedDict(ts ->
    value)}`` once fetched), ``columns_read`` and ``mutations`` (``(column, ts,
    value)`` with value None for an erase).
    """

    def __init__(self, store, table: str, row: str, client: Optional[str], step: str,
                 interceptors=()):
        self.store, self.table, self.row = store, table, row
        self.client, self.step = client, step
        self.interceptors = tuple(store.interceptors) + tuple(interceptors)
        self.note = ""
        self.row_data: Optional[dict] = None
        self.columns_read: list[str] = []
        self.mutations: list[tuple[str, int, Any]] = []

    # -- lifecycle -------------------------------------------------------
    def __enter__(self) -> "RowTransaction":
        for interceptor in self.interceptors:
            if hasattr(interceptor, "before"):
                interceptor.before(self)
        self.store.begin(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.store.end(self, commit=exc_type is None)
        if exc_type is None:
            for interceptor in self.interceptors:
                if hasattr(interceptor, "after"):
                    interceptor.after(self)
        return False

    def loaded_row(self) -> dict:
        """The row's columns, fetched from the store at the first read."""
        if self.row_data is None:
            self.row_data = self.store.fetch_row(self)
        return self.row_data

    # -- reads -----------------------------------------------------------
    def read(self, column: str, max_ts: Optional[int] = None, min_ts: int = 0):
        """Newest version of ``column`` with ``min_ts <= ts <= max_ts`` as ``(ts, value)``, or None."""
        self.columns_read.append(column)
        versions = self.loaded_row().get(column)
        if not versions:
            return None
        idx = len(versions) if max_ts is None else versions.bisect_right(max_ts)
        if idx == 0:
            return None
        ts = versions.keys()[idx - 1]
        return (ts, versions[ts]) if ts >= min_ts else None

    def versions(self, column: str) -> list:
        """All versions of ``column``, newest first, as ``[(ts, value), ...]``."""
        self.columns_read.append(column)
        versions = self.loaded_row().get(column)
        return list(versions.items())[::-1] if versions else []

    def columns(self) -> list:
        """The physical columns present in this row, sorted."""
        return sorted(self.loaded_row())

    # -- writes ----------------------------------------------------------
    def write(self, column: str, ts: int, value: Any) -> None:
        """Buffer a version of ``column`` at ``ts``."""
        if value is None:
            raise ValueError("value must not be None (use erase to remove a version)")
        self.mutations.append((column, ts, value))

    def erase(self, column: str, ts: int) -> None:
        """Buffer the removal of the version at exactly ``ts`` (no-op if absent)."""
        self.mutations.append((column, ts, None))

    def check_and_write(self, conditions, writes) -> tuple:
        """A conditional mutation (§2.5): buffer ``writes`` only if every condition holds.

        ``conditions`` are :class:`Condition` s, checked in order; the first
        that fails stops the checks. ``writes`` are ``(column, ts, value)``
        (value None: erase). Returns ``(ok, found)``: ``found[i]`` is the
        newest version in condition ``i``'s range, ``(ts, value)`` or None,
        for each condition checked. The cells are the same on every store;
        a store may only send the checks and the writes in fewer round trips.
        """
        found = []
        for condition in conditions:
            version = self.read(condition.column, condition.max_ts, condition.min_ts)
            found.append(version)
            if (version is not None) != condition.present:
                return False, found
        for column, ts, value in writes:
            self.write(column, ts, value) if value is not None else self.erase(column, ts)
        return True, found

    def explain(self, note: str) -> None:
        self.note = note


def report(tracer: Tracer, rt: RowTransaction, changes: list) -> None:
    """Count an applied row transaction and, if anyone listens, emit its trace event."""
    erases = sum(1 for m in rt.mutations if m[2] is None)
    seq = tracer.count(rt.step, len(rt.columns_read), len(rt.mutations) - erases, erases)
    if tracer.active:
        tracer.emit(RowTransactionEvent(seq, rt.client, rt.table, rt.row, rt.step,
                                        tuple(dict.fromkeys(rt.columns_read)),
                                        tuple(changes), rt.note))


class Bigtable(RawCellOperations):
    """The embedded in-memory Bigtable: one "tablet server" for all tables.

    Thread-safe: a row transaction holds the server's lock from ``begin`` to
    ``end``. ``interceptors`` is a list: each one's ``before(rt)`` /
    ``after(rt)`` run around every row transaction of this store (the
    stepper's scheduler, a modeled round trip, a benchmark's counter), outside
    the lock; see :mod:`percolator_ref.interceptors`.
    """

    def __init__(self, tracer: Optional[Tracer] = None):
        self.tracer = tracer or Tracer()
        self.interceptors: list = []
        self.notify_index = SortedSet()          # (table, row, column) with a notify
        self._tables: dict[str, SortedDict] = {}
        self._lock = threading.RLock()

    # -- row transactions ------------------------------------------------
    def row_transaction(self, table: str, row: str, *, client: Optional[str] = None,
                        step: str = Step.ROW_TRANSACTION, interceptors=()) -> RowTransaction:
        """A single-row transaction on ``table``/``row`` (a context manager).

        ``client`` and ``step`` label the trace event; ``interceptors`` run
        around this row transaction only, after the store's own.
        """
        check_name(table, "table")
        check_name(row, "row")
        return RowTransaction(self, table, row, client, step, interceptors)

    def begin(self, rt: RowTransaction) -> None:
        """Take the row: hold the server lock; the row is read in place."""
        self._lock.acquire()
        rows = self._tables.get(rt.table)
        rt.row_data = rows.get(rt.row, {}) if rows is not None else {}

    def fetch_row(self, rt: RowTransaction) -> dict:
        return rt.row_data

    def end(self, rt: RowTransaction, commit: bool) -> None:
        """Apply the buffered mutations (if ``commit``), report them, release the lock."""
        try:
            if commit:
                report(self.tracer, rt, self._apply(rt.table, rt.row, rt.mutations))
        finally:
            self._lock.release()

    def _apply(self, table: str, row: str, mutations) -> list:
        if not mutations:
            return []
        cells = self._tables.setdefault(table, SortedDict()).setdefault(row, {})
        changes = []
        for column, ts, value in mutations:
            versions = cells.get(column) or cells.setdefault(column, SortedDict())
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
            return list(versions.items())[::-1] if versions else []

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
            return {t: {r: {c: list(v.items())[::-1] for c, v in cols.items()}
                        for r, cols in self._tables.get(t, {}).items()}
                    for t in names if self._tables.get(t)}

    def notifications(self, start: Optional[tuple] = None) -> Iterator[tuple]:
        """Pending ``(table, row, column)`` notifications from ``start`` on (a copy)."""
        with self._lock:
            return iter(list(self.notify_index.irange(minimum=start)))
