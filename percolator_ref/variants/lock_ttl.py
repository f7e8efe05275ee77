"""The lock's own TTL and a status check at the primary (TiKV's ``CheckTxnStatus``).

In the paper (§2.2) a worker's token in Chubby says the worker lives, and a
wall time written into each lock, refreshed during long commits, lets a
reader clean up a lock whose wall time is too old even while the worker's
token is valid (``../shared/PAPER_FACTS.md``, "§2.2 liveness"). The kit's own
liveness model (:mod:`percolator_ref.services.lockservice`) is simpler and is
the kit's, not the paper's: one token per client carrying its last
heartbeat, and no time in the lock. That token speaks for a worker, not for
one transaction: a worker whose token is fresh (its other threads are busy)
but whose transaction hung after prewriting blocks every reader of those
cells for as long as the worker runs. This variant closes that gap of the
kit's model the way TiKV does.

TiKV decides liveness from the lock itself. Each lock carries a ``ttl``
counted from the transaction's start time ("the primary lock is expired"
when ``lock.ts.physical() + lock.ttl < current_ts.physical()``:
``check_txn_status_lock_exists`` in TiKV's
``src/storage/txn/actions/check_txn_status.rs``). A live client keeps its
*primary* lock alive with ``TxnHeartBeat``, which "enlarges the primary
lock's TTL" (TiKV's ``src/storage/txn/commands/txn_heart_beat.rs``). A
reader that meets any lock sends ``CheckTxnStatus`` to the primary ("If the
primary lock is expired, it will rollback the primary lock":
``src/storage/txn/commands/check_txn_status.rs``); a lock that is still
alive is waited for.

Here: every lock is a :class:`~percolator_ref.variants.locks.TiKVLock` with
``ttl = cluster.lock_ttl`` and ``wall`` = the clock when the transaction
began; :meth:`TTLTransaction.heart_beat` (one row transaction at the
primary, step ``"txn-heart-beat"``) raises the primary's ttl, and the
commit calls it before a secondary's prewrite once half the TTL has passed
since the last one. A reader's cleanup runs :meth:`TTLCleanup.check_txn_status`
(one row transaction at the primary, step ``"check-txn-status"``):
committed -> roll the cell forward; locked and within its ttl -> back off
and read again; locked and expired -> roll the primary back, then the cell;
no lock and no write record -> rolled back. No cleanup decision reads a
liveness token. A lock without a ttl (written by a cluster without this
variant) is judged by the lock service, as in the kit's model.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from .. import rows
from ..model import Cell, Lock, lock_col
from . import Variant
from .locks import extend_lock, extended

CHECK_TXN_STATUS = "check-txn-status"
TXN_HEART_BEAT = "txn-heart-beat"


class TxnStatus(NamedTuple):
    """What ``CheckTxnStatus`` found at the primary: still alive, or decided (commit_ts or None)."""
    alive: bool
    commit_ts: Optional[int] = None


class TTLTransaction:
    """Transaction mixin: locks carry a ttl; the primary's is raised by heartbeats."""

    def __init__(self, cluster, client=None):
        super().__init__(cluster, client)
        self.wall = cluster.clock.now()         # the start time the locks' ttl counts from
        self.last_heart_beat = self.wall

    def prewrite_writes(self, m, primary, is_primary) -> list:
        """The paper's data and lock, the lock carrying ``ttl`` and ``wall``."""
        return extend_lock(super().prewrite_writes(m, primary, is_primary),
                           ttl=self.cluster.lock_ttl, wall=self.wall)

    def prewrite(self, m, primary) -> bool:
        """The paper's prewrite; before a secondary's, a heartbeat if half the TTL passed."""
        if m.cell != primary and self.heart_beat_due():
            self.heart_beat(primary)
        return super().prewrite(m, primary)

    def heart_beat_due(self) -> bool:
        return self.cluster.clock.now() - self.last_heart_beat >= self.cluster.lock_ttl / 2

    def heart_beat(self, primary: Optional[Cell] = None) -> bool:
        """``TxnHeartBeat``: the primary lock lives ``lock_ttl`` from now; False if it is gone."""
        primary = primary if primary is not None else next(iter(self.writes))
        now = self.cluster.clock.now()
        with self.session.row_transaction(primary.table, primary.row, TXN_HEART_BEAT) as rt:
            lock = rows.held_lock(rt, primary.column, self.start_ts)
            if lock is None:
                rt.explain(f"heartbeat {primary}: primary lock gone (rolled back)")
                return False
            ttl = max(lock.ttl or 0, now - self.wall + self.cluster.lock_ttl)
            rt.write(lock_col(primary.column), self.start_ts, extended(lock, ttl=ttl))
            rt.explain(f"heartbeat {primary}: primary lock's ttl -> {ttl:g} s "
                       f"(alive until {self.wall + ttl:g})")
        self.last_heart_beat = now
        return True


class TTLCleanup:
    """Cleanup mixin: liveness from the lock's ttl, decided at the primary."""

    def backoff_and_maybe_cleanup_lock(self, cell: Cell, lock: Lock, attempt: int) -> None:
        """``CheckTxnStatus`` at the primary: wait for a live lock, settle a decided one."""
        status = self.check_txn_status(Cell(*lock.primary), lock.start_ts, lock.client)
        if status.alive:
            self.session.backoff(attempt)
        else:
            self.settle(cell, lock, status.commit_ts)

    def cleanup_lock(self, cell: Cell, lock: Lock) -> Optional[int]:
        """Settle ``lock`` if its transaction is decided (else leave it); the commit_ts if committed."""
        status = self.check_txn_status(Cell(*lock.primary), lock.start_ts, lock.client)
        if not status.alive:
            self.settle(cell, lock, status.commit_ts)
        return status.commit_ts

    def settle(self, cell: Cell, lock: Lock, commit_ts: Optional[int]) -> None:
        """Roll a secondary forward (committed) or back; the primary is settled already."""
        if lock.is_primary:
            return
        if commit_ts is None:
            self.roll_back(cell, lock)
        else:
            self.roll_forward(cell, lock, commit_ts)

    def check_txn_status(self, primary: Cell, start_ts: int, holder=None) -> TxnStatus:
        """One row transaction at the primary: committed, alive (within its ttl), or
        rolled back now (expired, or neither locked nor committed)."""
        with self.session.row_transaction(primary.table, primary.row, CHECK_TXN_STATUS) as rt:
            commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
            if commit_ts is not None:
                rt.explain(f"check status of {holder} at {primary}: committed at {commit_ts}")
                return TxnStatus(False, commit_ts)
            lock = rows.held_lock(rt, primary.column, start_ts)
            if lock is not None and not self.expired(lock):
                rt.explain(f"check status of {holder} at {primary}: locked, ttl not expired "
                           f"(now {self.session.clock.now():g}) -> alive, wait")
                return TxnStatus(True)
            rows.apply(rt, self.rollback_writes(primary.column, start_ts))
            rt.explain(f"check status of {holder} at {primary}: " + (
                "ttl expired -> roll the primary back" if lock is not None
                else "neither locked nor committed -> rolled back"))
            return TxnStatus(False)

    def expired(self, lock: Lock) -> bool:
        """Has the lock outlived its ttl on the cluster clock? (No ttl: ask the lock service.)"""
        if getattr(lock, "ttl", None) is None:
            return not self.session.is_alive(lock.client)
        return lock.wall + lock.ttl < self.session.clock.now()


class LockTTL(Variant):
    """TiKV's lock TTL and ``CheckTxnStatus``: ``Cluster(variants=[LockTTL()])``."""

    name = "lock-ttl"
    Transaction = TTLTransaction
    Cleanup = TTLCleanup
