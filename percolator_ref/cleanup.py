"""Lazy lock cleanup (paper section 2.2): ``BackoffAndMaybeCleanupLock``.

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

The row-level mutations shared with commit live here too:
:func:`write_commit_record` and :func:`erase_lock_and_data`.
"""
from __future__ import annotations

from typing import Optional

from .model import Cell, Lock, Write, data_col, lock_col, notify_col, write_col

BACKOFF_FIRST = 0.001     # seconds
BACKOFF_CAP = 0.5


def backoff_delay(attempt: int, ttl: float) -> float:
    """Exponential backoff: 1 ms, 2 ms, 4 ms ... capped at min(0.5 s, ttl / 4)."""
    return min(BACKOFF_FIRST * (2 ** min(attempt, 30)), BACKOFF_CAP, ttl / 4)


# -- row-level mutations (run inside a row transaction) -----------------------

def write_commit_record(rt, cell: Cell, write: Write, commit_ts: int, notify: bool) -> None:
    """Make a cell's write visible: write record at commit_ts, lock erased.

    ``notify`` also sets ``c:notify`` (the cell is observed), in the same row
    transaction as the write record, so no observed commit goes unnoticed.
    """
    rt.write(write_col(cell.column), commit_ts, write)
    rt.erase(lock_col(cell.column), write.start_ts)
    if notify:
        rt.write(notify_col(cell.column), commit_ts, True)


def erase_lock_and_data(rt, column: str, start_ts: int) -> None:
    """Roll a cell back: erase the lock and the data written at start_ts."""
    rt.erase(lock_col(column), start_ts)
    rt.erase(data_col(column), start_ts)


def find_commit_ts(rt, column: str, start_ts: int) -> Optional[int]:
    """The commit_ts of the write record pointing at ``start_ts``, or None."""
    for commit_ts, write in rt.versions(write_col(column)):
        if commit_ts < start_ts:
            return None
        if write.start_ts == start_ts:
            return commit_ts
    return None


def held_lock(rt, column: str, start_ts: int) -> Optional[Lock]:
    """The lock at exactly ``start_ts`` if it is still there."""
    found = rt.read(lock_col(column), start_ts, start_ts)
    return None if found is None else found[1]


# -- BackoffAndMaybeCleanupLock ---------------------------------------------

def backoff_and_maybe_cleanup_lock(txn, cell: Cell, lock: Lock, attempt: int) -> None:
    """Wait for a live holder (one backoff step), or clean up a dead one's lock."""
    cluster = txn.cluster
    if cluster.lockservice.is_alive(lock.client):
        cluster.clock.sleep(backoff_delay(attempt, cluster.lockservice.ttl))
        return
    cleanup_lock(txn, cell, lock)


def cleanup_lock(txn, cell: Cell, lock: Lock) -> Optional[int]:
    """Resolve a dead client's lock on ``cell``; return the commit_ts if rolled forward."""
    commit_ts = resolve_primary(txn, lock)
    if lock.is_primary:
        return commit_ts          # the primary row transaction already settled this cell
    if commit_ts is None:
        roll_back(txn, cell, lock)
    else:
        roll_forward(txn, cell, lock, commit_ts)
    return commit_ts


def resolve_primary(txn, lock: Lock) -> Optional[int]:
    """At the primary: committed -> its commit_ts; still locked -> roll it back; gone -> None."""
    primary = Cell(*lock.primary)
    with txn._row_txn(primary.table, primary.row, "cleanup-primary") as rt:
        commit_ts = find_commit_ts(rt, primary.column, lock.start_ts)
        if commit_ts is not None:
            # race: the holder reached its commit point before dying
            rt.explain(f"cleanup for {lock.client}: primary {primary} has a write record "
                       f"at {commit_ts} -> the transaction committed: roll forward")
            return commit_ts
        if held_lock(rt, primary.column, lock.start_ts) is not None:
            # the holder died before its commit point: erasing the primary lock decides abort
            erase_lock_and_data(rt, primary.column, lock.start_ts)
            rt.explain(f"cleanup for {lock.client}: primary {primary} still locked, no write "
                       f"record -> erase the primary lock and data @ {lock.start_ts}: roll back")
        else:
            # race: another cleaner rolled the primary back first
            rt.explain(f"cleanup for {lock.client}: primary {primary} neither locked nor "
                       f"committed -> already rolled back")
        return None


def roll_forward(txn, cell: Cell, lock: Lock, commit_ts: int) -> None:
    """Write the secondary's record at the primary's commit_ts and erase its lock."""
    with txn._row_txn(cell.table, cell.row, "roll-forward") as rt:
        if held_lock(rt, cell.column, lock.start_ts) is None:
            rt.explain(f"roll forward {cell}: lock already gone (someone else finished it)")
            return
        notify = txn.cluster.is_observed(cell.table, cell.column)
        write_commit_record(rt, cell, Write(lock.start_ts, lock.kind), commit_ts, notify)
        rt.explain(f"roll forward {cell}: write record {lock.kind.value} @ {lock.start_ts} "
                   f"at commit ts {commit_ts}, erase the lock")


def roll_back(txn, cell: Cell, lock: Lock) -> None:
    """Erase the secondary's lock and data (its primary did not commit)."""
    with txn._row_txn(cell.table, cell.row, "roll-back") as rt:
        if held_lock(rt, cell.column, lock.start_ts) is None:
            rt.explain(f"roll back {cell}: lock already gone")
            return
        erase_lock_and_data(rt, cell.column, lock.start_ts)
        rt.explain(f"roll back {cell}: primary did not commit -> erase lock and data "
                   f"@ {lock.start_ts}")
