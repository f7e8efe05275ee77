"""Exercise 9 (rollback records), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex09_rollback_records`'s."""
from __future__ import annotations

from percolator_ref import Transaction
from percolator_ref.cleanup import Cleanup
from percolator_ref.model import Cell
from percolator_ref.session import Session
from percolator_ref.stores.steps import declare_step
from percolator_ref.variants import compose
from percolator_ref.variants.rollback_records import RollbackRecords

from ..framework import Exercise
from .roles import record_intent


exercise = Exercise(
    9, "rollback records: a late prewrite of a rolled-back transaction is refused",
    answer="RollbackCleanup",
    graded={"RollbackCleanup": ("resolve_primary", "rollback_writes")},
    hidden=("percolator_ref.cleanup:Cleanup.resolve_primary",
            "percolator_ref.cleanup:Cleanup.rollback_writes",
            "percolator_ref.variants.rollback_records:RollbackCleanup.rollback_writes",
            # the step's record at a primary found empty, written by the module's own helpers
            "percolator_ref.variants.rollback_records:mark_rolled_back",
            "percolator_ref.variants.rollback_records:protect_rollback"),
    forbidden_bases=("RollbackCleanup", "AsyncCleanup"))


def _with_cleanup(cluster, Answer):
    """The proxy cluster, its sessions cleaning up with ``Answer``."""
    cluster.Cleanup = Answer
    return cluster


@exercise.role("reader")
def _reader_role(Answer, cluster, cells):
    """A reference transaction whose cleanup is the answer: the values its Gets read."""
    txn = Transaction(_with_cleanup(cluster, Answer))
    values = [txn.get(row, column) for row, column in cells]
    txn.abandon()
    return values


@exercise.role("writer")
def _writer_role(Answer, cluster, values):
    """A reference transaction (its own rollback is the answer's) writing ``[[row, column,
    value]]``; did it commit?"""
    txn = Transaction(_with_cleanup(cluster, Answer))
    for row, column, value in values:
        txn.set(row, column, value)
    return txn.commit()


@exercise.role("resolve")
def _resolve_role(Answer, cluster, primary, start_ts, holder):
    """One call of the answer's ``resolve_primary`` by the client R."""
    return Answer(Session(_with_cleanup(cluster, Answer), "R")).resolve_primary(
        Cell(*primary), start_ts, holder)


class LatePrimary(Transaction):
    """TiKV's client sends a transaction's prewrites in parallel: here the primary's lands last."""

    def two_phase_commit(self) -> bool:
        mutations = list(self.writes.values())
        primary = mutations[0].cell
        order = mutations[1:] + mutations[:1]
        for i, m in enumerate(order):
            if m is mutations[0]:
                self.before_primary(primary)
            if not self.prewrite(m, primary):
                self.roll_back_own(order[:i])
                return False
        return self.commit_prewritten(mutations)

    def before_primary(self, primary: Cell) -> None:
        """Between the secondaries' prewrites and the primary's (nothing here)."""

    def commit_prewritten(self, mutations) -> bool:
        """Figure 6 after the prewrites: commit_ts, the primary (the commit point), the rest."""
        self.commit_ts = self.commit_timestamp()
        if not self.commit_primary(mutations[0]):
            self.commit_ts = None
            self.roll_back_own(mutations[1:])
            return False
        for m in mutations[1:]:
            self.commit_secondary(m)
        return True


class TwicePrimary(LatePrimary):
    """The network delivers the primary's prewrite twice: the copy lands after the others."""

    def two_phase_commit(self) -> bool:
        mutations = list(self.writes.values())
        primary = mutations[0].cell
        for i, m in enumerate(mutations):
            if not self.prewrite(m, primary):
                self.roll_back_own(mutations[:i])
                return False
        self.prewrite(mutations[0], primary)       # the late copy: its answer goes nowhere
        return self.commit_prewritten(mutations)


TXN_HEARTBEAT = declare_step("txn-heartbeat", read_only=True)


class ComingBack(LatePrimary):
    """A holder that stalls after its secondaries' prewrites, longer than the TTL (a pause: it
    is judged dead), then comes back before its primary's prewrite lands: its heartbeat is a
    message of its own (TiKV's TxnHeartBeat goes to the primary's row), which the explorer
    places like any request."""

    def before_primary(self, primary: Cell) -> None:
        come_back(self, primary)


class BackBeforeCommit(LatePrimary):
    """A holder whose prewrites have all landed (its primary's last) and that stalls longer than
    the TTL before its commit (judged dead meanwhile), then comes back (its heartbeat a message
    at the primary's row, as :class:`ComingBack`'s) and commits: a cleaner may find its primary
    lock held by a holder alive again."""

    def commit_prewritten(self, mutations) -> bool:
        come_back(self, mutations[0].cell)
        return super().commit_prewritten(mutations)


def come_back(txn, primary: Cell) -> None:
    """``txn``'s client stalls longer than the TTL (judged dead meanwhile), then heartbeats:
    a message of its own at the primary's row, which the explorer places; alive again."""
    txn.cluster.clock.sleep(3 * txn.session.lockservice.ttl)
    with txn.session.row_transaction(primary.table, primary.row, TXN_HEARTBEAT):
        pass
    txn.session.lockservice.heartbeat(txn.client)


WRITERS = {"late-primary": LatePrimary, "twice-primary": TwicePrimary, "coming-back": ComingBack,
           "back-before-commit": BackBeforeCommit}


@exercise.role("tikv_writer")
def _tikv_writer_role(Reference, cluster, values, how):
    """A reference (trusted) writer with TiKV's rollback records, prewriting as ``how`` says."""
    cluster.Cleanup = compose(Cleanup, (RollbackRecords(),), "Cleanup")
    txn = WRITERS[how](cluster)
    for row, column, value in values:
        txn.set(row, column, value)
    record_intent(txn)
    return txn.commit()
