"""The reference step is hidden while grading (exercises 1-4, the protocol steps, and 6-8, the
observers), so an answer that hands the work back to it at run time scores nothing for that
work; every check's numbers come from the grading run's secret, and its feedback carries them."""
import pytest

from percolator_ref import grading
from percolator_ref.grading.grade.grader import Limits, grade
from percolator_ref.grading.judge.interactive import self_check
from grading_helpers import first_failure, load_catalogue, solution_answer, student_notebook

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
              limits=Limits())
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


# -- exercises 6-8: the hidden observer steps, feedback with the run's numbers --------------
LIMITS = Limits()


def test_exercise_6_hides_the_reference_observer_steps():
    spec = grading.exercise(6).exercise
    assert set(spec.hidden) == {"percolator_ref.observers:pending_notification",
                                "percolator_ref.observers:run_observer"}
    assert set(spec.graded) == {"pending_notification", "run_observer"}


def test_delegating_to_the_hidden_run_observer_scores_zero_where_it_is_used(tmp_path):
    """The answer defines run_observer itself but hands over the reference's (and the
    reference runners) at run time: every check that runs an observer fails."""
    answer = solution_answer(6).replace(
        "answer = SimpleNamespace(pending_notification=pending_notification, run_observer=run_observer)",
        "from percolator_ref import observers\n"
        "answer = SimpleNamespace(pending_notification=pending_notification,\n"
        "                         run_observer=observers.run_observer)")
    assert "observers.run_observer" in answer
    g = grade(student_notebook(tmp_path / "delegates.ipynb", 6, answer), limits=LIMITS)
    assert g.problems == []
    failed = [r for r in g.checks if not r.passed]
    assert len(failed) >= 10
    assert any("hidden during grading" in r.reason for r in failed), g.summary()


@pytest.mark.parametrize("n", [6, 7, 8])
def test_feedback_carries_the_numbers_of_the_run(n):
    """Each wrong answer's first failing check fails under another secret too, and says
    something different: the sentence is built from that run's timestamps, names and
    amounts. (The second secret runs only that check.)"""
    spec = grading.exercise(n).exercise
    for name, source in load_catalogue(n).items():
        namespace = {}
        exec(compile(source, "<answer>", "exec"), namespace)
        answer = namespace[spec.answer]
        first = first_failure(spec, answer, secret=11)
        assert first is not None, name
        [again] = self_check(spec, answer, secret=12, only={first.name}).results
        assert not again.passed, name                 # the same check fails under each secret
        assert first.reason != again.reason, name
