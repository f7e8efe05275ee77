"""Every converted exercise: the solution passes every check, every wrong answer fails one.

The wrong answers (tests/wrong_answers/exNN_*.py) are whole answer cells, graded
through the real path: notebook -> answer cell -> sandboxed child -> verdicts.
"""
import pytest

from percolator_ref import grading
from percolator_ref.grading import Exercise
from percolator_ref.grading.grader import Limits, grade
from grading_helpers import load_catalogue, solution_answer, student_notebook

CONVERTED = [n for n in sorted(grading.MODULES)
             if isinstance(getattr(grading.exercise(n), "exercise", None), Exercise)]
CASES = [(n, name) for n in CONVERTED for name in load_catalogue(n)]
LIMITS = Limits(timeout=30)


def test_exercise_5_is_converted():
    assert 5 in CONVERTED


@pytest.mark.parametrize("n", CONVERTED)
def test_catalogue_has_at_least_six_wrong_answers(n):
    assert len(load_catalogue(n)) >= 6


@pytest.mark.parametrize("n", CONVERTED)
def test_solution_passes_every_check_in_the_sandbox(n, tmp_path):
    g = grade(student_notebook(tmp_path / "good.ipynb", n, solution_answer(n)), limits=LIMITS)
    assert g.problems == []
    assert g.passed, g.summary()
    assert g.total == len(grading.exercise(n).exercise) >= 6


@pytest.mark.parametrize("n,name", CASES, ids=[f"ex{n}-{name[:40]}" for n, name in CASES])
def test_wrong_answer_fails_a_check(n, name, tmp_path):
    answer = load_catalogue(n)[name]
    g = grade(student_notebook(tmp_path / "wrong.ipynb", n, answer), limits=LIMITS)
    assert g.problems == [], g.summary()           # it ran: the checks caught it, not a crash
    failed = [r for r in g.checks if not r.passed]
    assert failed, f"survived: {name}\n{g.summary()}"
    for r in failed:                                # feedback is a sentence, not a bare error
        assert len(r.reason) > 30 and "Traceback" not in r.reason


@pytest.mark.parametrize("n,name", CASES, ids=[f"ex{n}-{name[:40]}" for n, name in CASES])
def test_wrong_answer_fails_the_notebooks_own_check_too(n, name):
    namespace = {}
    exec(compile(load_catalogue(n)[name], "<answer>", "exec"), namespace)
    spec = grading.exercise(n).exercise
    assert not grading.check(n, namespace[spec.answer]).passed


def instructor_table() -> dict:
    """``{exercise: (checks, caught, catalogue)}`` as exercises/README.md states them."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "exercises" / "README.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `\d\d_\w+`.*?\| (\d+) \| (\d+)/(\d+) catalogue \|", text, re.M)
    return {int(n): (int(c), int(k), int(t)) for n, c, k, t in rows}


def test_instructor_page_counts_are_the_real_ones():
    stated = instructor_table()
    real = {n: (len(grading.exercise(n).exercise), len(load_catalogue(n)), len(load_catalogue(n)))
            for n in CONVERTED}
    assert stated == real        # every wrong answer is caught: the tests above prove it
