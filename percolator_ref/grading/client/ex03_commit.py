"""Exercise 3 (commit), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex03_commit`'s."""
from __future__ import annotations

from ..framework import Exercise
from .roles import writer_role


exercise = Exercise(
    3, "commit: the primary's commit point, then the secondaries", answer="CommitTransaction",
    graded={"CommitTransaction": ("two_phase_commit", "commit_primary")},
    hidden=("percolator_ref.transaction:Transaction.two_phase_commit",
            "percolator_ref.transaction:Transaction.commit_primary",
            # TiKV's commit point, in a module every exercise loads: the step over other locks
            "percolator_ref.variants.locks:commit_at_primary"))


@exercise.role("txn")
def _txn(Answer, cluster):
    """A transaction of the answer's class."""
    return Answer(cluster)


exercise.role("writer")(writer_role)


@exercise.role("reader")
def _reader_role(Answer, cluster, cells):
    """One transaction reading ``cells`` in order, then committing: the list of values."""
    txn = Answer(cluster)
    values = [txn.get(row, column) for row, column in cells]
    txn.commit()
    return values
