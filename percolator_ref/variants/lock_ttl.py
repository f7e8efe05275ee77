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

Here: every lock (a pessimistic lock too) is a
:class:`~percolator_ref.variants.locks.TiKVLock` with ``wall`` = the lock
service's clock when the transaction began and a ``ttl`` that keeps it alive
``cluster.lock_ttl`` from when it is written (a lock is never born expired);
:meth:`TTLTransaction.heart_beat` (one row transaction at the
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

from contextlib import contextmanager
from typing import NamedTuple, Optional

from .. import rows
from ..errors import PercolatorError
from ..model import DEFAULT_TABLE, Cell, Lock, WriteKind, lock_col, write_col
from ..stores.steps import declare_step
from ..transaction import SnapshotRead, committed_read
from . import Variant
from .locks import commit_at_primary, extend_lock, extended

CHECK_TXN_STATUS = declare_step("check-txn-status", decides=True)
TXN_HEART_BEAT = declare_step("txn-heart-beat")


COMMITTED, ROLLED_BACK, LOCK_NOT_EXIST, TTL_EXPIRED, UNCOMMITTED = (
    "committed", "rolled back", "lock not exist", "ttl expired", "uncommitted")
"""``CheckTxnStatus``'s answers, kept apart as TiKV's ``TxnStatus`` keeps them
(``src/storage/txn/actions/check_txn_status.rs``): committed at its commit_ts; rolled back
before (a rollback record); no lock and no record (rolled back now); the ttl expired
(rolled back now); uncommitted, with the lock."""


class PrimaryMismatch(PercolatorError):
    """``CheckTxnStatus`` was sent to a cell whose lock of the transaction is not its primary
    (TiKV's ``PrimaryMismatch``): nothing is decided there."""


class TxnStatus(NamedTuple):
    """What ``CheckTxnStatus`` found at the primary: ``alive`` (uncommitted, within its ttl)
    or decided (``commit_ts``, None if rolled back); ``action`` (one of the answers above);
    ``lock``: the primary lock of an uncommitted transaction; ``min_commit_ts_pushed``: its
    ``min_commit_ts`` is above the caller's start_ts, so the caller may read past every lock
    of the transaction (it will commit after the caller's snapshot)."""
    alive: bool
    commit_ts: Optional[int] = None
    action: str = ""
    lock: Optional[Lock] = None
    min_commit_ts_pushed: bool = False


class TTLTransaction:
    """Transaction mixin: locks carry a ttl; the primary's is raised by heartbeats.

    Times are on the lock service's clock (``lockservice.now()``: on Redis with the
    wall clock, the server's, which every client shares, as liveness tokens are
    judged), so one client's clock running behind cannot stretch another's ttl.
    """

    def __init__(self, cluster, client=None):
        super().__init__(cluster, client)
        self.wall = self.session.lockservice.now()  # the start time the locks' ttl counts from
        self.last_heart_beat = cluster.clock.now()  # when a heartbeat is due (this client's clock)

    def prewrite_writes(self, m, primary, is_primary) -> list:
        """The paper's data and lock, the lock carrying ``wall`` and a ``ttl`` that keeps it
        alive ``lock_ttl`` from now (counted from the start, a transaction that read for
        longer than the ttl would write its locks already expired); with
        ``push_min_commit_ts``, ``min_commit_ts`` too, unless the transaction sets a
        notification (written before the commit point at commit_ts, it would be left
        behind a commit_ts a reader pushed: an observer could acknowledge it too early)."""
        ttl = self.session.lockservice.now() - self.wall + self.cluster.lock_ttl
        if is_primary:
            self.last_heart_beat = self.cluster.clock.now()
        large = any(getattr(v, "push_min_commit_ts", False) for v in self.cluster.variants) \
            and not self.notifies and not any(self.session.is_observed(c.table, c.column)
                                              for c in self.writes)
        return extend_lock(super().prewrite_writes(m, primary, is_primary), ttl=ttl,
                           wall=self.wall, **({"min_commit_ts": self.start_ts + 1} if large else {}))

    def get(self, row: str, column: str, table: str = DEFAULT_TABLE):
        """The paper's get, as a reader: a lock it meets has its transaction's
        ``min_commit_ts`` pushed past our start_ts, and is then read past (no wait)."""
        with reading(self):
            return super().get(row, column, table)

    def scan(self, table: str = DEFAULT_TABLE, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """The paper's scan, as a reader (see :meth:`get`)."""
        with reading(self):
            return super().scan(table, start_row, end_row)

    def snapshot_read(self, rt, cell: Cell) -> SnapshotRead:
        """Read past the lock of a transaction whose ``min_commit_ts`` we pushed above our
        start_ts (it commits after our snapshot); other locks as the paper."""
        found = super().snapshot_read(rt, cell)
        pushed = self.session.cleanup.pushed.get(getattr(found.lock, "start_ts", None))
        if pushed is None or pushed <= self.start_ts:
            return found
        return committed_read(rt, self.start_ts, cell.column)

    def commit_primary(self, m) -> bool:
        """The commit point at a commit_ts no lower than the primary lock's ``min_commit_ts``
        (a reader may have pushed it; :func:`~percolator_ref.variants.locks.commit_at_primary`)."""
        return commit_at_primary(self, m, self.own_locks().get(m.cell))

    def prewrite(self, m, primary) -> bool:
        """The paper's prewrite; before a secondary's, a heartbeat if half the TTL passed."""
        if m.cell != primary and self.heart_beat_due():
            self.heart_beat(primary)
        return super().prewrite(m, primary)

    def heart_beat_due(self) -> bool:
        return self.cluster.clock.now() - self.last_heart_beat >= self.cluster.lock_ttl / 2

    def heart_beat(self, primary: Optional[Cell] = None) -> bool:
        """``TxnHeartBeat``: our locks at the primary (the first cell locked, else the first
        written) live ``lock_ttl`` from now; False if they are gone (rolled back).
        ValueError before the transaction has a primary."""
        own = self.own_locks()        # locks taken before the prewrite (pessimistic ones)
        primary = primary if primary is not None else next(iter(own), None) or \
            next(iter(self.writes), None)
        if primary is None:
            raise ValueError(f"heart_beat: transaction {self.client} has written nothing and "
                             f"holds no lock: it has no primary yet")
        now = self.session.lockservice.now()
        with self.session.row_transaction(primary.table, primary.row, TXN_HEART_BEAT) as rt:
            held = [(ts, lock) for ts in {self.start_ts, own.get(primary, self.start_ts)}
                    if (lock := rows.held_lock(rt, primary.column, ts)) is not None]
            if not held:
                rt.explain(f"heartbeat {primary}: primary lock gone (rolled back)")
                return False
            for ts, lock in held:
                ttl = max(lock.ttl or 0, now - self.wall + self.cluster.lock_ttl)
                rt.write(lock_col(primary.column), ts, extended(lock, ttl=ttl))
            rt.explain(f"heartbeat {primary}: primary lock's ttl -> {ttl:g} s "
                       f"(alive until {self.wall + ttl:g})")
        self.last_heart_beat = self.cluster.clock.now()
        return True


class TTLCleanup:
    """Cleanup mixin: liveness from the lock's ttl, decided at the primary.

    ``reader_ts``: the start_ts of the transaction reading now (set by its ``get`` and
    ``scan``), which ``CheckTxnStatus`` pushes the lock's ``min_commit_ts`` past;
    ``pushed``: ``{lock start_ts: min_commit_ts}`` of the transactions it pushed.
    """

    reader_ts: Optional[int] = None

    def __init__(self, session):
        super().__init__(session)
        self.pushed: dict = {}

    def backoff_and_maybe_cleanup_lock(self, cell: Cell, lock: Lock, attempt: int) -> None:
        """``CheckTxnStatus`` at the primary: read past a lock whose transaction now commits
        after the reader, wait for another live one, settle a decided one."""
        status = self.check_txn_status(Cell(*lock.primary), lock.start_ts, lock.client,
                                       caller_start_ts=self.reader_ts)
        if status.min_commit_ts_pushed:
            self.pushed[lock.start_ts] = status.lock.min_commit_ts
        elif status.alive:
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

    def check_txn_status(self, primary: Cell, start_ts: int, holder=None,
                         caller_start_ts: Optional[int] = None) -> TxnStatus:
        """One row transaction at the primary: committed; rolled back (before, or now: no
        lock, or its ttl expired); or uncommitted, its ``min_commit_ts`` pushed past
        ``caller_start_ts`` if one is given. :class:`PrimaryMismatch` if the transaction's
        lock there is not its primary."""
        with self.session.row_transaction(primary.table, primary.row, CHECK_TXN_STATUS) as rt:
            lock = rows.held_lock(rt, primary.column, start_ts)
            if lock is not None and not lock.is_primary:
                raise PrimaryMismatch(f"check_txn_status at {primary}: the lock of start "
                                      f"{start_ts} there is not its primary (that is "
                                      f"{Cell(*lock.primary)})")
            commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
            said = f"check status of {holder} at {primary}: "
            if commit_ts is not None:
                rt.explain(said + f"committed at {commit_ts}")
                return TxnStatus(False, commit_ts, COMMITTED)
            if lock is None and rolled_back(rt, primary.column, start_ts):
                rt.explain(said + "a rollback record -> rolled back before")
                return TxnStatus(False, None, ROLLED_BACK)
            if lock is None or self.expired(lock):
                rows.apply(rt, self.rollback_writes(primary.column, start_ts))
                rt.explain(said + ("ttl expired -> roll the primary back" if lock is not None
                                   else "neither locked nor committed -> rolled back"))
                return TxnStatus(False, None, TTL_EXPIRED if lock is not None else LOCK_NOT_EXIST)
            floor = getattr(lock, "min_commit_ts", None)    # None: not a large transaction
            if None not in (caller_start_ts, floor) and floor <= caller_start_ts:
                lock = extended(lock, min_commit_ts=caller_start_ts + 1)
                rt.write(lock_col(primary.column), start_ts, lock)
            pushed = None not in (caller_start_ts, floor) and lock.min_commit_ts > caller_start_ts
            rt.explain(said + f"locked, ttl not expired (now {self.session.lockservice.now():g})"
                       + (f": min_commit_ts -> {lock.min_commit_ts}, the reader (start "
                          f"{caller_start_ts}) reads past it" if pushed else " -> alive, wait"))
            return TxnStatus(True, None, UNCOMMITTED, lock, pushed)

    def expired(self, lock: Lock) -> bool:
        """Has the lock outlived its ttl on the cluster clock? (No ttl: ask the lock service.)"""
        if getattr(lock, "ttl", None) is None:
            return not self.session.is_alive(lock.client)
        return lock.wall + lock.ttl < self.session.lockservice.now()


def rolled_back(rt, column: str, start_ts: int) -> bool:
    """Is there a rollback record of ``start_ts`` (written by a variant that keeps them)?"""
    found = rt.read(write_col(column), start_ts, start_ts)
    return found is not None and found[1].kind is WriteKind.ROLLBACK


@contextmanager
def reading(txn):
    """While ``txn`` reads, its cleanup pushes the locks it meets past its start_ts."""
    txn.session.cleanup.reader_ts = txn.start_ts
    try:
        yield
    finally:
        txn.session.cleanup.reader_ts = None


class LockTTL(Variant):
    """TiKV's lock TTL and ``CheckTxnStatus``: ``Cluster(variants=[LockTTL()])``.

    ``push_min_commit_ts=True``: every transaction is a "large" one in TiKV's sense (its
    locks carry ``min_commit_ts``), so a reader that meets a live lock pushes the
    transaction's ``min_commit_ts`` past its own start_ts and reads past the lock instead of
    waiting; the commit then takes a newer commit_ts ("If lock.min_commit_ts is 0, it's not
    a large transaction and we can't push forward its min_commit_ts": TiKV's
    ``check_txn_status_lock_exists``). Default False: readers wait, as in the paper.
    """

    name = "lock-ttl"

    def __init__(self, push_min_commit_ts: bool = False):
        if not isinstance(push_min_commit_ts, bool):
            raise TypeError(f"push_min_commit_ts must be True or False, got {push_min_commit_ts!r}")
        self.push_min_commit_ts = push_min_commit_ts

    def __repr__(self):
        return f"LockTTL(push_min_commit_ts={self.push_min_commit_ts})" \
            if self.push_min_commit_ts else "LockTTL()"
    Transaction = TTLTransaction
    Cleanup = TTLCleanup
