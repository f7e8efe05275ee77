"""Exercise 2's client side: its spec and the roles that build its clients.

Roles run where the client runs (the sandboxed child when grading, the notebook's
kernel in the self-check) and hold no verdict. The checks that judge these clients
are :mod:`percolator_ref.grading.judge.ex02_prewrite`'s; the child never imports them.
"""
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
