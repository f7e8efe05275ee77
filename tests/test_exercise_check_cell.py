"""An unsolved exercise looks unsolved, and its check reads as a report (issue 28, item 3).

The committed exercise shows no passing report; nbval still fails the unsolved exercise (its
check cell raises) and passes it once the solution's answer is in; the failure is the printed
report plus one short line, not an AssertionError repeating every reason.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from percolator_ref.grading.battery import ChecksFailed, Report, Result
from grading_helpers import pristine_path, solution_answer, student_notebook

REPO = Path(__file__).resolve().parents[1]
EXERCISES = sorted((REPO / "exercises").glob("[0-9][0-9]_*.ipynb"))
ALL_PASSED = re.compile(r"\b(\d+)/\1 checks passed")


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_no_committed_exercise_shows_a_passing_report(path):
    nb = nbformat.read(path, as_version=4)
    shown = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert not ALL_PASSED.search(shown), path.name
    assert "checks passed" not in shown, path.name


def nbval(path: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
         "-q", "-o", "addopts=", "-n", "0", str(path)],
        cwd=path.parent, capture_output=True, text=True, timeout=600)
    done.stdout = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)      # nbval's colours
    return done


def test_nbval_fails_the_unsolved_exercise_at_its_check_with_a_short_line(tmp_path):
    unsolved = tmp_path / "01_unsolved.ipynb"
    unsolved.write_text(pristine_path(1).read_text())
    done = nbval(unsolved)
    assert done.returncode == 1, done.stdout[-3000:]
    assert re.search(r"ChecksFailed: exercise 1: 17 of 17 checks failed \(the FAIL lines above say why\)",
                     done.stdout), done.stdout[-3000:]
    assert "AssertionError" not in done.stdout


def test_the_unsolved_check_cell_shows_the_report_once_and_one_short_error(tmp_path):
    """What the student sees: run the unsolved exercise as Lab would (errors kept)."""
    from nbclient import NotebookClient
    nb = nbformat.read(pristine_path(1), as_version=4)
    NotebookClient(nb, timeout=300, allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    check = next(c for c in nb.cells if "check" in c.metadata.get("tags", []))
    text = "".join(o.get("text", "") for o in check.outputs if o.output_type == "stream")
    errors = [o for o in check.outputs if o.output_type == "error"]
    assert text.startswith("Exercise 1:") and text.count("  FAIL  ") == 17, text[:2000]
    assert "0/17 checks passed" in text
    assert [(e.ename, e.evalue) for e in errors] == [
        ("ChecksFailed", "exercise 1: 17 of 17 checks failed (the FAIL lines above say why)")]
    # each reason is read once, in the report (the old AssertionError repeated all 17)
    reason = "a cell never written reads as absent: "
    shown = text + "".join(errors[0].traceback)
    assert shown.count(reason) == 1


def test_nbval_passes_the_exercise_once_the_solutions_answer_is_in(tmp_path):
    solved = student_notebook(tmp_path / "01_solved.ipynb", 1, solution_answer(1))
    done = nbval(solved)
    assert done.returncode == 0, done.stdout[-3000:]


def test_raise_if_failed_is_one_line_and_silent_when_all_pass():
    ok = Report(1, "t", [Result("a", True), Result("b", True)])
    ok.raise_if_failed()
    bad = Report(1, "t", [Result("a", True), Result("b", False, "reason " * 50),
                          Result("c", False, "other")])
    with pytest.raises(ChecksFailed) as caught:
        bad.raise_if_failed()
    assert str(caught.value) == "exercise 1: 2 of 3 checks failed (the FAIL lines above say why)"
    with pytest.raises(ChecksFailed, match="no check ran"):
        Report(1, "t", []).raise_if_failed()
