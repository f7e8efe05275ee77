"""Lazy lock cleanup (paper §2.2): ``BackoffAndMaybeCleanupLock``.

A transaction that meets another's lock asks the lock service whether the
holder lives. A live holder is waited for with exponential backoff. A dead
holder's lock is resolved through the *primary* lock, the single place where
commit and cleanup synchronise:

1. one row transaction at the primary: if the primary has a write record for
   the lock's ``start_ts`` the transaction committed (return its commit_ts);
   if the primary lock is still there, erase it (roll back: the commit point
   can no longer be reached); otherwise it was already rolled back;
2. one row transaction at the locked cell: roll forward (write record at the
   primary's commit_ts, erase the lock) or roll back (erase lock and data).

The steps are the methods of :class:`Cleanup`, one object per client session
(``session.cleanup``); a protocol variant overrides any of them for its cluster
(see :mod:`percolator_ref.variants`). The module functions at the bottom are
the entry points the transaction, the observers and exercise 4 call: each takes
the cleaning client's :class:`~percolator_ref.session.Session` and runs that
session's step.
"""
from __future__ import annotations

from typing import Optional

from . import rows
from .model import Cell, Lock, Write
from .step import Step

BACKOFF_FIRST = 0.001     # seconds
BACKOFF_CAP = 0.5


def backoff_delay(attempt: int, ttl: float) -> float:
    """Exponential backoff: 1 ms, 2 ms, 4 ms ... capped at min(0.5 s, ttl / 4)."""
    return min(BACKOFF_FIRST * (2 ** min(attempt, 30)), BACKOFF_CAP, ttl / 4)


class Cleanup:
    """Lazy cleanup as the paper describes it, run by one client (``self.session``)."""

    def __init__(self, session):
        self.session = session

    def backoff_and_maybe_cleanup_lock(self, cell: Cell, lock: Lock, attempt: int) -> None:
        """Wait for a live holder (one backoff step), or clean up a dead one's lock."""
        if self.session.is_alive(lock.client):
            self.session.backoff(attempt)
            return
        self.cleanup_lock(cell, lock)

    def cleanup_lock(self, cell: Cell, lock: Lock) -> Optional[int]:
        """Resolve a dead client's lock on ``cell``; return the commit_ts if rolled forward."""
        commit_ts = self.resolve_primary(Cell(*lock.primary), lock.start_ts, lock.client)
        if lock.is_primary:
            return commit_ts          # the primary row transaction already settled this cell
        if commit_ts is None:
            self.roll_back(cell, lock)
        else:
            self.roll_forward(cell, lock, commit_ts)
        return commit_ts

    def resolve_primary(self, primary: Cell, start_ts: int, holder=None) -> Optional[int]:
        """At the primary: committed -> its commit_ts; still locked -> roll it back; gone -> None."""
        with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
            commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
            if commit_ts is not None:
                # race: the holder reached its commit point before dying
                rt.explain(f"cleanup for {holder}: primary {primary} has a write record "
                           f"at {commit_ts} -> the transaction committed: roll forward")
                return commit_ts
            if rows.held_lock(rt, primary.column, start_ts) is not None:
                # the holder died before its commit point: erasing the primary lock decides abort
                rows.apply(rt, self.rollback_writes(primary.column, start_ts))
                rt.explain(f"cleanup for {holder}: primary {primary} still locked, no write "
                           f"record -> erase the primary lock and data @ {start_ts}: roll back")
            else:
                # race: another cleaner rolled the primary back first
                rt.explain(f"cleanup for {holder}: primary {primary} neither locked nor "
                           f"committed -> already rolled back")
            return None

    def roll_forward(self, cell: Cell, lock: Lock, commit_ts: int) -> None:
        """Write the secondary's record at the primary's commit_ts and erase its lock."""
        with self.session.row_transaction(cell.table, cell.row, Step.ROLL_FORWARD) as rt:
            if rows.held_lock(rt, cell.column, lock.start_ts) is None:
                rt.explain(f"roll forward {cell}: lock already gone (someone else finished it)")
                return
            notify = self.session.is_observed(cell.table, cell.column)
            rows.apply(rt, rows.commit_writes(cell.column, Write(lock.start_ts, lock.kind),
                                              commit_ts, notify))
            rt.explain(f"roll forward {cell}: write record {lock.kind.value} @ {lock.start_ts} "
                       f"at commit ts {commit_ts}, erase the lock")

    def roll_back(self, cell: Cell, lock: Lock) -> None:
        """Erase the secondary's lock and data (its primary did not commit)."""
        with self.session.row_transaction(cell.table, cell.row, Step.ROLL_BACK) as rt:
            if rows.held_lock(rt, cell.column, lock.start_ts) is None:
                rt.explain(f"roll back {cell}: lock already gone")
                return
            rows.apply(rt, self.rollback_writes(cell.column, lock.start_ts))
            rt.explain(f"roll back {cell}: primary did not commit -> erase lock and data "
                       f"@ {lock.start_ts}")

    def rollback_writes(self, column: str, start_ts: int) -> list:
        """What rolling a cell back writes (a cleaner's and an aborting client's): erase the
        lock and the data at ``start_ts``."""
        return rows.rollback_writes(column, start_ts)


# -- entry points: the calling client's session runs its cluster's cleanup step --------
def backoff_and_maybe_cleanup_lock(session, cell: Cell, lock: Lock, attempt: int) -> None:
    """Wait for a live holder (one backoff step), or clean up a dead one's lock."""
    session.cleanup.backoff_and_maybe_cleanup_lock(cell, lock, attempt)


def cleanup_lock(session, cell: Cell, lock: Lock) -> Optional[int]:
    """Resolve a dead client's lock on ``cell``; return the commit_ts if rolled forward."""
    return session.cleanup.cleanup_lock(cell, lock)


def resolve_primary(session, primary: Cell, start_ts: int, holder=None) -> Optional[int]:
    """At the primary: committed -> its commit_ts; still locked -> roll it back; gone -> None."""
    return session.cleanup.resolve_primary(primary, start_ts, holder)
