"""Row-level reads and mutations that commit and cleanup share (one place each).

All of them run inside a row transaction ``rt`` of one cell's row; they know
the physical columns of the paper's Figure 5 and nothing else.
"""
from __future__ import annotations

from typing import Optional

from .bigtable import Condition
from .model import Lock, Write, WriteKind, data_col, lock_col, notify_col, write_col


def commit_writes(column: str, write: Write, commit_ts: int, notify: bool) -> list:
    """Make a cell's write visible: write record at commit_ts, lock erased (and
    ``c:notify`` set at commit_ts when the column is observed)."""
    writes = [(write_col(column), commit_ts, write), (lock_col(column), write.start_ts, None)]
    if notify:
        writes.append((notify_col(column), commit_ts, True))
    return writes


def rollback_writes(column: str, start_ts: int) -> list:
    """Roll a cell back: erase the lock and the data written at start_ts."""
    return [(lock_col(column), start_ts, None), (data_col(column), start_ts, None)]


def lock_is_held(column: str, start_ts: int) -> Condition:
    """The condition "the lock of the transaction that started at ``start_ts`` is still there"."""
    return Condition(lock_col(column), start_ts, start_ts, present=True)


def apply(rt, writes: list) -> None:
    """Buffer ``writes`` (``(column, ts, value)``, value None = erase) in ``rt``."""
    rt.check_and_write((), writes)


def held_lock(rt, column: str, start_ts: int) -> Optional[Lock]:
    """The lock at exactly ``start_ts`` if it is still there."""
    found = rt.read(lock_col(column), start_ts, start_ts)
    return None if found is None else found[1]


def find_commit_ts(rt, column: str, start_ts: int) -> Optional[int]:
    """The commit_ts of the write record pointing at ``start_ts``, or None.

    A rollback record (:attr:`WriteKind.ROLLBACK`) is not a commit."""
    for commit_ts, write in rt.versions(write_col(column)):
        if commit_ts < start_ts:
            return None
        if write.start_ts == start_ts:
            return None if write.kind is WriteKind.ROLLBACK else commit_ts
    return None


def latest_write(rt, column: str, max_ts: int) -> Optional[tuple]:
    """``(commit_ts, Write)``: the newest write record at or below ``max_ts``, or None.

    Rollback records (:attr:`WriteKind.ROLLBACK`) are skipped: never read as data."""
    latest = rt.read(write_col(column), max_ts)
    while latest is not None and latest[1].kind is WriteKind.ROLLBACK:
        latest = rt.read(write_col(column), latest[0] - 1)
    return latest
