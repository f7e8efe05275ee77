"""Exercise 10 (async commit), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex10_async_commit`'s."""
from __future__ import annotations

import weakref

from percolator_ref import Transaction
from percolator_ref.model import Cell
from percolator_ref.session import Session
from percolator_ref.variants.async_commit import AsyncCommit

from ..framework import Exercise
from .ex09_rollback_records import come_back
from .roles import record_intent


exercise = Exercise(
    10, "async commit: resolve a lock whose primary lists its secondaries",
    answer="AsyncResolve", graded={"AsyncResolve": ("resolve_primary",)},
    hidden=("percolator_ref.cleanup:Cleanup.resolve_primary",
            *(f"percolator_ref.variants.async_commit:AsyncCleanup.{step}" for step in (
                "resolve_primary", "check_secondaries", "check_secondary", "decide"))),
    forbidden_bases=("AsyncCleanup",))


SHARED = weakref.WeakValueDictionary()         # world id -> its store's MaxTs (trusted side only)


@exercise.role("reader")
def _reader_role(Answer, cluster, cells):
    """A reference transaction whose cleanup is the answer: the values its Gets read."""
    cluster.Cleanup = Answer
    txn = Transaction(cluster)
    values = [txn.get(row, column) for row, column in cells]
    txn.abandon()
    return values


@exercise.role("resolve")
def _resolve_role(Answer, cluster, primary, start_ts, holder):
    """One call of the answer's ``resolve_primary`` by the client R."""
    cluster.Cleanup = Answer
    return Answer(Session(cluster, "R")).resolve_primary(Cell(*primary), start_ts, holder)


class ComingBack:
    """Transaction mixin: the holder stalls past its TTL before its last prewrite (judged dead
    meanwhile), then comes back, its heartbeat a message of its own, before that prewrite lands."""

    def prewrite(self, m, primary) -> bool:
        if self.async_mode and self.secondaries and m.cell == self.secondaries[-1]:
            come_back(self, primary)
        return super().prewrite(m, primary)


@exercise.role("async_writer")
def _async_writer_role(Reference, cluster, values, world, coming_back=False):
    """A reference (trusted) async-commit transaction; its prewrites read the world's max_ts.
    ``coming_back``: it stalls and comes back before its last prewrite (:class:`ComingBack`)."""
    variant = AsyncCommit()
    cluster.Transaction = type("Transaction", (ComingBack, variant.Transaction, Transaction)
                               if coming_back else (variant.Transaction, Transaction), {})
    cluster.Cleanup = type("Cleanup", (variant.Cleanup, cluster.Cleanup), {})
    cluster.variant_states = {variant.name: SHARED[world]}      # the world's store's max_ts
    txn = cluster.Transaction(cluster)
    for row, column, value in values:
        txn.set(row, column, value)
    record_intent(txn)
    return txn.commit()
