"""exercises/ is exactly what the generator makes from solutions/ (one source of truth)."""
from pathlib import Path

import nbformat
import pytest

from percolator_ref.grading.grade.generate import exercise_from_solution, generate, strip_solutions

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((REPO / "solutions").glob("[0-9][0-9]_*.ipynb"))


def test_exercises_match_the_generator():
    assert len(SOLUTIONS) >= 8
    drift = generate(REPO / "solutions", REPO / "exercises", check=True)
    assert drift == [], f"run `percolator make-exercises`: out of date: {drift}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_exercise_has_stubs_and_the_solutions_outputs(path):
    solution = nbformat.read(path, as_version=4)
    n = solution.metadata["percolator"]["exercise"]
    exercise = exercise_from_solution(solution)
    sources = "\n".join(c.source for c in exercise.cells)
    assert "BEGIN SOLUTION" not in sources and "END SOLUTION" not in sources
    assert f'raise NotImplementedError("Exercise {n}")' in sources
    checks = [i for i, c in enumerate(exercise.cells) if "check" in c.metadata.get("tags", [])]
    assert len(checks) == 1
    others = [i for i in range(len(exercise.cells)) if i not in checks]
    assert [exercise.cells[i].get("outputs") for i in others] == \
        [solution.cells[i].get("outputs") for i in others]
    # the check cell: the solution stores its passing report; the exercise is left unrun, so an
    # unsolved exercise shows no "k/k checks passed" (nbval still fails it: the cell raises)
    check, solved = exercise.cells[checks[0]], solution.cells[checks[0]]
    report = solved.outputs[0]["text"]
    assert "FAIL" not in report and report.startswith(f"Exercise {n}:")
    assert check.outputs == [] and check.execution_count is None
    assert check.source.rstrip().endswith("report.raise_if_failed()")


def test_strip_solutions_keeps_indentation_and_code_around():
    source = "def f():\n    x = 1\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\ny = 2"
    assert strip_solutions(source, 3) == ('def f():\n    x = 1\n    # YOUR CODE HERE\n'
                                          '    raise NotImplementedError("Exercise 3")\ny = 2')


@pytest.mark.parametrize("source", ["# BEGIN SOLUTION\nx = 1", "x = 1\n# END SOLUTION"])
def test_unbalanced_markers_are_an_error(source):
    with pytest.raises(ValueError, match="SOLUTION"):
        strip_solutions(source, 1)



def test_the_grader_runs_no_self_check_before_the_answer():
    """The cells the grader runs in the sandbox besides the student's answer (the context)
    never run a self-check: a demonstration that grades the paper's step (exercises 9 and
    10 show it failing) is tagged "demo", else every grade would pay for it (2-3 s of the
    child's CPU each, measured on exercise 10 before the tags)."""
    from percolator_ref.grading.grade.answers import plan
    context, checking = [], []
    for path in sorted((REPO / "exercises").glob("[0-9][0-9]_*.ipynb")):
        pristine = nbformat.read(path, as_version=4)
        cells, _ = plan(pristine, pristine, pristine.metadata["percolator"]["exercise"])
        context += [c.id for c in cells if c.kind == "context"]
        checking += [c.id for c in cells if c.kind == "context"
                     and ("grading.check(" in c.source or "self_check(" in c.source)]
    assert len(context) >= 5 and checking == []
