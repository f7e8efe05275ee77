"""The grading can fail: references pass, mutants die, unsolved exercises fail nbval."""
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from percolator_ref import grading
from percolator_ref.grading.nbgrade import restore_check_cells

REPO = Path(__file__).resolve().parents[1]
EXERCISES = sorted(grading.MODULES)


@pytest.mark.parametrize("n", EXERCISES)
def test_reference_passes_its_battery(n):
    ex = grading.exercise(n)
    report = ex.battery.run(ex.reference)
    assert report.passed, report.failures()
    assert str(report).endswith(f"{len(ex.battery)}/{len(ex.battery)} checks passed")


@pytest.mark.parametrize("n", EXERCISES)
def test_battery_kills_every_mutant(n, capsys):
    ex = grading.exercise(n)
    assert len(ex.mutants) >= 4, "each battery is proven against several wrong answers"
    survivors = [name for name, m in ex.mutants.items() if ex.battery.run(m).passed]
    with capsys.disabled():
        print(f"\nexercise {n}: {len(ex.battery)} checks, "
              f"{len(ex.mutants) - len(survivors)}/{len(ex.mutants)} mutants killed")
    assert survivors == []


@pytest.mark.parametrize("n", EXERCISES)
def test_report_is_deterministic(n):
    ex = grading.exercise(n)
    wrong = next(iter(ex.mutants.values()))
    assert str(ex.battery.run(wrong)) == str(ex.battery.run(wrong))


def test_a_raising_stub_fails_every_check():
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise 8")
    report = grading.check(8, stub)
    assert report.n_passed == 0
    assert "FAIL  a withdrawal covered by the total succeeds: NotImplementedError: Exercise 8" \
        in str(report)


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


def test_restoring_check_cells_undoes_edits_and_reports_deletions():
    pristine = nbformat.read(REPO / "exercises" / "08_write_skew.ipynb", as_version=4)
    edited = nbformat.read(REPO / "exercises" / "08_write_skew.ipynb", as_version=4)
    check = next(c for c in edited.cells if "check" in c.metadata.get("tags", []))
    check.source = "print('5/5 checks passed')"
    assert restore_check_cells(edited, pristine) == []
    assert edited.cells == pristine.cells
    edited.cells = [c for c in edited.cells if "check" not in c.metadata.get("tags", [])]
    assert restore_check_cells(edited, pristine) == [f"check cell {check.id} is missing"]


def test_grade_folder_writes_csv_and_fails_unsolved(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.ipynb").write_text((REPO / "solutions" / "08_write_skew.ipynb").read_text())
    tampered = nbformat.read(REPO / "exercises" / "08_write_skew.ipynb", as_version=4)
    for cell in tampered.cells:          # a student "passes" by printing the stored report
        if "check" in cell.metadata.get("tags", []):
            cell.source = "print(" + json.dumps(cell.outputs[0]["text"]) + ", end='')"
    nbformat.write(tampered, subs / "bob.ipynb")
    csv_path = tmp_path / "scores.csv"
    proc = subprocess.run([sys.executable, "-m", "percolator_ref", "grade", str(subs),
                           "--csv", str(csv_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("notebook,exercise,checks_passed,checks_total,score")
    assert rows[1].split(",")[1:5] == ["8", "5", "5", "1.000"]
    assert rows[2].split(",")[1:5] == ["8", "0", "5", "0.000"]
    assert "score: 0/5 checks (0%), FAILED" in proc.stdout
