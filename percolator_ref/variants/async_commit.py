"""Async commit (TiKV): committed once every prewrite has succeeded, one round trip earlier.

In the paper a transaction commits at one place, its primary's write record,
and the client must reach the primary after every prewrite to write it.
TiKV's async commit makes the *set of locks* the decision instead: "we can
return success to the user (from TiDB) when all prewrites have succeeded,
because at that point we know that commit will not fail"
(``design/async-commit/README.md`` in ``tikv/sig-transaction``). For that:

- the primary lock lists every secondary ("the client must specify all keys
  other than the primary key ... (in ``secondaries``)": ``design/async-commit/spec.md``);
- each lock carries a ``min_commit_ts``, computed by the store at prewrite as
  ``max(max_ts, start_ts) + 1`` (``async_commit_timestamps`` in TiKV's
  ``src/storage/txn/actions/prewrite.rs``), and the commit timestamp is the
  largest ``min_commit_ts`` of the transaction's locks ("TiDB will select the
  largest ``min_commit_ts`` as the final ``commit_ts``": ``initial-design.md``);
  the client takes one timestamp from the oracle *before* its prewrites as a
  lower bound (TiDB's ``tidb_guarantee_linearizability``, on by default: "the
  two phase committer would request a new ts from the pd server ... and
  linearizability is guaranteed": TiDB's system-variable documentation), so a
  transaction that begins after another one committed starts above its
  commit_ts; no timestamp is taken after the prewrites;
- ``max_ts`` is "the largest ``start_ts`` for any transactional read operation"
  of the store (``initial-design.md``; TiKV's ``components/concurrency_manager``).
  A reader raises it *before* it reads, so a prewrite that comes after the read
  gets a ``min_commit_ts`` above the reader's ``start_ts``: the transaction will
  commit after the reader's snapshot, which did not see it. That is how async
  commit keeps snapshot isolation without taking the commit timestamp after the
  locks (§2.3's rule for the paper's protocol);
- a reader may ignore a lock whose ``min_commit_ts`` is above its ``start_ts``
  ("Ignore lock when min_commit_ts > ts": ``check_ts_conflict_si`` in TiKV's
  ``components/txn_types/src/lock.rs``);
- a reader that resolves a dead client's lock checks every secondary
  (TiKV's ``CheckSecondaryLocks``, ``src/storage/txn/commands/check_secondary_locks.rs``:
  "If all prewritten locks exist, the lock information is returned ... If the
  lock does not exist ... a rollback may be written"): all locked -> committed
  at the largest ``min_commit_ts``; one missing -> it writes a rollback record
  there (so that prewrite, if it is late, is refused) and the transaction is
  rolled back.

Here: each store has one ``max_ts`` (:func:`max_ts_of`), the variant's state
for the cluster (:meth:`AsyncCommit.attach`): beside the in-memory Bigtable,
which only its one cluster reaches, and on the server for Redis, where the
clients are separate processes (:mod:`percolator_ref.stores.redis_max_ts`).
A transaction raises it before each read at its current ``start_ts`` (a
pessimistic ``get_for_update`` moves ``start_ts`` forward: the next read
raises it again). A reader
raises it before it fetches the row it reads, a scan before it lists its rows;
a prewrite reads it while it holds the row, which it reads first (on Redis, a
row transaction holds the row, its lease, only from its first read, and reads
wait out another client's lease), so a read of that row comes either before
the prewrite (which sees the raise) or after the lock is written (the read
sees the lock). TiKV orders the same two events with in-memory locks in its
concurrency manager. A commit_ts of ``max_ts + 1``
could equal a timestamp the oracle hands out as someone's start_ts; TiKV's
design notes discuss these collisions
(``design/async-commit/globally-non-unique-timestamps.md``). The kit avoids
them: an async-commit cluster's timestamp source hands out twice the oracle's
timestamps (:class:`EvenTimestamps`), so every start_ts is even and every
computed commit_ts odd. Two transactions that prewrite after the same read
can get the same commit_ts; the same design note allows it ("It is possible
two transactions have the same ``commit_ts`` ... This is fine as long as the
two transactions don't meet"), and so does the snapshot-isolation checker for
writers of disjoint cells (writers of one cell meet at its lock).
A transaction that sets notifications (observed columns, ``notify``) runs the
paper's two-phase commit. Rollbacks write rollback records.

Where the decision lies (the commit point). The transaction is committed as
soon as its last lock is written, so the *last prewrite* is its commit point:
once that prewrite is sent, every lock may be there, and a store failure then
(the reply lost, or the request never arriving: the client cannot tell) ends
in :class:`~percolator_ref.errors.CommitOutcomeUnknown`, decided by
``outcome()``, which resolves it as a reader would; the client rolls nothing
back (its rollback could race a reader that already committed the primary).
A prewrite that is *refused* applied nothing, and the client rolls back with
a rollback record on the refused cell too, so that request, if a duplicate of
it arrives late, is refused and cannot complete the set of locks. A
resolution that finds the primary neither locked nor committed writes a
rollback record there for the same reason.
"""
from __future__ import annotations

import threading
from typing import Optional

from .. import rows
from ..model import (DEFAULT_TABLE, Cell, CommitPhase, Lock, Write, WriteKind, lock_col,
                     write_col)
from ..step import Step
from ..stores.steps import declare_step
from ..transaction import SnapshotRead, committed_read
from . import Variant, state_of
from .locks import extend_lock
from .rollback_records import mark_rolled_back, protect_rollback

CHECK_PRIMARY = declare_step("check-primary", read_only=True, decides=True)
CHECK_SECONDARY = declare_step("check-secondary-locks", decides=True)
RESOLVE_PRIMARY = declare_step("resolve-primary", decides=True)


class MaxTs:
    """One store's ``max_ts``: the largest start_ts any read of the store has used."""

    def __init__(self):
        self.value = 0
        self.mutex = threading.Lock()

    def update(self, ts: int) -> None:
        with self.mutex:
            self.value = max(self.value, ts)


class EvenTimestamps:
    """The timestamp source of an async-commit cluster: twice the oracle's timestamps, so
    every start_ts is even and every computed commit_ts (``max_ts + 1``) odd."""

    def __init__(self, oracle):
        self.oracle = oracle

    def get_timestamp(self) -> int:
        return 2 * self.oracle.get_timestamp()

    def peek(self) -> int:
        return 2 * self.oracle.peek()


def new_max_ts(store):
    """A store's max_ts: its own if it keeps one on its server (``store.make_max_ts()``,
    the Redis store), else a :class:`MaxTs` beside it in this process."""
    make = getattr(store, "make_max_ts", None)
    return MaxTs() if make is None else make()


def max_ts_of(cluster):
    """The ``max_ts`` of ``cluster``'s store (created at 0 with the cluster): ``update(ts)``,
    ``value``. ValueError if the cluster runs no async commit."""
    return state_of(cluster, AsyncCommit.name)


def is_async(lock) -> bool:
    """Was ``lock`` written by an async-commit prewrite?"""
    return getattr(lock, "min_commit_ts", None) is not None


class AsyncTransaction:
    """Transaction mixin: async-commit prewrites; committed when all prewrites succeed."""

    async_mode = False
    raised_max_ts: Optional[int] = None     # the start_ts this transaction raised max_ts to

    def raise_max_ts(self) -> None:
        """Before a read: raise the store's max_ts to start_ts, so that a prewrite that comes
        after the read gets a min_commit_ts above start_ts (once per start_ts: max_ts never
        goes down, but a variant may move start_ts forward, as get_for_update does)."""
        if self.raised_max_ts != self.start_ts:
            max_ts_of(self.cluster).update(self.start_ts)
            self.raised_max_ts = self.start_ts

    def snapshot_read(self, rt, cell: Cell) -> SnapshotRead:
        """Raise the store's max_ts to start_ts, then read; skip a lock that must commit later."""
        self.raise_max_ts()
        found = super().snapshot_read(rt, cell)
        if found.lock is None or not is_async(found.lock) \
                or found.lock.min_commit_ts <= self.start_ts:
            return found
        return committed_read(rt, self.start_ts, cell.column)

    def scan(self, table: str = DEFAULT_TABLE, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """Raise the store's max_ts to start_ts before the scan lists its rows: a row that
        a prewrite creates after the listing then commits after start_ts, where the scan
        rightly does not see it (TiKV raises max_ts for a scan before it reads)."""
        self.raise_max_ts()
        return super().scan(table, start_row, end_row)

    def two_phase_commit(self) -> bool:
        """Prewrite all (async locks); then the transaction is committed: commit every cell.

        The last prewrite is the commit point (see the module doc): from the moment it is
        sent, a store failure leaves the outcome unknown. A refused prewrite applied
        nothing: roll back, the refused cell included (its rollback record refuses a late
        duplicate of that prewrite)."""
        mutations = list(self.writes.values())
        if not mutations or self.notifies or any(
                self.session.is_observed(m.cell.table, m.cell.column) for m in mutations):
            return super().two_phase_commit()
        self.async_mode, self.min_commit_tss = True, []
        self.secondaries = tuple(m.cell for m in mutations[1:])
        self.commit_floor = self.commit_timestamp()     # TiDB's linearizability guarantee
        for i, m in enumerate(mutations):
            if i == len(mutations) - 1:
                self.phase = CommitPhase.COMMIT_POINT   # once sent, every lock may be there
            if not self.prewrite(m, mutations[0].cell):
                self.phase = CommitPhase.PREWRITE       # refused: nothing of it applied
                self.roll_back_own(mutations[:i + 1])
                return False
        self.phase = CommitPhase.SECONDARIES      # decided: the client may answer now
        self.commit_ts = max(self.min_commit_tss)
        for m in mutations:                       # in TiKV, after the answer, in the background
            self.commit_secondary(m)
        return True

    def roll_back_own(self, mutations: list) -> None:
        """In async mode: erase our lock and data and leave a rollback record on every cell,
        locked by us or not (a prewrite refused, or never sent, may still arrive late)."""
        if not self.async_mode:
            return super().roll_back_own(mutations)
        for m in mutations:
            with self.session.row_transaction(m.cell.table, m.cell.row, Step.ABORT_ROLLBACK) as rt:
                if rows.held_lock(rt, m.cell.column, self.start_ts) is not None:
                    rows.apply(rt, self.session.cleanup.rollback_writes(m.cell.column,
                                                                         self.start_ts))
                else:
                    mark_rolled_back(rt, m.cell.column, self.start_ts)
                rt.explain(f"abort: erase own lock and data on {m.cell} @ {self.start_ts}, "
                           f"leave a rollback record")

    def hold_row(self, rt, cell: Cell) -> None:
        """In async mode, read the row before max_ts is read (see the module doc: on Redis
        that takes the row lease first)."""
        if self.async_mode:
            rt.read(lock_col(cell.column))

    def prewrite_writes(self, m, primary, is_primary) -> list:
        """The paper's data and lock; the lock with min_commit_ts (and, on the primary, the
        secondaries). Runs inside the prewrite's row transaction, so max_ts is read there."""
        writes = super().prewrite_writes(m, primary, is_primary)
        if not self.async_mode:
            return writes
        min_commit_ts = max(max_ts_of(self.cluster).value, self.start_ts,
                            self.commit_floor) + 1
        self.min_commit_tss.append(min_commit_ts)
        return extend_lock(writes, min_commit_ts=min_commit_ts,
                           secondaries=self.secondaries if is_primary else ())


class AsyncCleanup:
    """Cleanup mixin: an async-commit transaction is resolved by checking its secondaries."""

    def resolve_primary(self, primary: Cell, start_ts: int, holder=None) -> Optional[int]:
        """At the primary: committed -> commit_ts; an async lock -> check every secondary,
        then decide at the primary; a paper lock -> the paper's resolution."""
        with self.session.row_transaction(primary.table, primary.row, CHECK_PRIMARY) as rt:
            commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
            lock = rows.held_lock(rt, primary.column, start_ts)
            rt.explain(f"resolve {holder} at {primary}: " + (
                f"committed at {commit_ts}" if commit_ts is not None else
                "neither locked nor committed -> rolled back" if lock is None else
                f"async-commit lock, secondaries {', '.join(map(str, lock.secondaries))} -> "
                f"check them" if is_async(lock) else "a paper lock -> the paper's cleanup"))
        if commit_ts is not None:
            return commit_ts
        if lock is None:
            return protect_rollback(self, primary, start_ts, holder)
        if not is_async(lock):
            return super().resolve_primary(primary, start_ts, holder)
        return self.decide(primary, lock, self.check_secondaries(lock))

    def check_secondaries(self, lock: Lock) -> Optional[int]:
        """The commit_ts if every secondary is locked (or committed), else None (rolled back)."""
        found = [lock.min_commit_ts]
        for cell in lock.secondaries:
            state, ts = self.check_secondary(Cell(*cell), lock.start_ts)
            if state == "committed":
                return ts
            if state == "missing":
                return None
            found.append(ts)
        return max(found)

    def check_secondary(self, cell: Cell, start_ts: int) -> tuple:
        """One row transaction: ("locked", min_commit_ts), ("committed", commit_ts), or
        ("missing", None) after writing a rollback record so a late prewrite is refused."""
        with self.session.row_transaction(cell.table, cell.row, CHECK_SECONDARY) as rt:
            lock = rows.held_lock(rt, cell.column, start_ts)
            if lock is not None:
                rt.explain(f"check secondary {cell}: locked, min_commit_ts {lock.min_commit_ts}")
                return "locked", lock.min_commit_ts
            commit_ts = rows.find_commit_ts(rt, cell.column, start_ts)
            if commit_ts is not None:
                rt.explain(f"check secondary {cell}: committed at {commit_ts}")
                return "committed", commit_ts
            mark_rolled_back(rt, cell.column, start_ts)
            rt.explain(f"check secondary {cell}: no lock of {start_ts} -> rollback record: "
                       f"the transaction is rolled back")
            return "missing", None

    def decide(self, primary: Cell, lock: Lock, commit_ts: Optional[int]) -> Optional[int]:
        """At the primary: commit it at ``commit_ts`` or roll it back (if still locked)."""
        with self.session.row_transaction(primary.table, primary.row, RESOLVE_PRIMARY) as rt:
            done = rows.find_commit_ts(rt, primary.column, lock.start_ts)
            if done is not None or rows.held_lock(rt, primary.column, lock.start_ts) is None:
                rt.explain(f"resolve {primary}: already settled")
                return done
            if commit_ts is None:
                rows.apply(rt, self.rollback_writes(primary.column, lock.start_ts))
                rt.explain(f"resolve {primary}: a secondary is missing -> roll back")
                return None
            notify = self.session.is_observed(primary.table, primary.column)
            rows.apply(rt, rows.commit_writes(primary.column, Write(lock.start_ts, lock.kind),
                                              commit_ts, notify))
            rt.explain(f"resolve {primary}: every secondary locked -> commit at {commit_ts} "
                       f"(the largest min_commit_ts)")
            return commit_ts

    def rollback_writes(self, column: str, start_ts: int) -> list:
        """The rollback, with a rollback record (once, if another variant adds one too)."""
        writes = super().rollback_writes(column, start_ts)
        record = (write_col(column), start_ts, Write(start_ts, WriteKind.ROLLBACK))
        return writes if record in writes else writes + [record]


class AsyncCommit(Variant):
    """TiKV's async commit: ``Cluster(variants=[AsyncCommit()])`` (either store)."""

    name = "async-commit"
    Transaction = AsyncTransaction
    Cleanup = AsyncCleanup

    def attach(self, cluster):
        """The store's max_ts (on Redis, on the server: reads wait out leases from now on)."""
        return new_max_ts(cluster.bigtable)

    def timestamps(self, cluster, oracle):
        return EvenTimestamps(oracle)


class NoMaxTsTransaction:
    """For the anomaly only: a reader that does not raise the store's max_ts."""

    def raise_max_ts(self) -> None:
        """Leave max_ts alone (the bug shown)."""


class AsyncCommitWithoutMaxTs(AsyncCommit):
    """BROKEN on purpose (notebook 09, the tests): async commit whose reads leave max_ts alone."""

    name = "async-commit-without-max-ts"
    Transaction = type("AsyncTransaction", (NoMaxTsTransaction, AsyncTransaction), {})


class PrewritePhaseTransaction:
    """For the anomaly only: every prewrite, the last one too, counts as before the commit
    point (the code before issue 29's fix)."""

    def prewrite(self, m, primary) -> bool:
        """Set the phase back to PREWRITE, then prewrite (the bug shown)."""
        self.phase = CommitPhase.PREWRITE
        return super().prewrite(m, primary)


class AsyncCommitLastPrewriteAsPrewrite(AsyncCommit):
    """BROKEN on purpose (notebook 09, the tests): async commit that answers "aborted" when
    the store fails at its last prewrite, though every lock may be there (it is committed)."""

    name = "async-commit-last-prewrite-as-prewrite"
    Transaction = type("AsyncTransaction", (PrewritePhaseTransaction, AsyncTransaction), {})
