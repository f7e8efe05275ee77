"""Exercises 6-8 on the trusted world: the hidden observer steps, feedback with the run's numbers."""
import pytest

from percolator_ref import grading
from percolator_ref.grading.grader import Limits, grade
from grading_helpers import load_catalogue, solution_answer, student_notebook

LIMITS = Limits(timeout=60)


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
    """Each wrong answer's first failing check says something different under another secret:
    the sentence is built from that run's timestamps, names and amounts."""
    spec = grading.exercise(n).exercise
    for name, source in load_catalogue(n).items():
        namespace = {}
        exec(compile(source, "<answer>", "exec"), namespace)
        answer = namespace[spec.answer]
        first = [next(r for r in grading.run_local(spec, answer, secret=s).results if not r.passed)
                 for s in (11, 12)]
        assert first[0].reason != first[1].reason or first[0].name != first[1].name, name
