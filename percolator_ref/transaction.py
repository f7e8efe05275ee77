"""Percolator transactions (paper section 2.2, Figure 6).

A :class:`Transaction` reads a snapshot at ``start_ts`` and buffers its
writes; ``commit()`` runs the client-coordinated two-phase commit:

1. **prewrite** every written cell, primary first (the first cell written):
   abort on a write record at or after ``start_ts`` or a lock at any
   timestamp; else write the data and a lock at ``start_ts``;
2. take ``commit_ts`` from the oracle;
3. **commit the primary**: if its lock is still there, replace it by a write
   record at ``commit_ts`` — the commit point;
4. **commit the secondaries** the same way (and write weak notifications).

Each step is one single-row Bigtable transaction. Semantics chosen where the
paper is silent (see the README): an aborting commit rolls back the locks it
had written (so readers need not wait for a live but failed writer); deletes
commit a write record of kind ``DELETE`` and write no data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from . import cleanup
from .errors import ClientCrash, TransactionClosed
from .model import (DEFAULT_TABLE, Cell, Lock, Write, WriteKind, check_cell, check_name,
                    check_value, data_col, lock_col, notify_col, split_column, write_col)

CRASH_POINTS = ("prewrite-primary", "prewrite", "commit-primary")
_STORED_KINDS = ("data", "lock", "write")


@dataclass(frozen=True)
class Mutation:
    """A buffered write: ``kind`` PUT with a value, or DELETE."""
    cell: Cell
    kind: WriteKind
    value: Any = None


class SnapshotRead(NamedTuple):
    """What a snapshot read of one cell found: a blocking lock, or a version."""
    lock: Optional[Lock] = None
    version: Optional[int] = None      # commit_ts of the write record read
    value: Any = None


def _check_crash_after(crash_after):
    if crash_after is None or crash_after in CRASH_POINTS:
        return
    if isinstance(crash_after, bool) or not isinstance(crash_after, (int, str)):
        raise TypeError(f"crash_after must be None, one of {CRASH_POINTS} or an int >= 1, "
                        f"got {crash_after!r}")
    if isinstance(crash_after, str):
        raise ValueError(f"crash_after must be one of {CRASH_POINTS} or an int >= 1, "
                         f"got {crash_after!r}")
    if crash_after < 1:
        raise ValueError(f"crash_after must be >= 1 when an int, got {crash_after}")


class Transaction:
    """One client's snapshot-isolation transaction. Create with ``cluster.begin()``."""

    def __init__(self, cluster, client: Optional[str] = None):
        self.cluster = cluster
        self.start_ts: int = cluster.oracle.get_timestamp()
        self.commit_ts: Optional[int] = None
        self.client = client if client is not None else f"T{self.start_ts}"
        self._owns_token = client is None
        if self._owns_token:
            cluster.lockservice.register(self.client)
        self.writes: dict[Cell, Mutation] = {}      # insertion order: primary first
        self.notifies: dict[Cell, None] = {}
        self.status = "open"                        # open/committed/aborted/crashed
        self._crash_after = None
        self._row_txns = 0
        self.record = cluster.history.begin(self) if cluster.history is not None else None

    def __repr__(self):
        return (f"<Transaction {self.client} start_ts={self.start_ts} "
                f"commit_ts={self.commit_ts} {self.status}>")

    @property
    def primary(self) -> Optional[Cell]:
        """The primary cell: the first cell written (Figure 6's ``writes_[0]``)."""
        return next(iter(self.writes), None)

    @property
    def secondaries(self) -> list:
        return list(self.writes)[1:]

    # -- reads ---------------------------------------------------------------
    def get(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """The cell's value in the snapshot at ``start_ts``, or None if absent.

        Does not see this transaction's own buffered writes. Meeting a lock at
        or below ``start_ts`` it waits for a live holder or cleans up a dead one.
        """
        self._check_open()
        cell = check_cell(row, column, table)
        attempt = 0
        while True:
            with self._row_txn(cell.table, cell.row, "get") as rt:
                found = self._snapshot_read(rt, cell)
                rt.explain(self._explain_read(cell, found))
            if found.lock is None:
                self._record_read(cell, found)
                return found.value
            cleanup.backoff_and_maybe_cleanup_lock(self, cell, found.lock, attempt)
            attempt += 1

    def scan(self, table: str = DEFAULT_TABLE, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """``[(row, column, value), ...]`` of the snapshot, rows in ``[start_row, end_row)``."""
        self._check_open()
        check_name(table, "table")
        for name, bound in (("start_row", start_row), ("end_row", end_row)):
            if bound is not None:
                check_name(bound, name)
        result = []
        for row in self.cluster.bigtable.rows(table, start_row, end_row):
            result.extend(self._scan_row(table, row))
        return result

    def _scan_row(self, table: str, row: str) -> list:
        """One row of a scan: one row transaction reading every column of the row."""
        attempt = 0
        while True:
            with self._row_txn(table, row, "scan") as rt:
                cells = [Cell(table, row, c) for c in _stored_columns(rt.columns())]
                reads = [(cell, self._snapshot_read(rt, cell)) for cell in cells]
                rt.explain(f"scan {table}/{row}: " + "; ".join(
                    self._explain_read(cell, found) for cell, found in reads))
            blocked = next(((c, f.lock) for c, f in reads if f.lock is not None), None)
            if blocked is None:
                for cell, found in reads:
                    self._record_read(cell, found)
                return [(row, c.column, f.value) for c, f in reads if f.value is not None]
            cleanup.backoff_and_maybe_cleanup_lock(self, blocked[0], blocked[1], attempt)
            attempt += 1

    def _snapshot_read(self, rt, cell: Cell) -> SnapshotRead:
        """Figure 6's Get body, inside one row transaction."""
        column = cell.column
        lock = rt.read(lock_col(column), self.start_ts)
        if lock is not None:                     # a pending write at or below our snapshot
            return SnapshotRead(lock=lock[1])
        latest = rt.read(write_col(column), self.start_ts)
        while latest is not None and latest[1].kind is WriteKind.ROLLBACK:
            latest = rt.read(write_col(column), latest[0] - 1)   # markers are not data
        if latest is None:                       # nothing committed before our snapshot
            return SnapshotRead()
        commit_ts, write = latest
        if write.kind is WriteKind.DELETE:
            return SnapshotRead(version=commit_ts)
        data = rt.read(data_col(column), write.start_ts, write.start_ts)
        return SnapshotRead(version=commit_ts, value=data[1])

    def _explain_read(self, cell: Cell, found: SnapshotRead) -> str:
        if found.lock is not None:
            return (f"get {cell}: lock by {found.lock.client} at or below start "
                    f"{self.start_ts} -> wait or clean up")
        if found.version is None:
            return f"get {cell}: no write record at or below start {self.start_ts} -> absent"
        return f"get {cell}: newest write record at or below {self.start_ts} is @ {found.version}"

    # -- buffered writes -------------------------------------------------------
    def set(self, row: str, column: str, value, table: str = DEFAULT_TABLE) -> None:
        """Buffer a write of ``value``; it becomes visible at commit."""
        self._check_open()
        cell = check_cell(row, column, table)
        check_value(value)
        self.writes[cell] = Mutation(cell, WriteKind.PUT, value)

    def delete(self, row: str, column: str, table: str = DEFAULT_TABLE) -> None:
        """Buffer a delete; it commits a write record of kind DELETE."""
        self._check_open()
        cell = check_cell(row, column, table)
        self.writes[cell] = Mutation(cell, WriteKind.DELETE)

    def notify(self, row: str, column: str, table: str = DEFAULT_TABLE) -> None:
        """Buffer a weak notification: sets ``c:notify`` at commit, no write, no conflict."""
        self._check_open()
        self.notifies[check_cell(row, column, table)] = None

    # -- commit ----------------------------------------------------------------
    def commit(self, crash_after=None) -> bool:
        """Two-phase commit; True if committed, False on a conflict (nothing visible).

        ``crash_after`` (a name in CRASH_POINTS or a count of row transactions)
        raises :class:`ClientCrash` at that point, leaving the store as a crashed
        client would.
        """
        self._check_open()
        _check_crash_after(crash_after)
        self._crash_after, self._row_txns = crash_after, 0
        if not self.writes and not self.notifies:
            self._close("committed")
            return True
        try:
            ok = self._two_phase_commit()
        except ClientCrash:
            self.cluster.lockservice.crash(self.client)
            self._close("crashed")
            raise
        self._close("committed" if ok else "aborted")
        return ok

    def _two_phase_commit(self) -> bool:
        mutations = list(self.writes.values())
        if mutations and not self._prewrite_all(mutations):
            return False
        self.commit_ts = self.cluster.oracle.get_timestamp()
        if mutations:
            primary, secondaries = mutations[0], mutations[1:]
            if not self._commit_primary(primary):
                self.commit_ts = None
                self._roll_back_own(secondaries)
                return False
            self._crash_point("commit-primary")
            for m in secondaries:
                self._commit_secondary(m)
        for cell in self.notifies:
            self._write_weak_notification(cell)
        return True

    def _prewrite_all(self, mutations: list) -> bool:
        """Phase one: lock the primary, then each secondary; roll back on conflict."""
        primary = mutations[0].cell
        for i, m in enumerate(mutations):
            if not self.prewrite(m, primary):
                self._roll_back_own(mutations[:i])
                return False
            if i == 0:
                self._crash_point("prewrite-primary")
        self._crash_point("prewrite")
        return True

    def prewrite(self, m: Mutation, primary: Cell) -> bool:
        """Figure 6's Prewrite of one cell: False on a write-write conflict or a lock."""
        column, is_primary = m.cell.column, m.cell == primary
        step = "prewrite-primary" if is_primary else "prewrite-secondary"
        with self._row_txn(m.cell.table, m.cell.row, step) as rt:
            newer, lock = self._check_and_lock(rt, m, primary, is_primary)
            if newer is not None:            # write-write conflict: committed after our start
                rt.explain(f"prewrite {m.cell}: write record @ {newer[0]} >= start "
                           f"{self.start_ts} -> conflict, abort")
                return False
            if lock is None:
                return True
            # another transaction holds the cell
            rt.explain(f"prewrite {m.cell}: lock by {lock[1].client} @ {lock[0]} "
                       f"-> conflict, abort")
        if not self.cluster.lockservice.is_alive(lock[1].client):
            cleanup.cleanup_lock(self, m.cell, lock[1])     # tidy up, but still abort
        return False

    def _check_and_lock(self, rt, m: Mutation, primary: Cell, is_primary: bool):
        """Prewrite's two checks, then, if both pass, data and lock at start_ts.

        Returns ``(newer write record, lock)`` found (None, None when it locked).
        With conditional mutations (section 2.5, a store offering
        ``check_and_mutate``) the checks travel with the writes in one round
        trip and the store drops the writes if a check fails.
        """
        column = m.cell.column
        if _offers_conditional_mutations(rt):
            self._write_data_and_lock(rt, m, primary, is_primary)
            _, (newer, lock) = rt.check_and_mutate(
                [(write_col(column), self.start_ts, None, False), (lock_col(column), 0, None, False)])
            return newer, lock
        newer = rt.read(write_col(column), min_ts=self.start_ts)
        lock = None if newer else rt.read(lock_col(column))
        if newer is None and lock is None:
            self._write_data_and_lock(rt, m, primary, is_primary)
        return newer, lock

    def _write_data_and_lock(self, rt, m: Mutation, primary: Cell, is_primary: bool) -> None:
        column = m.cell.column
        if m.kind is WriteKind.PUT:
            rt.write(data_col(column), self.start_ts, m.value)
        lock = Lock(self.start_ts, primary, is_primary, self.client, m.kind)
        rt.write(lock_col(column), self.start_ts, lock)
        what = "data" if m.kind is WriteKind.PUT else "no data (a delete)"
        rt.explain(f"prewrite {m.cell}: no write after start {self.start_ts}, no lock: write "
                   f"{what} and a lock " + ("'I am primary'" if is_primary
                                             else f"pointing at the primary {primary}"))

    def _commit_primary(self, m: Mutation) -> bool:
        """The commit point: replace the primary lock by a write record, if the lock is still ours."""
        with self._row_txn(m.cell.table, m.cell.row, "commit-primary") as rt:
            if not self._write_record_if_locked(rt, m):
                # race: a cleaner judged us dead and rolled the primary back
                rt.explain(f"commit {m.cell}: primary lock gone -> rolled back by a cleaner, abort")
                return False
            rt.explain(f"commit {m.cell} (commit point): write record {m.kind.value} @ "
                       f"{self.start_ts} at commit ts {self.commit_ts}, erase the primary lock")
            return True

    def _write_record_if_locked(self, rt, m: Mutation) -> bool:
        """Write the primary's record only if our lock is still there; True if written."""
        if _offers_conditional_mutations(rt):       # section 2.5: one round trip
            self._write_record(rt, m)
            held, _ = rt.check_and_mutate(
                [(lock_col(m.cell.column), self.start_ts, self.start_ts, True)])
            return held
        if cleanup.held_lock(rt, m.cell.column, self.start_ts) is None:
            return False
        self._write_record(rt, m)
        return True

    def _commit_secondary(self, m: Mutation) -> None:
        """Second phase: a secondary's write record (idempotent if a cleaner rolled it forward)."""
        with self._row_txn(m.cell.table, m.cell.row, "commit-secondary") as rt:
            self._write_record(rt, m)
            rt.explain(f"commit {m.cell}: write record {m.kind.value} @ {self.start_ts} at "
                       f"commit ts {self.commit_ts}, erase the lock")

    def _write_record(self, rt, m: Mutation) -> None:
        notify = self.cluster.is_observed(m.cell.table, m.cell.column)
        cleanup.write_commit_record(rt, m.cell, Write(self.start_ts, m.kind), self.commit_ts, notify)

    def _write_weak_notification(self, cell: Cell) -> None:
        with self._row_txn(cell.table, cell.row, "notify") as rt:
            rt.write(notify_col(cell.column), self.commit_ts, True)
            rt.explain(f"weak notification {cell}: set {cell.column}:notify @ {self.commit_ts}")

    def _roll_back_own(self, mutations: list) -> None:
        """After an abort, erase the locks (and data) this transaction wrote."""
        for m in mutations:
            with self._row_txn(m.cell.table, m.cell.row, "abort-rollback") as rt:
                if cleanup.held_lock(rt, m.cell.column, self.start_ts) is not None:
                    cleanup.erase_lock_and_data(rt, m.cell.column, self.start_ts)
                rt.explain(f"abort: erase own lock and data on {m.cell} @ {self.start_ts}")

    # -- plumbing ----------------------------------------------------------------
    def _row_txn(self, table: str, row: str, step: str):
        """Every row transaction of this client: heartbeat, trace label, crash counting."""
        self.cluster.lockservice.heartbeat(self.client)
        return self.cluster.bigtable.row_transaction(
            table, row, client=self.client, step=step, after=self._after_row_transaction)

    def _after_row_transaction(self, step: str) -> None:
        self._row_txns += 1
        if self._crash_after is not None and self._crash_after == self._row_txns:
            raise ClientCrash(self._row_txns, self._row_txns)

    def _crash_point(self, name: str) -> None:
        if self._crash_after == name:
            raise ClientCrash(name, self._row_txns)

    def _record_read(self, cell: Cell, found: SnapshotRead) -> None:
        if self.record is not None:
            self.record.reads.append((cell, found.version, found.value))

    def _check_open(self) -> None:
        if self.status != "open":
            raise TransactionClosed(f"transaction {self.client} is {self.status}; "
                                    f"begin a new one")

    def _close(self, status: str) -> None:
        self.status = status
        self._crash_after = None
        if self.record is not None:
            self.cluster.history.finish(self)
        if self._owns_token and status != "crashed":
            self.cluster.lockservice.release(self.client)


def _offers_conditional_mutations(rt) -> bool:
    """Does the store send a check and its writes as one conditional mutation (2.5)?

    Only a store that sets ``conditional_mutations`` and whose row transactions
    have ``check_and_mutate`` (the Redis store with ``conditional=1``); the
    cells and the trace are the same either way, only round trips differ.
    """
    return (getattr(rt.bigtable, "conditional_mutations", False)
            and hasattr(rt, "check_and_mutate"))


def _stored_columns(physical_columns) -> list:
    """Logical columns with data, lock or write versions (notify/ack are internal)."""
    names = {}
    for physical in physical_columns:
        column, kind = split_column(physical)
        if kind in _STORED_KINDS:
            names[column] = None
    return sorted(names)
