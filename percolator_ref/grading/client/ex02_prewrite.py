"""Exercise 2 (prewrite), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex02_prewrite`'s."""
from __future__ import annotations

from ..framework import Exercise, outcome
from .roles import writer_role


exercise = Exercise(
    2, "prewrite", answer="PrewriteTransaction",
    graded={"PrewriteTransaction": ("prewrite",)},
    hidden=("percolator_ref.transaction:Transaction.prewrite",
            "percolator_ref.transaction:Transaction.prewrite_writes"))


@exercise.role("txn")
def _txn(Answer, cluster, client=None):
    """A transaction of the answer's class (``client``: the worker it runs in)."""
    return Answer(cluster, client)


@exercise.role("prewrite_all")
def _prewrite_all_role(Answer, cluster, writes):
    """Buffer ``[[row, column, value or None, table], ...]``, then call prewrite on each
    mutation, primary first: the outcomes."""
    txn = Answer(cluster)
    for row, column, value, table in writes:
        txn.set(row, column, value, table) if value is not None else txn.delete(row, column, table)
    mutations = list(txn.writes.values())
    return [outcome(txn.prewrite, m, mutations[0].cell) for m in mutations]


exercise.role("writer")(writer_role)
