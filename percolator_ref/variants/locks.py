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

from .. import rows
from ..model import Cell, Lock, Write, WriteKind, lock_col
from ..step import Step

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


def commit_at_primary(txn, m, own_ts: Optional[int] = None) -> bool:
    """The commit point over TiKV's locks: ``txn``'s primary ``m`` committed at a
    ``commit_ts`` no lower than its lock's ``min_commit_ts``; True, or False if a lock of
    ours is gone (a cleaner rolled the transaction back).

    One row transaction at the primary: our lock at ``start_ts`` (and our earlier lock at
    ``own_ts``, a pessimistic one) must be there; the write record at ``commit_ts``, both
    locks erased. A reader's ``CheckTxnStatus`` may have pushed the lock's
    ``min_commit_ts`` above ``commit_ts`` (it then reads past the transaction's locks):
    nothing is written, and the commit takes a newer ``commit_ts`` and runs again (TiKV:
    "A lock with larger min_commit_ts than current commit_ts can't be committed",
    ``CommitTsExpired`` in ``src/storage/txn/actions/commit.rs``, and the client retries).
    """
    column = m.cell.column
    extra = [] if own_ts in (None, txn.start_ts) else [own_ts]
    notify = txn.session.is_observed(m.cell.table, column)
    while True:
        with txn.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
            floor = getattr(rows.held_lock(rt, column, txn.start_ts), "min_commit_ts", None)
            if floor is not None and floor > txn.commit_ts:
                rt.explain(f"commit {m.cell}: min_commit_ts {floor} (pushed by a reader) > "
                           f"commit ts {txn.commit_ts} -> take a newer commit ts")
            else:
                held, _ = rt.check_and_write(
                    [rows.lock_is_held(column, ts) for ts in [txn.start_ts, *extra]],
                    rows.commit_writes(column, Write(txn.start_ts, m.kind), txn.commit_ts, notify)
                    + [(lock_col(column), ts, None) for ts in extra])
                rt.explain(f"commit {m.cell} (commit point): write record {m.kind.value} @ "
                           f"{txn.start_ts} at commit ts {txn.commit_ts}, erase our lock"
                           + (f"s @ {txn.start_ts} and @ {extra[0]}" if extra else "")
                           if held else f"commit {m.cell}: a lock of ours is gone -> rolled "
                           f"back by a cleaner, abort")
                return held
        txn.commit_ts = txn.commit_timestamp()
