"""Every converted exercise: the solution passes every check, every wrong answer fails one.

The wrong answers (tests/wrong_answers/exNN_*.py) are whole answer cells. Every one fails
the notebook's self-check (the grader's worlds and schedules, in this process); through the
real path (notebook -> answer cell -> sandboxed child -> verdicts), the first of each
exercise in every run and all of them under ``make test-long``.
"""
import re

import pytest

from percolator_ref import grading
from percolator_ref.grading import Exercise
from percolator_ref.grading.grade.grader import Limits, grade
from percolator_ref.grading.judge.interactive import self_check
from grading_helpers import first_failure, load_catalogue, solution_answer, student_notebook

CONVERTED = [n for n in sorted(grading.MODULES)
             if isinstance(getattr(grading.exercise(n), "exercise", None), Exercise)]
CASES = [(n, name) for n in CONVERTED for name in load_catalogue(n)]
LIMITS = Limits()


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
def test_wrong_answer_fails_a_check_in_the_notebook(n, name):
    """Every entry fails a check of the notebook's own self-check (the grader's worlds and
    schedules, in this process), and its feedback is a sentence, not a bare error."""
    spec = grading.exercise(n).exercise
    failed = first_failure(spec, answer_of(n, name))
    assert failed is not None, f"survived: {name}"
    assert len(failed.reason) > 30 and "Traceback" not in failed.reason


def through_the_sandbox(cases):
    """The first entry of each exercise in every run; the others under the ``long`` mark
    (``make test-long``): each grade is a sandboxed child running every check (seconds of
    CPU, about ten minutes for the whole catalogue on two cores)."""
    firsts = {n: name for n, name in reversed(cases)}
    return [pytest.param(n, name, marks=() if firsts[n] == name else pytest.mark.long,
                         id=f"ex{n}-{name[:40]}") for n, name in cases]


@pytest.mark.parametrize("n,name", through_the_sandbox(CASES))
def test_wrong_answer_fails_a_check_in_the_sandbox_and_in_the_notebook(n, name, tmp_path):
    """Graded once through the real path (notebook -> answer cell -> sandboxed child ->
    verdicts); then the notebook's own self-check, in this process, runs the checks the grade
    failed, and must fail each of them too."""
    answer = load_catalogue(n)[name]
    g = grade(student_notebook(tmp_path / "wrong.ipynb", n, answer), limits=LIMITS)
    assert g.problems == [], g.summary()           # it ran: the checks caught it, not a crash
    failed = [r for r in g.checks if not r.passed]
    assert failed, f"survived: {name}\n{g.summary()}"
    for r in failed:                                # feedback is a sentence, not a bare error
        assert len(r.reason) > 30 and "Traceback" not in r.reason
    spec = grading.exercise(n).exercise
    own = self_check(spec, answer_of(n, name), only={r.name for r in failed})
    assert [r.name for r in own.results] == [r.name for r in failed]
    mine = {r.name: r.passed for r in own.results}
    assert not any(mine[r.name] for r in failed), f"the self-check passed what the grade failed: " \
                                                  f"{name}\n{own}"


CLOSED = {   # issue 30's classes closed by one check each: entries only that check catches
    (4, "rolls a secondary forward without its notification"): "rolling a secondary forward sets",
    (4, "the secondary's notification follows the primary's column"): "rolling a secondary forward",
    (4, "rolling forward always sets the notification"): "rolling a secondary forward sets",
    (5, "overwrites the mark in place and jumps a thousand ranges ahead on an empty file"):
        "every crash point",
    (5, "prefers the temporary file a crash left behind (it holds the newer mark)"):
        "every crash point",
    (4, "the primary's newest write record decides: W's start_ts there means committed"):
        "crashed after its commit point: roll forward",
    (5, "allocates each range right after the last, even when first_timestamp jumped past them"):
        "first_timestamp above the persisted mark wins",
    (5, "overwrites a fixed-width record in place (never emptied, so never lost)"):
        "every crash point",
    (10, "commits the primary as a put (Write(start_ts)), whatever its lock's kind"):
        "every lock prewritten: a reader of the primary",
    (10, "a secondary's prewrite landed when its data is there"):
        "every lock prewritten: a reader of the primary",
    (10, "the missing secondary's rollback record at a fresh timestamp, above every other"):
        "a secondary never prewritten",
    (10, "the primary rolled back without a record (the missing secondary holds it)"):
        "a secondary never prewritten",
    (9, "a holder alive again keeps its primary lock: nothing to resolve"):
        "every interleaving of a reader (your cleanup) of the secondary with a transfer whose "
        "holder stalls past its TTL after every prewrite landed",
    (9, "a holder alive again is fenced by the rollback record alone, its lock left"):
        "every interleaving of a reader (your cleanup) of the secondary with a transfer whose "
        "holder stalls past its TTL after every prewrite landed",
}


@pytest.mark.parametrize("n,name", sorted(CLOSED), ids=[f"ex{n}-{name[:40]}" for n, name in
                                                        sorted(CLOSED)])
def test_an_entry_of_a_closed_class_fails_only_the_check_that_closes_it(n, name):
    """A secondary's notify after a roll-forward (exercise 4), a torn write (exercise 5), a
    holder alive again before its commit (exercise 9): each entry fails that check alone, so
    the class is caught by its own coverage, not by an accident of another check."""
    report = self_check(grading.exercise(n).exercise, answer_of(n, name))
    failed = [r for r in report.results if not r.passed]
    assert len(failed) == 1 and failed[0].name.startswith(CLOSED[n, name]), (name, failed)
    if n == 5 and CLOSED[n, name] == "every crash point":   # its torn crash points, not its older ones
        assert re.search(r"(half-way through|one character into) writing", failed[0].reason), \
            failed[0].reason


def answer_of(n: int, name: str):
    """The catalogue entry's answer object (what its cell defines under the spec's name)."""
    namespace = {}
    exec(compile(load_catalogue(n)[name], "<answer>", "exec"), namespace)
    return namespace[grading.exercise(n).exercise.answer]


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


def test_grade_bench_writes_a_class_of_right_and_wrong_notebooks(tmp_path):
    """`percolator grade-bench`'s class: N per exercise, right and wrong mixed, each notebook
    holding the answer it claims (the timing itself is the command's, not a test's)."""
    import nbformat
    from percolator_ref.commands.grade_bench import make_class
    from percolator_ref.grading.grade.answers import answer_cell_ids
    from grading_helpers import REPO, pristine_path
    expected = make_class(tmp_path, REPO / "tests" / "wrong_answers", 3)
    assert len(expected) == 3 * len(grading.MODULES)
    for path, right in expected.items():
        n = int(path.name[2:4])
        ids = answer_cell_ids(nbformat.read(pristine_path(n), as_version=4), n)
        nb = nbformat.read(path, as_version=4)
        source = next(c.source for c in nb.cells if c.get("id") in ids)
        answers = set(load_catalogue(n).values())
        assert (source == solution_answer(n)) == right
        assert right or source in answers
    assert sum(expected.values()) == 2 * len(grading.MODULES)
