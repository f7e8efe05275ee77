"""The grading can fail: every exercise is a spec of trusted checks, unsolved exercises fail
nbval; the grader's formats (report, CSV, Gradescope), -j, and its static and error feedback."""
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from percolator_ref import grading
from percolator_ref.grading import Exercise
from percolator_ref.grading.grade.answers import Cell, static_problems
from percolator_ref.grading.grade.grader import Limits, grade, grade_all
from percolator_ref.grading.grade.results import gradescope, write_csv
from grading_helpers import pristine_path, solution_answer, solution_path, student_notebook

REPO = Path(__file__).resolve().parents[1]
EXERCISES = sorted(grading.MODULES)


@pytest.mark.parametrize("n", EXERCISES)
def test_every_exercise_is_a_spec_of_trusted_checks(n):
    module = grading.exercise(n)
    assert isinstance(module.exercise, Exercise) and module.exercise.number == n
    assert len(module.exercise) >= 6
    assert not {"battery", "reference", "mutants"} & set(vars(module)), \
        "the old battery and its reference are gone: a reference would be reachable in the sandbox"


def test_a_module_without_a_spec_is_refused():
    import types
    from percolator_ref.grading.framework import spec_of
    with pytest.raises(ValueError, match="defines no Exercise"):
        spec_of(types.ModuleType("ex99_nothing"), "answer")
    with pytest.raises(ValueError, match="the check cell grades 'Wrong'"):
        spec_of(grading.exercise(5), "Wrong")


def test_self_check_of_a_converted_exercise_is_deterministic():
    class Wrong:
        def __init__(self, path, first_timestamp=1, range_size=1000):
            self.next = first_timestamp

        def get_timestamp(self):
            self.next += 1
            return self.next
    assert str(grading.check(5, Wrong)) == str(grading.check(5, Wrong))
    assert grading.check(5, Wrong).n_passed == 0


def test_a_raising_stub_fails_every_check():
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise 8")
    report = grading.check(8, stub)
    assert report.n_passed == 0
    assert "FAIL  a withdrawal the total covers succeeds, down to a total of 0: " in str(report)
    assert "withdraw raised NotImplementedError: Exercise 8" in str(report)


def test_exercise_number_is_validated():
    with pytest.raises(ValueError, match="n must be one of"):
        grading.exercise(99)
    with pytest.raises(TypeError, match="n must be an int"):
        grading.exercise("1")


def test_every_unsolved_exercise_fails_nbval():
    """One pytest subprocess over exercises/; each notebook must have a failing cell."""
    notebooks = sorted(p.name for p in (REPO / "exercises").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) == len(EXERCISES)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
         "-q", "-rf", "-o", "addopts=", "exercises"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    failed = set(re.findall(r"FAILED exercises/([0-9]{2}_\w+\.ipynb)::", proc.stdout))
    assert proc.returncode == 1
    assert sorted(failed) == notebooks, proc.stdout[-2000:]


# -- the grader ---------------------------------------------------------------------

def test_exercise_is_graded_in_the_sandbox_from_its_answer_cell(tmp_path):
    good = tmp_path / "good.ipynb"
    good.write_text(solution_path(8).read_text())
    tampered = nbformat.read(pristine_path(8), as_version=4)
    passing = next(c for c in nbformat.read(solution_path(8), as_version=4).cells
                   if "check" in c.metadata.get("tags", [])).outputs[0]["text"]
    for cell in tampered.cells:          # a student "passes" by printing the passing report
        if "check" in cell.metadata.get("tags", []):
            cell.source = "print(" + json.dumps(passing) + ", end='')"
    nbformat.write(tampered, tmp_path / "tampered.ipynb")
    g_good, g_bad = grade_all([good, tmp_path / "tampered.ipynb"], jobs=2)
    assert g_good.passed and g_good.total == len(grading.exercise(8).exercise)
    assert g_bad.n_passed == 0 and "NotImplementedError: Exercise 8" in g_bad.checks[0].reason


def test_single_notebook_report_from_the_command_line(tmp_path):
    path = student_notebook(tmp_path / "05_mine.ipynb", 5, solution_answer(5))
    proc = subprocess.run([sys.executable, "-m", "percolator_ref", "grade", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"{path} (05_mine): exercise 5, timestamp oracle: ranges and a "
                        "persisted high-water mark")
    assert lines[1] == "  PASS  consecutive timestamps from first_timestamp, across range ends"
    n = len(grading.exercise(5).exercise)
    assert lines[-1] == f"  score: {n}/{n} checks (100%), PASSED"


def test_syntax_error_is_reported_with_its_line(tmp_path):
    answer = "class Oracle:\n    def __init__(self, p, first_timestamp=1, range_size=1000):\n" \
             "        self.x = = 1\n"
    g = grade(student_notebook(tmp_path / "s.ipynb", 5, answer))
    assert g.problems == [f"SyntaxError in your answer cell {_answer_id(5)}, line 3: invalid syntax"]
    assert g.n_passed == 0 and g.checks[0].reason.startswith("not run: SyntaxError")


def test_exception_in_answer_cell_and_in_a_check_name_their_line(tmp_path):
    raising_cell = "x = {}['missing']\n" + solution_answer(5)
    in_scenario = solution_answer(5).replace("ts, self.next = self.next, self.next + 1",
                                             "ts, self.next = self.next[0], self.next + 1")
    g_cell, g_scenario = grade_all([student_notebook(tmp_path / "a.ipynb", 5, raising_cell),
                                    student_notebook(tmp_path / "b.ipynb", 5, in_scenario)])
    assert g_cell.problems == ["not run: your answer cell raised KeyError: 'missing' (line 1 of "
                               "your answer cell)"]
    line = in_scenario.splitlines().index(
        next(l for l in in_scenario.splitlines() if "self.next[0]" in l)) + 1
    assert g_scenario.checks[0].reason == (
        "get_timestamp() must return a timestamp; it raised TypeError: 'int' object is not "
        f"subscriptable (line {line} of your answer cell)")


def test_missing_answer_cell_and_unreadable_notebook(tmp_path):
    nb = nbformat.read(pristine_path(5), as_version=4)
    nb.cells = [c for c in nb.cells if c.get("id") != _answer_id(5)]
    nbformat.write(nb, tmp_path / "deleted.ipynb")
    (tmp_path / "junk.ipynb").write_text("{not json")
    deleted, junk = grade_all([tmp_path / "deleted.ipynb", tmp_path / "junk.ipynb"])
    assert deleted.problems[0].startswith(f"answer cell {_answer_id(5)} is missing")
    assert junk.problems[0].startswith("not a readable notebook") and junk.total == 0


def _answer_id(n):
    from percolator_ref.grading.grade.answers import answer_cell_ids
    return answer_cell_ids(nbformat.read(pristine_path(n), as_version=4), n)[0]


@pytest.mark.parametrize("source,expected", [
    ("def withdraw(txn, c, a, n):\n    return 1\n", []),
    ("from bank import withdraw\n", ["withdraw is imported (line 1) instead of written with def "
                                     "in your answer cell: the graded code must be your own"]),
    ("withdraw = print\n", ["withdraw is assigned (line 1: withdraw = print) instead of written "
                            "with def in your answer cell: the graded code must be your own"]),
    ("def withdraw(txn, c, a, n):\n    '''doc'''\n    return Reference.withdraw(txn, c, a, n)\n",
     ["withdraw only calls Reference.withdraw(...): it delegates the graded step instead of "
      "implementing it"]),
    ("x = 1\n", ["your answer cells do not define withdraw"]),
])
def test_static_check_of_a_function(source, expected):
    assert static_problems([Cell("c", "answer", source)], {"withdraw": ()}) == expected


def test_static_check_of_a_class():
    cells = [Cell("c", "answer", "class T(Transaction):\n    def get(self):\n        return 1\n"
                                 "T.prewrite = Transaction.prewrite\n")]
    assert static_problems(cells, {"T": ("get", "prewrite")}) == [
        "class T does not define prewrite itself: inheriting it from Transaction would grade the "
        "reference, not your code",
        "line 4 replaces T.prewrite after the class: the graded step must be the def in the "
        "class body"]


# -- formats and parallel runs --------------------------------------------------------

@pytest.fixture(scope="module")
def two_grades(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("subs")
    good = student_notebook(tmp / "alice.ipynb", 5, solution_answer(5), student="Alice A.")
    stub = tmp / "bob.ipynb"
    stub.write_text(pristine_path(5).read_text())
    return [good, stub], grade_all([good, stub], folder=tmp)


def test_csv_has_student_a_column_per_check_and_a_total(two_grades, tmp_path):
    _, grades = two_grades
    write_csv(grades, tmp_path / "scores.csv")
    rows = list(csv.reader((tmp_path / "scores.csv").open()))
    checks = [c.name for c in grading.exercise(5).exercise.checks]
    assert rows[0] == ["student", "notebook", "exercise"] + checks + \
        ["checks_passed", "checks_total", "score", "problems", "submission", "counted", "flags"]
    n = len(checks)
    assert rows[1][0] == "Alice A." and rows[1][3:3 + n] == ["1"] * n and \
        rows[1][3 + n:6 + n] == [str(n), str(n), "1.000"]
    assert rows[2][0] == "bob" and rows[2][3:3 + n] == ["0"] * n and \
        rows[2][3 + n:6 + n] == ["0", str(n), "0.000"]


def test_gradescope_results_format(two_grades):
    _, grades = two_grades
    results = gradescope(grades[1:])
    assert set(results) == {"score", "output", "visibility", "stdout_visibility", "tests"}
    n = len(grading.exercise(5).exercise)
    assert results["score"] == 0.0 and len(results["tests"]) == n
    test = results["tests"][0]
    assert set(test) == {"name", "score", "max_score", "status", "output", "visibility"}
    assert (test["score"], test["max_score"], test["status"]) == (0.0, 1.0, "failed")
    assert "NotImplementedError: Exercise 5" in test["output"]
    both = gradescope(grades)
    assert both["score"] == float(n) and both["tests"][0]["name"].startswith("alice.ipynb: ")


def test_parallel_grading_gives_the_same_grades(two_grades):
    paths, sequential = two_grades
    parallel = grade_all(paths * 2, jobs=3)
    assert [(g.path, g.n_passed, g.total) for g in parallel] == \
        [(g.path, g.n_passed, g.total) for g in sequential] * 2


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="jobs must be a positive int"):
        grade_all([], jobs=0)
    with pytest.raises(ValueError, match="memory_mb must be a positive number"):
        Limits(memory_mb=0)
    proc = subprocess.run([sys.executable, "-m", "percolator_ref", "grade", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
