"""Exercises 1-4 (the protocol steps): the reference step is hidden while grading, so an answer
that hands the work back to it at run time scores nothing for that work; every check's numbers
come from the grading run's secret."""
import pytest

from percolator_ref import grading
from percolator_ref.grading.grader import Limits, grade
from grading_helpers import student_notebook

HIDDEN = "hidden during grading: write the step yourself"

# Each answer defines the graded step itself (so the static checks let it through) and then
# calls the reference step, or the helper the reference step is made of, at run time.
DELEGATING = {
    1: '''from percolator_ref import Transaction
from percolator_ref import transaction as core


class SnapshotReadTransaction(Transaction):
    def snapshot_read(self, rt, cell):
        start = self.start_ts
        return core.snapshot_read(rt, start, cell.column)
''',
    2: '''from percolator_ref import Transaction
from percolator_ref.bigtable import Condition
from percolator_ref.model import lock_col, write_col
from percolator_ref.step import Step


class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column = m.cell.column
        with self.session.row_transaction(m.cell.table, m.cell.row, Step.PREWRITE_PRIMARY) as rt:
            ok, _ = rt.check_and_write(
                [Condition(write_col(column), min_ts=self.start_ts), Condition(lock_col(column))],
                self.prewrite_writes(m, primary, m.cell == primary))
        return ok
''',
    3: '''from percolator_ref import Transaction


class CommitTransaction(Transaction):
    def commit_primary(self, m):
        here = Transaction
        return here.commit_primary(self, m)

    def two_phase_commit(self):
        here = super()
        return here.two_phase_commit()
''',
    4: '''from percolator_ref import cleanup


def backoff_and_maybe_cleanup_lock(session, cell, lock, attempt):
    if session.is_alive(lock.client):
        session.backoff(attempt)
        return
    cleanup.cleanup_lock(session, cell, lock)
''',
}


@pytest.mark.parametrize("n", sorted(DELEGATING))
def test_calling_the_hidden_reference_fails_with_the_reason(n, tmp_path):
    g = grade(student_notebook(tmp_path / "delegates.ipynb", n, DELEGATING[n]),
              limits=Limits(timeout=60))
    assert g.problems == [], g.summary()
    assert not g.passed, g.summary()
    hidden = [r for r in g.checks if not r.passed and HIDDEN in r.reason]
    assert hidden, g.summary()
    if n != 4:                           # exercise 4's answer writes the live-holder case itself
        assert g.n_passed == 0, g.summary()


@pytest.mark.parametrize("n", sorted(DELEGATING))
def test_every_check_draws_its_numbers_from_the_secret(n):
    spec = grading.exercise(n).exercise
    first, second = spec.params(1), spec.params(2)
    assert all(first[c.name] and first[c.name] != second[c.name] for c in spec.checks)
    assert spec.params(1) == first                       # and only from it
