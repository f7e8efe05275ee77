"""The lock TiKV's variants write: the paper's :class:`~percolator_ref.model.Lock` plus
the fields TiKV's lock carries (``txn_types::Lock`` in TiKV's
``components/txn_types/src/lock.rs``: ``ttl``, ``min_commit_ts``, ``secondaries``,
``for_update_ts``).

:class:`TiKVLock` is a subclass, so every reader of a ``Lock`` (the paper's
cleanup, the checker, the stepper's tables) reads it unchanged; each variant
sets only the fields it needs. ``wall`` is the cluster clock when the
transaction began: it stands for the physical part of TiKV's ``start_ts``,
from which TiKV counts a lock's ``ttl`` (``lock.ts.physical() + lock.ttl``
in ``src/storage/txn/actions/check_txn_status.rs``); the kit's timestamps
are plain counters with no physical part. The paper also writes "the wall
time into the lock" (§2.2).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Optional

from ..model import Cell, Lock, WriteKind

EXTRA_FIELDS = ("ttl", "wall", "min_commit_ts", "secondaries", "for_update_ts")


@dataclass(frozen=True)
class TiKVLock(Lock):
    """A lock with TiKV's extra fields (None / empty when a variant does not use one).

    ``ttl``: seconds the lock lives after ``wall`` (heartbeats raise it);
    ``min_commit_ts``: the smallest commit_ts the transaction may take (async
    commit); ``secondaries``: on an async-commit primary, every other cell the
    transaction writes; ``for_update_ts``: a pessimistic lock taken at read
    time (no data, ``kind`` is the write it will become once prewritten).
    """
    ttl: Optional[float] = None
    wall: Optional[float] = None
    min_commit_ts: Optional[int] = None
    secondaries: tuple = ()
    for_update_ts: Optional[int] = None

    def __str__(self):
        extras = [f"ttl {self.ttl:g} s" if self.ttl is not None else "",
                  f"min_commit {self.min_commit_ts}" if self.min_commit_ts is not None else "",
                  ("secondaries " + " ".join(str(Cell(*c)) for c in self.secondaries))
                  if self.secondaries else "",
                  f"pessimistic @ {self.for_update_ts}" if self.for_update_ts is not None else ""]
        return "; ".join([super().__str__()] + [e for e in extras if e])


def extended(lock: Lock, **changes) -> TiKVLock:
    """``lock`` as a :class:`TiKVLock` with ``changes`` (field names of TiKVLock) applied."""
    if not isinstance(lock, TiKVLock):
        lock = TiKVLock(lock.start_ts, lock.primary, lock.is_primary, lock.client, lock.kind)
    return replace(lock, **changes)


def extend_lock(writes: list, **changes) -> list:
    """A prewrite's ``(column, ts, value)`` writes with its lock extended by ``changes``."""
    return [(column, ts, extended(value, **changes) if isinstance(value, Lock) else value)
            for column, ts, value in writes]


def extras_of(lock: Lock) -> dict:
    """The extra fields a lock carries that differ from the default (JSON-able), for a codec."""
    if not isinstance(lock, TiKVLock):
        return {}
    found = {f.name: getattr(lock, f.name) for f in fields(TiKVLock) if f.name in EXTRA_FIELDS}
    found = {name: value for name, value in found.items() if value not in (None, ())}
    if "secondaries" in found:
        found["secondaries"] = [list(c) for c in found["secondaries"]]
    return found


def lock_with_extras(start_ts: int, primary: Cell, is_primary: bool, client, kind: WriteKind,
                     extras: dict) -> Lock:
    """Inverse of :func:`extras_of`: the paper's Lock if ``extras`` is empty, else a TiKVLock."""
    if not extras:
        return Lock(start_ts, primary, is_primary, client, kind)
    unknown = set(extras) - set(EXTRA_FIELDS)
    if unknown:
        raise ValueError(f"not a lock field: {sorted(unknown)}")
    if "secondaries" in extras:
        extras = {**extras, "secondaries": tuple(Cell(*c) for c in extras["secondaries"])}
    return TiKVLock(start_ts, primary, is_primary, client, kind, **extras)
