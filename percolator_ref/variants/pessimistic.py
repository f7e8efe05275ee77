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

- ``txn.get_for_update(row, column)`` takes a pessimistic lock (a
  :class:`~percolator_ref.variants.locks.TiKVLock` with ``for_update_ts``, no
  data) in one row transaction, step ``"acquire-pessimistic-lock"``, waiting
  (backoff) while another live transaction holds the cell; then it takes a
  fresh timestamp and moves the transaction's snapshot there (its
  ``start_ts``; the kit keeps every transaction a snapshot, so the checker
  still applies), and reads the cell. Cells it locked earlier cannot have
  changed (they are locked), so all ``get_for_update`` calls must come before
  any plain ``get`` (else ValueError);
- deadlocks are *detected* (not avoided): each waiter adds an edge to a
  wait-for graph kept per store; the waiter whose edge would close a cycle gets
  :class:`Deadlock`, and its transaction is aborted (its locks released);
- a prewrite replaces the transaction's own pessimistic lock by the paper's
  lock; the commit releases pessimistic locks on cells it did not write, an
  abort releases them all;
- a reader ignores a live transaction's pessimistic lock (it holds no data, as
  TiKV's readers skip ``LockType::Pessimistic``) and erases a dead one's.
"""
from __future__ import annotations

import threading
from typing import Optional

from ..bigtable import Condition
from ..errors import PercolatorError
from ..model import DEFAULT_TABLE, Cell, Lock, check_cell, lock_col, write_col
from ..step import Step, declare_step
from ..transaction import SnapshotRead, committed_read
from . import PerStore, Variant
from .locks import TiKVLock

ACQUIRE = declare_step("acquire-pessimistic-lock")
RELEASE = declare_step("pessimistic-rollback")


class Deadlock(PercolatorError):
    """``get_for_update`` would close a cycle of waits: this transaction is aborted."""


class WaitForGraph:
    """Who waits for whom (client -> client), per store; refuses an edge that closes a cycle."""

    def __init__(self):
        self.edges: dict = {}
        self.mutex = threading.Lock()

    def wait(self, waiter: str, holder: str) -> bool:
        """Record ``waiter -> holder``; False (nothing recorded) if it would close a cycle."""
        with self.mutex:
            if self.reaches(holder, waiter):
                return False
            self.edges[waiter] = holder
            return True

    def reaches(self, start: str, goal: str) -> bool:
        seen, node = set(), start
        while node is not None and node not in seen:
            if node == goal:
                return True
            seen.add(node)
            node = self.edges.get(node)
        return False

    def done(self, waiter: str) -> None:
        with self.mutex:
            self.edges.pop(waiter, None)


wait_for_graph = PerStore(WaitForGraph)
"""``wait_for_graph(store)``: the waits for locks on ``store``."""


def is_pessimistic(lock) -> bool:
    return getattr(lock, "for_update_ts", None) is not None


class PessimisticTransaction:
    """Transaction mixin: ``get_for_update``, waits, deadlock detection, lock release."""

    def __init__(self, cluster, client=None):
        super().__init__(cluster, client)
        self.locked: dict = {}            # cell -> the ts of our pessimistic lock there
        self.plain_reads = False          # a plain get fixed the snapshot

    def get_for_update(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """Lock the cell for this transaction (waiting for a live holder), then read it."""
        self.check_open()
        cell = check_cell(row, column, table)
        if self.plain_reads:
            raise ValueError("get_for_update must come before any plain get of the transaction")
        attempt = 0
        while not self.acquire_pessimistic_lock(cell, attempt):
            attempt += 1
        self.graph().done(self.client)
        self.start_ts = self.session.timestamp()        # the for_update_ts: the new snapshot
        if self.record is not None:
            self.record.start_ts = self.start_ts
        return super().get(row, column, table)

    def get(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """The paper's get; after it, get_for_update is refused (the snapshot is fixed)."""
        value = super().get(row, column, table)
        self.plain_reads = True
        return value

    def acquire_pessimistic_lock(self, cell: Cell, attempt: int) -> bool:
        """One row transaction: lock ``cell`` if free (True); else wait one step (False)."""
        lock_ts = self.locked.get(cell, self.start_ts)
        primary = next(iter(self.locked), cell)
        lock = TiKVLock(lock_ts, primary, primary == cell, self.client, for_update_ts=lock_ts)
        with self.session.row_transaction(cell.table, cell.row, ACQUIRE) as rt:
            found = rt.read(lock_col(cell.column))
            mine = found is not None and found[1].client == self.client
            if found is None:
                rt.write(lock_col(cell.column), lock_ts, lock)
            rt.explain(f"lock {cell} for update: " + (
                "free -> pessimistic lock (no data)" if found is None else
                "already ours" if mine else f"held by {found[1].client} -> wait"))
        if found is None or mine:
            self.locked[cell] = found[0] if mine else lock_ts
            return True
        self.wait_for(cell, found[1], attempt)
        return False

    def wait_for(self, cell: Cell, lock: Lock, attempt: int) -> None:
        """A live holder: record the wait (Deadlock if it closes a cycle) and back off; a dead
        one: clean its lock up."""
        if not self.session.is_alive(lock.client):
            self.session.cleanup.cleanup_lock(cell, lock)
            return
        if not self.graph().wait(self.client, lock.client):
            self.abort_pessimistic()
            raise Deadlock(f"{self.client} waiting for {lock.client} on {cell} closes a "
                           f"cycle of waits: {self.client} is aborted")
        self.session.backoff(attempt)

    def prewrite(self, m, primary) -> bool:
        """On a cell we locked for update: in ONE row transaction, our pessimistic lock
        becomes the paper's lock (and data); elsewhere the paper's prewrite."""
        lock_ts = self.locked.pop(m.cell, None)
        if lock_ts is None:
            return super().prewrite(m, primary)
        is_primary = m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            self.hold_row(rt, m.cell)
            ok, _ = rt.check_and_write(
                [Condition(write_col(m.cell.column), min_ts=self.start_ts),
                 Condition(lock_col(m.cell.column), lock_ts, lock_ts, present=True)],
                [(lock_col(m.cell.column), lock_ts, None)]
                + self.prewrite_writes(m, primary, is_primary))
            rt.explain(f"prewrite {m.cell}: our pessimistic lock @ {lock_ts} becomes the lock "
                       f"@ {self.start_ts} with the data" if ok else
                       f"prewrite {m.cell}: our pessimistic lock is gone -> abort")
        return ok

    def two_phase_commit(self) -> bool:
        """The commit (any variant's), then release the pessimistic locks still held."""
        try:
            return super().two_phase_commit()
        finally:
            for cell in list(self.locked):
                self.release(cell)

    def release(self, cell: Cell) -> None:
        """Erase our pessimistic lock on ``cell`` (one row transaction)."""
        lock_ts = self.locked.pop(cell)
        with self.session.row_transaction(cell.table, cell.row, RELEASE) as rt:
            rt.check_and_write([Condition(lock_col(cell.column), lock_ts, lock_ts, present=True)],
                               [(lock_col(cell.column), lock_ts, None)])
            rt.explain(f"release the pessimistic lock on {cell}")

    def abort_pessimistic(self) -> None:
        """Release every pessimistic lock and close the transaction as aborted."""
        self.graph().done(self.client)
        for cell in list(self.locked):
            self.release(cell)
        self.abandon()

    def snapshot_read(self, rt, cell: Cell) -> SnapshotRead:
        """Skip a live transaction's pessimistic lock (it holds no data); report a dead
        one's (the reader's cleanup erases it)."""
        found = super().snapshot_read(rt, cell)
        if not is_pessimistic(found.lock) or not self.session.is_alive(found.lock.client):
            return found
        return committed_read(rt, self.start_ts, cell.column)

    def graph(self) -> "WaitForGraph":
        """The store's wait-for graph."""
        return wait_for_graph(self.session.bigtable)


class PessimisticCleanup:
    """Cleanup mixin: a dead transaction's pessimistic lock is simply erased."""

    def cleanup_lock(self, cell: Cell, lock: Lock) -> Optional[int]:
        if not is_pessimistic(lock):
            return super().cleanup_lock(cell, lock)
        with self.session.row_transaction(cell.table, cell.row, RELEASE) as rt:
            rt.check_and_write([Condition(lock_col(cell.column), lock.start_ts, lock.start_ts,
                                          present=True)],
                               [(lock_col(cell.column), lock.start_ts, None)])
            rt.explain(f"erase {lock.client}'s pessimistic lock on {cell} (its client is dead)")
        return None


class PessimisticLocks(Variant):
    """TiKV's pessimistic locks with deadlock detection: ``Cluster(variants=[PessimisticLocks()])``."""

    name = "pessimistic-locks"
    Transaction = PessimisticTransaction
    Cleanup = PessimisticCleanup


class NoDetector(WaitForGraph):
    """A wait-for graph that records waits and never reports a cycle."""

    def wait(self, waiter: str, holder: str) -> bool:
        with self.mutex:
            self.edges[waiter] = holder
            return True


unchecked_graph = PerStore(lambda: NoDetector())


class PessimisticWithoutDetectorTransaction:
    """For the deadlock demonstration only: waits are never checked for cycles."""

    def graph(self) -> WaitForGraph:
        return unchecked_graph(self.session.bigtable)


class PessimisticLocksWithoutDetector(PessimisticLocks):
    """BROKEN on purpose (notebook 09, the tests): pessimistic locks, no deadlock detection."""

    name = "pessimistic-locks-without-detector"
    Transaction = type("PessimisticTransaction",
                       (PessimisticWithoutDetectorTransaction, PessimisticTransaction), {})
