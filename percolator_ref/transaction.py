"""Percolator transactions (paper §2.2, Figure 6).

A :class:`Transaction` reads a snapshot at ``start_ts`` and buffers its
writes; :meth:`Transaction.commit` runs Figure 6's client-coordinated
two-phase commit, each step one single-row Bigtable transaction:

1. **Prewrite** every written cell, primary first (the first cell written):
   abort on a write record at or after ``start_ts`` or a lock at any
   timestamp; else write the data and a lock at ``start_ts``;
2. take ``commit_ts`` from the oracle, only now that every lock is written
   (§2.3: a reader with a later start_ts then sees the lock or the write);
3. set the notifications that must survive a crash (observed secondaries,
   weak notifications) at ``commit_ts``;
4. **commit the primary**: if its lock is still there, replace it by a write
   record at ``commit_ts`` — the commit point;
5. commit the secondaries the same way.

Semantics chosen where the paper is silent (README): an aborting commit rolls
back the locks it wrote; deletes commit a write record of kind ``DELETE``;
notifications are written before the commit point, so a crash after it
cannot lose them (an aborted commit may cause one extra observer run).
Every ``commit()`` ends in a final state (API.md): committed, aborted, crashed
(fault injection) or unknown (:class:`CommitOutcomeUnknown`).

This is the paper's protocol and nothing else: a protocol variant (TiKV's,
Spanner's) overrides named steps of it from outside, per cluster
(:mod:`percolator_ref.variants`); no step here asks which variant runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from . import cleanup, faults, rows
from .bigtable import Condition
from .errors import CommitOutcomeUnknown, StoreUnavailable, TransactionClosed
from .interceptors import attach
from .model import (DEFAULT_TABLE, Cell, CommitPhase, Lock, TxStatus, Write, WriteKind,
                    check_cell, check_name,
                    check_value, data_col, lock_col, notify_col, split_column, write_col)
from .session import Session
from .step import CRASH_POINTS, Step

__all__ = ["CRASH_POINTS", "Mutation", "SnapshotRead", "Transaction", "snapshot_read"]
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


def snapshot_read(rt, start_ts: int, column: str) -> SnapshotRead:
    """Figure 6's Get body for one cell, inside one row transaction of its row."""
    lock = rt.read(lock_col(column), start_ts)
    if lock is not None:                     # a pending write at or below our snapshot
        return SnapshotRead(lock=lock[1])
    return committed_read(rt, start_ts, column)


def committed_read(rt, start_ts: int, column: str) -> SnapshotRead:
    """The newest committed version at or below ``start_ts``, locks not looked at (a
    variant reads past a lock it may ignore with this)."""
    latest = rows.latest_write(rt, column, start_ts)
    if latest is None:                       # nothing committed before our snapshot
        return SnapshotRead()
    commit_ts, write = latest
    if write.kind is WriteKind.DELETE:
        return SnapshotRead(version=commit_ts)
    data = rt.read(data_col(column), write.start_ts, write.start_ts)
    return SnapshotRead(version=commit_ts, value=data[1])


class Transaction:
    """One client's snapshot-isolation transaction. Create with ``cluster.begin()``.

    ``client`` names a worker whose liveness token the transaction shares
    (default: the transaction is its own client ``T<start_ts>``).
    ``session`` is what the protocol talks to (:class:`~percolator_ref.session.Session`).
    """

    def __init__(self, cluster, client: Optional[str] = None):
        if client is not None:
            check_name(client, "client")
        self.cluster = cluster
        began_at = cluster.clock.now()      # real time before start_ts (the external order)
        self.start_ts: int = cluster.oracle.get_timestamp()
        self.commit_ts: Optional[int] = None
        self.client = client if client is not None else f"T{self.start_ts}"
        self.session = Session(cluster, self.client, owns_token=client is None)
        self.writes: dict[Cell, Mutation] = {}      # insertion order: primary first
        self.notifies: dict[Cell, None] = {}
        self.status = TxStatus.OPEN
        self.phase = CommitPhase.PREWRITE   # what a store failure means (compare with ==:
                                            # a subclass may set the phase's string)
        self.record = (cluster.history.begin(self, began_at) if cluster.history is not None
                       else None)

    def __repr__(self):
        return (f"<Transaction {self.client} start_ts={self.start_ts} "
                f"commit_ts={self.commit_ts} {self.status}>")

    # -- Get (Figure 6) --------------------------------------------------------
    def get(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """The cell's value in the snapshot at ``start_ts``, or None if absent.

        Does not see this transaction's own buffered writes. Meeting a lock at
        or below ``start_ts`` it waits for a live holder or cleans up a dead one.
        """
        self.check_open()
        cell = check_cell(row, column, table)
        attempt = 0
        while True:
            with self.session.row_transaction(cell.table, cell.row, Step.GET) as rt:
                found = self.snapshot_read(rt, cell)
                rt.explain(self.explain_read(cell, found))
            if found.lock is None:
                self.record_read(cell, found)
                return found.value
            cleanup.backoff_and_maybe_cleanup_lock(self.session, cell, found.lock, attempt)
            attempt += 1

    def snapshot_read(self, rt, cell: Cell) -> SnapshotRead:
        """What ``cell`` holds at ``start_ts``, read in ``rt`` (a row transaction of its row).

        A lock at or below ``start_ts`` -> ``SnapshotRead(lock=...)``; else the
        newest write record at or below ``start_ts`` gives the version and,
        unless it is a delete, the data written at its ``start_ts``.
        """
        return snapshot_read(rt, self.start_ts, cell.column)

    def explain_read(self, cell: Cell, found: SnapshotRead) -> str:
        """The trace sentence for a snapshot read."""
        if found.lock is not None:
            return (f"get {cell}: lock by {found.lock.client} at or below start "
                    f"{self.start_ts} -> wait or clean up")
        if found.version is None:
            return f"get {cell}: no write record at or below start {self.start_ts} -> absent"
        return f"get {cell}: newest write record at or below {self.start_ts} is @ {found.version}"

    def scan(self, table: str = DEFAULT_TABLE, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """``[(row, column, value), ...]`` of the snapshot, rows in ``[start_row, end_row)``."""
        self.check_open()
        check_name(table, "table")
        for name, bound in (("start_row", start_row), ("end_row", end_row)):
            if bound is not None:
                check_name(bound, name)
        result = []
        for row in self.cluster.bigtable.rows(table, start_row, end_row):
            result.extend(self.scan_row(table, row))
        return result

    def scan_row(self, table: str, row: str) -> list:
        """One row of a scan: one row transaction reading every column of the row."""
        attempt = 0
        while True:
            with self.session.row_transaction(table, row, Step.SCAN) as rt:
                cells = [Cell(table, row, c) for c in stored_columns(rt.columns())]
                reads = [(cell, self.snapshot_read(rt, cell)) for cell in cells]
                rt.explain(f"scan {table}/{row}: " + "; ".join(
                    self.explain_read(cell, found) for cell, found in reads))
            blocked = next(((c, f.lock) for c, f in reads if f.lock is not None), None)
            if blocked is None:
                for cell, found in reads:
                    self.record_read(cell, found)
                return [(row, c.column, f.value) for c, f in reads if f.value is not None]
            cleanup.backoff_and_maybe_cleanup_lock(self.session, *blocked, attempt)
            attempt += 1

    # -- buffered writes (Figure 2's Set) -------------------------------------------
    def set(self, row: str, column: str, value, table: str = DEFAULT_TABLE) -> None:
        """Buffer a write of ``value``; it becomes visible at commit."""
        self.check_open()
        cell = check_cell(row, column, table)
        check_value(value)
        self.writes[cell] = Mutation(cell, WriteKind.PUT, value)

    def delete(self, row: str, column: str, table: str = DEFAULT_TABLE) -> None:
        """Buffer a delete; it commits a write record of kind DELETE."""
        self.check_open()
        cell = check_cell(row, column, table)
        self.writes[cell] = Mutation(cell, WriteKind.DELETE)

    def notify(self, row: str, column: str, table: str = DEFAULT_TABLE) -> None:
        """Buffer a weak notification: sets ``c:notify`` at commit, no write, no conflict."""
        self.check_open()
        self.notifies[check_cell(row, column, table)] = None

    def acknowledge(self, ack: Cell) -> None:
        """Buffer an observer run's acknowledgement ``c:ack_O`` = ``start_ts`` (§2.4).

        It must be the first write, so it is the run's primary: the run commits
        exactly when its acknowledgement does.
        """
        self.check_open()
        if self.writes:
            raise ValueError(f"ack must be the first write of the run, but {next(iter(self.writes))} "
                             f"was written first")
        self.writes[ack] = Mutation(ack, WriteKind.PUT, self.start_ts)

    # -- Commit (Figure 6) -----------------------------------------------------------
    def commit(self, crash_after=None) -> bool:
        """Two-phase commit; True if committed, False on a conflict (nothing visible).

        ``crash_after`` (a name in CRASH_POINTS or a count of row transactions;
        see :mod:`percolator_ref.faults`) raises :class:`ClientCrash` there.
        A store failure before the commit point aborts (False); during it,
        raises :class:`CommitOutcomeUnknown` (see :meth:`outcome`); after it,
        the commit stands (True). Any other exception (ClientCrash,
        KeyboardInterrupt, SystemExit, an interceptor raising) propagates and the
        transaction is closed as crashed: nothing more is written, its token
        lapses after the TTL and :meth:`outcome` decides at the primary. The
        transaction is closed in every case.
        """
        self.check_open()
        plan = faults.crash_plan(crash_after, self.session, len(self.writes))
        try:
            with attach(self.session, *([plan] if plan else [])):
                ok = self.two_phase_commit()
        except StoreUnavailable as failure:
            ok = self.after_store_failure(failure)
        except BaseException:         # ClientCrash, an interrupt, an interceptor raising:
            self.close(TxStatus.CRASHED)  # the client stopped; outcome() decides at the primary
            raise
        self.close(TxStatus.COMMITTED if ok else TxStatus.ABORTED)
        return ok

    def two_phase_commit(self) -> bool:
        """Figure 6's Commit: prewrite all (primary first), commit_ts, primary, secondaries."""
        if not self.writes and not self.notifies:
            return True                         # read-only: no commit_ts
        mutations = list(self.writes.values())
        primary = mutations[0].cell if mutations else None
        for i, m in enumerate(mutations):
            if not self.prewrite(m, primary):
                self.roll_back_own(mutations[:i])
                return False
        self.commit_ts = self.commit_timestamp()
        self.write_notifications(mutations[1:])
        self.phase = CommitPhase.COMMIT_POINT
        if mutations and not self.commit_primary(mutations[0]):
            self.commit_ts = None
            self.roll_back_own(mutations[1:])
            return False
        self.phase = CommitPhase.SECONDARIES
        for m in mutations[1:]:
            self.commit_secondary(m)
        return True

    # -- Prewrite (Figure 6) ----------------------------------------------------------
    def prewrite(self, m: Mutation, primary: Cell) -> bool:
        """Figure 6's Prewrite of one cell: False on a write-write conflict or a lock.

        One conditional mutation (§2.5): no write record at or after
        ``start_ts`` and no lock at any timestamp, then data (unless a
        delete) and a lock at ``start_ts``. A lock of a dead client is cleaned
        up, and the commit still aborts.
        """
        is_primary = m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            self.hold_row(rt, m.cell)
            ok, found = rt.check_and_write(
                [Condition(write_col(m.cell.column), min_ts=self.start_ts),
                 Condition(lock_col(m.cell.column))],
                self.prewrite_writes(m, primary, is_primary))
            rt.explain(self.explain_prewrite(m, primary, is_primary, found))
        if ok:
            return True
        lock = found[-1] if len(found) == 2 else None
        if lock is not None and not self.session.is_alive(lock[1].client):
            cleanup.cleanup_lock(self.session, m.cell, lock[1])    # tidy up, but still abort
        return False

    def hold_row(self, rt, cell: Cell) -> None:
        """What a prewrite does in its row before it checks: nothing (a variant's hook:
        async commit reads the row here, to hold it before it reads max_ts)."""

    def own_locks(self) -> dict:
        """``{cell: ts}``: locks this transaction holds before its prewrite: none (a
        variant's hook: pessimistic locks, which a one-phase commit replaces)."""
        return {}

    def prewrite_writes(self, m: Mutation, primary: Cell, is_primary: bool) -> list:
        """What a successful prewrite writes: the data (unless a delete) and the lock."""
        column = m.cell.column
        lock = Lock(self.start_ts, primary, is_primary, self.client, m.kind)
        data = [(data_col(column), self.start_ts, m.value)] if m.kind is WriteKind.PUT else []
        return data + [(lock_col(column), self.start_ts, lock)]

    def explain_prewrite(self, m: Mutation, primary: Cell, is_primary: bool, found) -> str:
        if found[0] is not None:            # write-write conflict: committed after our start
            return (f"prewrite {m.cell}: write record @ {found[0][0]} >= start "
                    f"{self.start_ts} -> conflict, abort")
        if found[-1] is not None and len(found) == 2:     # another transaction holds the cell
            return f"prewrite {m.cell}: lock by {found[1][1].client} @ {found[1][0]} -> conflict, abort"
        what = "data" if m.kind is WriteKind.PUT else "no data (a delete)"
        return (f"prewrite {m.cell}: no write after start {self.start_ts}, no lock: write "
                f"{what} and a lock " + ("'I am primary'" if is_primary
                                          else f"pointing at the primary {primary}"))

    # -- the commit point and the secondaries ------------------------------------------
    def commit_timestamp(self) -> int:
        """Take ``commit_ts`` from the timestamp source, now that every lock is written (§2.3)."""
        return self.session.timestamp()

    def write_notifications(self, secondaries: list) -> None:
        """Set ``c:notify`` at commit_ts on observed secondaries and weakly notified cells.

        Written before the commit point, so a client that dies after it cannot
        lose them (the primary's is written with its write record).
        """
        cells = [m.cell for m in secondaries
                 if self.session.is_observed(m.cell.table, m.cell.column)]
        for cell in dict.fromkeys(cells + list(self.notifies)):
            with self.session.row_transaction(cell.table, cell.row, Step.NOTIFY) as rt:
                rt.write(notify_col(cell.column), self.commit_ts, True)
                rt.explain(f"notification {cell}: set {cell.column}:notify @ {self.commit_ts} "
                           f"before the commit point")

    def commit_primary(self, m: Mutation) -> bool:
        """The commit point: replace the primary lock by a write record, if the lock is still ours."""
        notify = self.session.is_observed(m.cell.table, m.cell.column)
        with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
            held, _ = rt.check_and_write(
                [rows.lock_is_held(m.cell.column, self.start_ts)],
                rows.commit_writes(m.cell.column, Write(self.start_ts, m.kind), self.commit_ts,
                                   notify))
            if not held:
                # race: a cleaner judged us dead and rolled the primary back
                rt.explain(f"commit {m.cell}: primary lock gone -> rolled back by a cleaner, abort")
                return False
            rt.explain(f"commit {m.cell} (commit point): write record {m.kind.value} @ "
                       f"{self.start_ts} at commit ts {self.commit_ts}, erase the primary lock")
            return True

    def commit_secondary(self, m: Mutation) -> None:
        """A secondary's write record (idempotent if a cleaner rolled it forward)."""
        with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_SECONDARY) as rt:
            rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.start_ts, m.kind),
                                              self.commit_ts, notify=False))
            rt.explain(f"commit {m.cell}: write record {m.kind.value} @ {self.start_ts} at "
                       f"commit ts {self.commit_ts}, erase the lock")

    def roll_back_own(self, mutations: list) -> None:
        """After an abort, erase the locks (and data) this transaction wrote."""
        for m in mutations:
            with self.session.row_transaction(m.cell.table, m.cell.row, Step.ABORT_ROLLBACK) as rt:
                if rows.held_lock(rt, m.cell.column, self.start_ts) is not None:
                    rows.apply(rt, self.session.cleanup.rollback_writes(m.cell.column,
                                                                         self.start_ts))
                rt.explain(f"abort: erase own lock and data on {m.cell} @ {self.start_ts}")

    # -- final states ------------------------------------------------------------------
    def after_store_failure(self, failure: StoreUnavailable) -> bool:
        """The store failed mid-commit: aborted before the commit point, committed after it,
        unknown during it (raises :class:`CommitOutcomeUnknown`)."""
        if self.phase == CommitPhase.SECONDARIES:
            return True                   # past the commit point: readers roll forward
        if self.phase == CommitPhase.PREWRITE:
            self.commit_ts = None
            self.try_roll_back_own()      # best effort: else readers roll our locks back
            return False
        self.close(TxStatus.UNKNOWN)
        raise CommitOutcomeUnknown(
            f"transaction {self.client} (start_ts {self.start_ts}): the store failed while "
            f"writing the commit point ({failure}); whether it committed is decided by its "
            f"primary {next(iter(self.writes))}: call outcome() once the store is back") from failure

    def try_roll_back_own(self) -> None:
        """Erase our locks if the store answers (after a failure before the commit point)."""
        try:
            self.roll_back_own(list(self.writes.values()))
        except StoreUnavailable:
            pass                          # our token is released: readers clean up lazily

    def outcome(self) -> bool:
        """Committed (True) or not (False), decided at the primary once the store is reachable.

        For a transaction whose commit raised (:class:`CommitOutcomeUnknown`,
        :class:`ClientCrash`, an interrupt): a write record at the primary
        means committed (``commit_ts`` is set to it); a primary lock still there
        is rolled back (the commit point can no longer be reached), so the
        answer is final. A store with replicas (``wait=N``) answers the
        primary's row transaction only once what it read is on N replicas, so a
        decision a failover can lose is never reported: until then
        :class:`StoreUnavailable` (call ``outcome()`` again).
        """
        if self.status == TxStatus.OPEN:
            raise ValueError("outcome() is for a transaction whose commit() ended; commit first")
        if self.status in (TxStatus.COMMITTED, TxStatus.ABORTED) or not self.writes:
            return self.status == TxStatus.COMMITTED
        resolver = Session(self.cluster, f"{self.client}/outcome")
        try:
            commit_ts = cleanup.resolve_primary(resolver, next(iter(self.writes)),
                                                self.start_ts, self.client)
        finally:
            resolver.release()
        self.commit_ts = commit_ts        # None: it never committed
        return commit_ts is not None

    def abandon(self) -> None:
        """Close an open transaction without writing anything (its buffered writes are dropped)."""
        if self.status == TxStatus.OPEN:
            self.close(TxStatus.ABORTED)

    # -- plumbing ----------------------------------------------------------------------
    def record_read(self, cell: Cell, found: SnapshotRead) -> None:
        if self.record is not None:
            self.record.reads.append((cell, found.version, found.value))

    def check_open(self) -> None:
        """Raise :class:`TransactionClosed` unless the transaction is still open."""
        if self.status != TxStatus.OPEN:
            raise TransactionClosed(f"transaction {self.client} is {self.status}; begin a new one")

    def close(self, status: TxStatus) -> None:
        self.status = TxStatus(status)
        if self.record is not None:
            self.cluster.history.finish(self)
        if self.status != TxStatus.CRASHED:
            try:
                self.session.release()
            except StoreUnavailable:
                pass                      # the token goes stale after the TTL instead


def stored_columns(physical_columns) -> list:
    """Logical columns with data, lock or write versions (notify/ack are internal)."""
    split = [split_column(physical) for physical in physical_columns]
    return sorted({column for column, kind in split if kind in _STORED_KINDS})
