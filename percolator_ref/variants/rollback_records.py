"""Rollback records (TiKV): a rolled-back transaction leaves a marker in ``c:write``.

In the paper, rolling a cell back erases its lock and data and leaves no trace
(§2.2). Nothing then stops a message of the rolled-back transaction that
arrives late, a prewrite delayed in the network or retried after a lost reply,
from locking the cell again; if that cell is the primary, the transaction can
still reach its commit point after a cleaner decided it aborted and rolled its
secondaries back, and it commits without them.

TiKV writes a *rollback record* instead: a write record of type ``Rollback`` at
``commit_ts = start_ts`` of the rolled-back transaction (``make_rollback`` in
TiKV's ``src/storage/txn/actions/check_txn_status.rs``). Its prewrite refuses a key that has a
write record newer than the transaction's ``start_ts`` and, explicitly, one at
``start_ts`` that is a rollback ("unless the record means that the current
transaction has been rolled back": ``check_for_newer_version`` in TiKV's
``src/storage/txn/actions/prewrite.rs``).

Here: every rollback, a cleaner's (at the primary and at a secondary) and an
aborting client's, also writes ``Write(start_ts, WriteKind.ROLLBACK)`` in
``c:write`` at ``start_ts``. The paper's prewrite condition (no write record at
or after ``start_ts``) then refuses the late prewrite, and the paper's commit
condition (the lock is still there) refuses a late commit. Readers skip the
record (:func:`percolator_ref.rows.latest_write`) and it is not a commit
(:func:`percolator_ref.rows.find_commit_ts`). Like TiKV's, a rollback record
newer than another transaction's ``start_ts`` is a write-write conflict for it.
Not modelled: TiKV's collapsing of non-protected rollbacks and the
``has_overlapped_rollback`` flag (commit and start timestamps never collide
here: the oracle hands each out once).
"""
from __future__ import annotations

from typing import Optional

from .. import rows
from ..model import Cell, Write, WriteKind, write_col
from ..stores.steps import declare_step
from . import Variant

PROTECT_ROLLBACK = declare_step("protect-rollback", decides=True)


def mark_rolled_back(rt, column: str, start_ts: int) -> None:
    """In ``rt``: a rollback record at ``start_ts`` unless a write record is there already."""
    if rt.read(write_col(column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])


def protect_rollback(cleanup, primary: Cell, start_ts: int, holder=None) -> Optional[int]:
    """After a resolution found ``primary`` rolled back: one row transaction (step
    ``"protect-rollback"``) leaves a rollback record there, so a late request of that
    transaction is refused and "rolled back" stays true (TiKV writes a protected rollback
    when it resolves a transaction it finds no trace of). For variants whose late request
    could *commit* on its own (a one-cell async commit, a one-phase commit). If the
    primary got locked or committed meanwhile, ``cleanup`` resolves that instead."""
    with cleanup.session.row_transaction(primary.table, primary.row, PROTECT_ROLLBACK) as rt:
        commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
        locked = rows.held_lock(rt, primary.column, start_ts) is not None
        if commit_ts is None and not locked:
            mark_rolled_back(rt, primary.column, start_ts)
        rt.explain(f"resolve {holder} at {primary}: " + (
            f"committed at {commit_ts}" if commit_ts is not None else
            "locked meanwhile -> resolve again" if locked else
            "neither locked nor committed -> rollback record (a late request is refused)"))
    if locked:
        return cleanup.resolve_primary(primary, start_ts, holder)
    return commit_ts


class RollbackCleanup:
    """Cleanup mixin: rolling a cell back also writes the rollback record."""

    def rollback_writes(self, column: str, start_ts: int) -> list:
        """The paper's rollback (erase lock and data) plus ``c:write`` @ start_ts = ROLLBACK."""
        return super().rollback_writes(column, start_ts) + [
            (write_col(column), start_ts, Write(start_ts, WriteKind.ROLLBACK))]


class RollbackRecords(Variant):
    """TiKV's rollback records: ``Cluster(variants=[RollbackRecords()])``."""

    name = "rollback-records"
    Cleanup = RollbackCleanup
