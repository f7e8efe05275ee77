"""Pessimistic locks (TiKV): ``get_for_update`` locks a cell when it is read, and waits.

Under the paper's optimistic protocol, transactions that write a common cell
conflict only at prewrite, and all but the first to lock abort (notebook
01's six transfers: one commits, five abort). TiKV's pessimistic transactions
lock a key when the statement reads it for update (``AcquirePessimisticLock``,
TiKV's ``src/storage/txn/commands/acquire_pessimistic_lock.rs`` and
``src/storage/txn/actions/acquire_pessimistic_lock.rs``): a second transaction
that wants the key waits in TiKV's lock manager instead of failing later, and
reads the newest value once it holds the lock, at a fresh ``for_update_ts``
(the lock's ``for_update_ts`` field, TiKV's ``components/txn_types/src/lock.rs``).
Waits can form cycles; TiKV *detects* deadlocks with a wait-for graph
("Keeps the DAG of wait-for-lock. Every edge from ``txn_ts`` to ``lock_ts``":
``DetectTable`` in ``src/server/lock_manager/deadlock.rs``) and fails the
waiter that would close a cycle.

Here:

- ``txn.get_for_update(row, column)`` takes a pessimistic lock (the lock a
  prewrite would write, every variant's fields included — a ttl under
  LockTTL — with ``for_update_ts`` and no data) at the transaction's
  ``txn_ts`` (its first start_ts: TiKV's ``start_ts``, which names the
  transaction) in one row transaction, step ``"acquire-pessimistic-lock"``,
  waiting while another transaction holds the cell; then it takes a fresh
  timestamp and moves the transaction's snapshot there (its ``start_ts``;
  the kit keeps every transaction a snapshot, so the checker still
  applies), and reads the cell. Cells it locked earlier cannot have changed
  (they are locked), so all ``get_for_update`` calls must come before any
  plain ``get`` or ``scan`` (else ValueError);
- a lock is the transaction's own when it is at ``txn_ts`` (TiKV: ``lock.ts
  != start_ts`` -> KeyIsLocked), not when it names the same client;
- waiting: each wait adds the edge ``txn_ts -> holder's start_ts`` to the
  wait-for graph of the store (on the Redis server for a Redis store, so
  every client of the store sees every wait), then runs the cluster's
  cleanup step for the lock (back off while its holder lives — by token,
  or by the lock's ttl under LockTTL — clean it up once it does not: a
  pessimistic lock is resolved at its primary like any other lock). The
  waiter whose edge would close a cycle gets :class:`Deadlock`, and its
  transaction is aborted (its locks released). A wait removes its edge
  when it ends, however it ends; an edge left by a waiter that vanished
  expires after the lock TTL;
- the first cell locked is the pessimistic primary (TiKV's primary is the
  first key locked): its lock stays until the commit point, which is there
  when the primary is written (the commit then checks and erases that lock
  in the same row transaction), and a prewrite replaces the transaction's
  other pessimistic locks by the paper's lock; before the commit, cells
  locked but not written are checked to be still ours (TiKV fails such a
  prewrite: ``PessimisticLockNotFound``); after it, their locks are
  released. A crash releases nothing (readers clean up);
- a reader reads past any pessimistic lock (it holds no data, as TiKV's
  readers skip ``LockType::Pessimistic``), the transaction's own included.

Left out: a transaction that locks its primary for update and does not write
it has its commit point elsewhere; its locked-but-unwritten cells are checked
just before the commit, not at the commit point (TiKV prewrites such keys as
``Lock`` mutations and commits a ``Lock`` write record; the kit has no such
write kind). A cleaner can release them in between only by judging the
running transaction dead.
"""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import Optional

from ..bigtable import Condition
from ..errors import PercolatorError, StoreUnavailable
from ..model import (DEFAULT_TABLE, Cell, Lock, TxStatus, WriteKind, check_cell, lock_col,
                     write_col)
from ..step import Step
from ..stores.steps import declare_step
from ..transaction import Mutation, SnapshotRead, committed_read
from . import Variant, state_of
from .locks import commit_at_primary, extended

ACQUIRE = declare_step("acquire-pessimistic-lock")
RELEASE = declare_step("pessimistic-rollback")
CHECK_HELD = declare_step("check-pessimistic-lock")


class Deadlock(PercolatorError):
    """``get_for_update`` would close a cycle of waits: this transaction is aborted."""


class WaitForGraph:
    """Who waits for whom, transaction -> transaction (each named by its ``txn_ts``), in
    this process; refuses an edge that closes a cycle.

    An edge lives ``expire`` seconds on ``now()`` (TiKV's ``DetectTable`` expires its
    entries too: ``test_detect_table_expire``): a waiter records its edge again at
    every backoff step and removes it when its wait ends, so only the edge of a waiter
    that vanished mid-wait (its process died) ever expires.
    """

    def __init__(self, now=None, expire: float = float("inf")):
        self.now = now if now is not None else (lambda: 0.0)
        self.expire = expire
        self.edges: dict = {}               # waiter -> (holder, deadline)
        self.mutex = threading.Lock()

    def wait(self, waiter: int, holder: int) -> bool:
        """Record ``waiter -> holder``; False (nothing recorded) if it would close a cycle."""
        with self.mutex:
            now = self.now()
            if self.reaches(holder, waiter, now):
                return False
            self.edges[waiter] = (holder, now + self.expire)
            return True

    def reaches(self, start: int, goal: int, now: float) -> bool:
        seen, node = set(), start
        while node is not None and node not in seen:
            if node == goal:
                return True
            seen.add(node)
            node = self.holder_of(node, now)
        return False

    def holder_of(self, waiter: int, now: float) -> Optional[int]:
        """Whom ``waiter`` waits for (None if nobody, or its edge expired: dropped)."""
        edge = self.edges.get(waiter)
        if edge is not None and edge[1] < now:
            del self.edges[waiter]
            edge = None
        return None if edge is None else edge[0]

    def done(self, waiter: int) -> None:
        """``waiter``'s wait ended (it holds the lock, or gave up): remove its edge."""
        with self.mutex:
            self.edges.pop(waiter, None)

    def waits(self) -> dict:
        """``{waiter: holder}`` for the edges that have not expired."""
        with self.mutex:
            now = self.now()
            return {w: h for w in list(self.edges) if (h := self.holder_of(w, now)) is not None}


def new_wait_for_graph(cluster, detector: type = WaitForGraph):
    """The wait-for graph every client of ``cluster``'s store sees: on a store that keeps
    one on its server (``store.make_wait_for_graph``, the Redis store) that one, so two
    processes' (or two ``Cluster`` objects') waits meet; else a ``detector`` beside the
    store in this process. Edges expire after the lock TTL, on the lock service's clock."""
    lockservice = cluster.lockservice
    make = getattr(cluster.bigtable, "make_wait_for_graph", None)
    if make is not None and detector is WaitForGraph:
        return make(lockservice.now, lockservice.ttl)
    return detector(lockservice.now, lockservice.ttl)


def wait_for_graph(cluster) -> WaitForGraph:
    """The wait-for graph of a cluster built with :class:`PessimisticLocks`."""
    return state_of(cluster, "pessimistic-locks")


def is_pessimistic(lock) -> bool:
    return getattr(lock, "for_update_ts", None) is not None


class PessimisticTransaction:
    """Transaction mixin: ``get_for_update``, waits, deadlock detection, lock release.

    ``txn_ts`` (TiKV's ``start_ts``) names the transaction for its whole life: every
    pessimistic lock it takes is written at ``txn_ts`` (its ``start_ts`` field), so a
    lock is *ours* when its timestamp is ``txn_ts`` (not when it names our client: two
    transactions of one worker are two owners), and the wait-for graph's nodes are
    ``txn_ts`` values. ``start_ts`` (the snapshot) moves forward at each
    ``get_for_update``. The first cell locked is the pessimistic *primary*: its lock
    stays until the commit point (or the abort), and every other pessimistic lock is
    resolved there, as any lock is resolved at its primary.
    """

    def __init__(self, cluster, client=None):
        super().__init__(cluster, client)
        self.txn_ts = self.start_ts
        self.locked: dict = {}            # cell -> for_update_ts of our pessimistic lock there
        self.plain_reads = False          # a plain get or scan fixed the snapshot

    def get_for_update(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """Lock the cell for this transaction (waiting for a live holder), then read it."""
        self.check_open()
        cell = check_cell(row, column, table)
        if self.plain_reads:
            raise ValueError("get_for_update must come before any plain get or scan of the "
                             "transaction (the snapshot is fixed by then)")
        attempt = 0
        try:
            while not self.acquire_pessimistic_lock(cell, attempt):
                attempt += 1
        finally:
            self.graph().done(self.txn_ts)      # the wait ended, however it ended
        self.start_ts = self.session.timestamp()        # the for_update_ts: the new snapshot
        if self.record is not None:
            self.record.start_ts = self.start_ts
        return super().get(row, column, table)

    def get(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """The paper's get; after it, get_for_update is refused (the snapshot is fixed)."""
        value = super().get(row, column, table)
        self.plain_reads = True
        return value

    def scan(self, table: str = DEFAULT_TABLE, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """The paper's scan; after it, get_for_update is refused (the snapshot is fixed)."""
        found = super().scan(table, start_row, end_row)
        self.plain_reads = True
        return found

    def pessimistic_primary(self, cell: Cell) -> Cell:
        """The transaction's pessimistic primary: the first cell it locked (``cell`` if none)."""
        return next(iter(self.locked), cell)

    def pessimistic_lock(self, cell: Cell) -> Lock:
        """The lock a prewrite of ``cell`` would write (every variant's fields: a ttl ...),
        as a pessimistic lock: at ``txn_ts``, no data, ``for_update_ts`` = ``start_ts``."""
        primary = self.pessimistic_primary(cell)
        writes = self.prewrite_writes(Mutation(cell, WriteKind.PUT), primary, primary == cell)
        lock = next(value for column, ts, value in writes if column == lock_col(cell.column))
        return extended(replace(lock, start_ts=self.txn_ts), for_update_ts=self.start_ts)

    def acquire_pessimistic_lock(self, cell: Cell, attempt: int) -> bool:
        """One row transaction: lock ``cell`` if free (True); else wait one step (False)."""
        with self.session.row_transaction(cell.table, cell.row, ACQUIRE) as rt:
            found = rt.read(lock_col(cell.column))
            mine = found is not None and found[0] == self.txn_ts
            if found is None:
                rt.write(lock_col(cell.column), self.txn_ts, self.pessimistic_lock(cell))
            rt.explain(f"lock {cell} for update: " + (
                "free -> pessimistic lock (no data)" if found is None else
                "already ours" if mine else
                f"held by {found[1].client} (start {found[0]}) -> wait"))
        if found is None or mine:
            self.locked.setdefault(cell, self.start_ts)
            return True
        self.wait_for(cell, found[1], attempt)
        return False

    def wait_for(self, cell: Cell, lock: Lock, attempt: int) -> None:
        """Record the wait (Deadlock if it closes a cycle), then the cluster's cleanup step:
        back off while the holder is alive, clean its lock up once it is not."""
        if not self.graph().wait(self.txn_ts, lock.start_ts):
            self.abort_pessimistic()
            raise Deadlock(f"{self.client} (start {self.txn_ts}) waiting for {lock.client} "
                           f"(start {lock.start_ts}) on {cell} closes a cycle of waits: "
                           f"{self.client} is aborted")
        self.session.cleanup.backoff_and_maybe_cleanup_lock(cell, lock, attempt)

    def own_locks(self) -> dict:
        """The cells we locked for update, ``{cell: txn_ts}``, the pessimistic primary first
        (TiKV's primary is the first key locked; its lock is held until the commit point)."""
        return {**super().own_locks(), **{cell: self.txn_ts for cell in self.locked}}

    def two_phase_commit(self) -> bool:
        """The commit (any variant's), the pessimistic primary first if it is written (TiKV's
        primary is the first key locked), so that its commit point checks that lock."""
        primary = next(iter(self.locked), None)
        if primary in self.writes:
            self.writes = {primary: self.writes[primary],
                           **{c: m for c, m in self.writes.items() if c != primary}}
        return super().two_phase_commit()

    def close(self, status) -> None:
        """Close; then, unless the client crashed (it stopped: readers clean up), release
        the pessimistic locks still held (best effort: else readers clean up)."""
        super().close(status)
        if self.status != TxStatus.CRASHED:
            try:
                self.release_all()
            except StoreUnavailable:
                pass

    def unwritten_still_held(self) -> bool:
        """Are the cells we locked but do not write still ours (one row transaction each)?"""
        return all(self.still_held(cell) for cell in self.locked if cell not in self.writes)

    def still_held(self, cell: Cell) -> bool:
        """One row transaction: is our pessimistic lock on ``cell`` still there (TiKV's
        prewrite fails with ``PessimisticLockNotFound`` otherwise)?"""
        with self.session.row_transaction(cell.table, cell.row, CHECK_HELD) as rt:
            held = rt.read(lock_col(cell.column), self.txn_ts, self.txn_ts) is not None
            rt.explain(f"check our pessimistic lock on {cell}: " + (
                "still held" if held else "gone (rolled back by a cleaner) -> abort"))
        return held

    def prewrite(self, m, primary) -> bool:
        """On a cell we locked for update: in ONE row transaction, the paper's lock (and
        data) at ``start_ts``, if our pessimistic lock is still there (erased, except on
        the pessimistic primary, which keeps it until the commit point); elsewhere the
        paper's prewrite. Before the primary's (the first), the cells locked but not
        written must still be ours (TiKV: ``PessimisticLockNotFound``)."""
        if m.cell == primary and not self.unwritten_still_held():
            return False                        # before the first prewrite: nothing to undo
        if m.cell not in self.locked:
            return super().prewrite(m, primary)
        keep = m.cell == next(iter(self.locked))
        is_primary = m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            self.hold_row(rt, m.cell)
            ok, _ = rt.check_and_write(
                [Condition(write_col(m.cell.column), min_ts=self.start_ts),
                 Condition(lock_col(m.cell.column), self.txn_ts, self.txn_ts, present=True)],
                ([] if keep else [(lock_col(m.cell.column), self.txn_ts, None)])
                + self.prewrite_writes(m, primary, is_primary))
            rt.explain(f"prewrite {m.cell}: our pessimistic lock @ {self.txn_ts} is there: "
                       f"the lock @ {self.start_ts} with the data" if ok else
                       f"prewrite {m.cell}: our pessimistic lock is gone -> abort")
        if ok and not keep:
            del self.locked[m.cell]
        return ok

    def commit_primary(self, m) -> bool:
        """The commit point; on the pessimistic primary, in the same row transaction, only
        while its pessimistic lock is still there (a cleaner that judged us dead rolled it
        back, and may have released our other cells), erasing it."""
        if m.cell not in self.locked:
            return super().commit_primary(m)
        held = commit_at_primary(self, m, self.txn_ts)
        if held:
            del self.locked[m.cell]
        return held

    def release_all(self) -> None:
        for cell in list(self.locked):
            self.release(cell)

    def release(self, cell: Cell) -> None:
        """Erase our pessimistic lock on ``cell`` (one row transaction)."""
        del self.locked[cell]
        with self.session.row_transaction(cell.table, cell.row, RELEASE) as rt:
            rt.check_and_write([Condition(lock_col(cell.column), self.txn_ts, self.txn_ts,
                                          present=True)],
                               [(lock_col(cell.column), self.txn_ts, None)])
            rt.explain(f"release the pessimistic lock on {cell}")

    def abort_pessimistic(self) -> None:
        """Release every pessimistic lock and close the transaction as aborted."""
        self.graph().done(self.txn_ts)
        self.release_all()
        self.abandon()

    def snapshot_read(self, rt, cell: Cell) -> SnapshotRead:
        """Read past a pessimistic lock, ours or another's (it holds no data: TiKV's readers
        skip ``LockType::Pessimistic``); other locks as the paper."""
        found = super().snapshot_read(rt, cell)
        if not is_pessimistic(found.lock):
            return found
        return committed_read(rt, self.start_ts, cell.column)

    def graph(self) -> WaitForGraph:
        """The store's wait-for graph (the variant's state for this cluster)."""
        return wait_for_graph(self.cluster)


class PessimisticLocks(Variant):
    """TiKV's pessimistic locks with deadlock detection: ``Cluster(variants=[PessimisticLocks()])``."""

    name = "pessimistic-locks"
    Transaction = PessimisticTransaction

    def attach(self, cluster):
        """The wait-for graph of the cluster's store (:func:`new_wait_for_graph`)."""
        return new_wait_for_graph(cluster)


class NoDetector(WaitForGraph):
    """A wait-for graph that records waits and never reports a cycle."""

    def wait(self, waiter: int, holder: int) -> bool:
        with self.mutex:
            self.edges[waiter] = (holder, self.now() + self.expire)
            return True


class PessimisticLocksWithoutDetector(PessimisticLocks):
    """BROKEN on purpose (notebook 09, the tests): pessimistic locks, no deadlock detection."""

    name = "pessimistic-locks-without-detector"

    def attach(self, cluster):
        """A graph that never reports a cycle, in this process."""
        return new_wait_for_graph(cluster, NoDetector)
