"""One-phase commit (TiKV's 1PC) for a transaction whose writes all live in one row.

Bigtable already makes one row's mutations atomic (§2.1), so a transaction
that writes only cells of one row needs neither locks nor a primary: TiKV
commits such a transaction in its prewrite ("If there is just a single
prewrite then TiDB can set a flag on the request, then TiKV can just use the
``min_commit_ts`` as the ``commit_ts`` and commit the transaction without
TiDB sending the final commit message": the 1PC section of
``design/async-commit/initial-design.md`` in ``tikv/sig-transaction``;
``try_one_pc`` in TiKV's ``src/storage/txn/actions/prewrite.rs`` writes the
write records at once instead of locks).

Here: a transaction whose writes share one row (and that sets no weak
notification elsewhere) commits in ONE row transaction, step ``"one-pc"``:
the prewrite's checks on every written cell (no write record at or after
``start_ts``, no lock), then the data at ``start_ts`` and the write records
at ``commit_ts``. The commit timestamp is taken from the oracle inside that
row transaction, once the row is held (the row transaction reads the row
first: on Redis that takes the row lease), so a reader whose ``start_ts`` is
later than it reads the row after the write (the role §2.3's "all locks
written before commit_ts" plays in two-phase commit). For that a read must
wait for a row held by another client's row transaction: the variant asks
the store for it (``order_reads_after_row_writes``; the in-memory store runs
one row transaction at a time, Redis reads then wait out row leases). TiKV
instead computes it in the store from ``max_ts`` (see the async-commit
variant). Any other transaction runs the paper's two-phase commit.

A refused one-phase commit applied nothing; it then leaves a rollback record
on its cells (one more row transaction), and a resolution (``outcome()``
after a store failure) that finds nothing leaves one at the primary: a late
duplicate of the request, which would commit on its own, is refused.
"""
from __future__ import annotations

from typing import Optional

from .. import cleanup, rows
from ..bigtable import Condition
from ..model import Cell, CommitPhase, Write, WriteKind, data_col, lock_col, write_col
from ..step import Step
from ..stores.steps import declare_step
from . import Variant
from .rollback_records import mark_rolled_back, protect_rollback

ONE_PC = declare_step("one-pc")      # writes; its reads only lead to an abort


class OnePCTransaction:
    """Transaction mixin: one row transaction for a one-row transaction."""

    def two_phase_commit(self) -> bool:
        """One-phase commit if every write, and every lock the transaction already holds
        (a pessimistic lock), is in one row (and no notification elsewhere)."""
        mutations = list(self.writes.values())
        cells = [m.cell for m in mutations] + list(self.own_locks())
        if not mutations or self.notifies or len({cell[:2] for cell in cells}) > 1:
            return super().two_phase_commit()
        return self.one_phase_commit(mutations)

    def one_phase_commit(self, mutations: list) -> bool:
        """Check like a prewrite, then write data and write records: no lock, ever (the
        transaction's own earlier locks in the row must still be there, and are erased)."""
        table, row = mutations[0].cell.table, mutations[0].cell.row
        own = self.own_locks()
        self.phase = CommitPhase.COMMIT_POINT       # this row transaction IS the commit point
        with self.session.row_transaction(table, row, ONE_PC) as rt:
            rt.read(lock_col(mutations[0].cell.column))     # hold the row (Redis: its lease)
            commit_ts = self.commit_timestamp()     # taken while the row is held
            ok, found = rt.check_and_write(
                [Condition(write_col(m.cell.column), min_ts=self.start_ts) for m in mutations]
                + [c for m in mutations if m.cell not in own for c in no_lock(m.cell.column)]
                + [c for cell, ts in own.items() for c in only_lock(cell.column, ts)],
                [w for m in mutations for w in self.one_pc_writes(m, commit_ts)]
                + [(lock_col(cell.column), ts, None) for cell, ts in own.items()])
            rt.explain(self.explain_one_pc(mutations, ok, found, commit_ts))
        if ok:
            self.commit_ts = commit_ts
        else:
            self.phase = CommitPhase.PREWRITE       # refused: nothing applied
            self.mark_refused(mutations)
        return ok

    def mark_refused(self, mutations: list) -> None:
        """After a refused one-phase commit: a rollback record on each cell (one row
        transaction), so a late duplicate of the request is refused; then, as the paper's
        prewrite does, clean up a dead client's lock that refused it (and still abort):
        else a row whose only writers commit in one phase would stay locked for good."""
        first = mutations[0].cell
        own = set(self.own_locks().values()) | {self.start_ts}
        with self.session.row_transaction(first.table, first.row, Step.ABORT_ROLLBACK) as rt:
            blockers = []
            for m in mutations:
                mark_rolled_back(rt, m.cell.column, self.start_ts)
                lock = rt.read(lock_col(m.cell.column))
                if lock is not None and lock[0] not in own:
                    blockers.append((m.cell, lock[1]))
            rt.explain(f"abort: rollback records @ {self.start_ts} on "
                       f"{', '.join(str(m.cell) for m in mutations)}")
        for cell, lock in blockers:
            if not self.session.is_alive(lock.client):
                cleanup.cleanup_lock(self.session, cell, lock)

    def one_pc_writes(self, m, commit_ts: int) -> list:
        """The data (unless a delete) at start_ts and the write record at commit_ts."""
        column = m.cell.column
        data = [(data_col(column), self.start_ts, m.value)] if m.kind is WriteKind.PUT else []
        notify = self.session.is_observed(m.cell.table, column)
        return data + [w for w in rows.commit_writes(column, Write(self.start_ts, m.kind),
                                                     commit_ts, notify)
                       if w[0] != lock_col(column)]

    def explain_one_pc(self, mutations, ok: bool, found, commit_ts: int) -> str:
        cells = ", ".join(str(m.cell) for m in mutations)
        if ok:
            return (f"one-phase commit {cells}: no write after start {self.start_ts}, no lock: "
                    f"data @ {self.start_ts} and write records at commit ts {commit_ts}, no lock")
        blocker = found[-1]                       # the check that failed (checks stop there)
        if blocker is None:
            return f"one-phase commit {cells}: a lock of ours is gone -> abort (nothing written)"
        what = "a write record" if isinstance(blocker[1], Write) else "a lock"
        return f"one-phase commit {cells}: {what} @ {blocker[0]} -> conflict, abort (nothing written)"


def no_lock(column: str) -> list:
    """The prewrite's check "no lock at any timestamp"."""
    return [Condition(lock_col(column))]


def only_lock(column: str, ts: int) -> list:
    """The checks "our lock at ``ts`` is there, and no other"."""
    return [Condition(lock_col(column), ts, ts, present=True),
            Condition(lock_col(column), 0, ts - 1), Condition(lock_col(column), ts + 1)]


class OnePCCleanup:
    """Cleanup mixin: a resolution that finds the transaction rolled back protects that
    answer with a rollback record at the primary (a late one-phase commit is refused)."""

    def resolve_primary(self, primary: Cell, start_ts: int, holder=None) -> Optional[int]:
        commit_ts = super().resolve_primary(primary, start_ts, holder)
        if commit_ts is not None:
            return commit_ts
        return protect_rollback(self, primary, start_ts, holder)


class OnePC(Variant):
    """TiKV's one-phase commit: ``Cluster(variants=[OnePC()])``."""

    name = "one-pc"
    Transaction = OnePCTransaction
    Cleanup = OnePCCleanup

    def attach(self, cluster):
        """Reads must wait for a row another client holds (see the module doc)."""
        cluster.bigtable.order_reads_after_row_writes()
        return None
