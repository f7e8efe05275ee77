"""Grade a student's exercise notebook through nbval.

1. Read the notebook; its ``metadata.percolator.exercise`` names the exercise.
2. Put the pristine check cells back (matched by cell id, from the instructor's
   ``exercises/`` copy), so editing a check cell changes nothing; a missing
   check cell is reported and fails the notebook.
3. Run ``python -m pytest --nbval -p no:cacheprovider`` on that copy in a
   temporary folder, with ``PERCOLATOR_GRADE_LOG`` set so each battery run
   logs its per-check results.
4. Score = checks passed / checks in the battery (a battery that never ran
   scores 0); the notebook passes when nbval passes and every check passes.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import battery as battery_of
from .battery import GRADE_LOG_ENV
from .generate import exercise_number

REPO = Path(__file__).resolve().parents[2]
EXERCISES = REPO / "exercises"


@dataclass
class Grade:
    path: str
    exercise: int = 0
    checks: list = field(default_factory=list)      # [(name, passed, reason)]
    total: int = 0
    nbval_passed: bool = False
    nbval_summary: str = ""
    problems: list = field(default_factory=list)

    @property
    def n_passed(self) -> int:
        return sum(1 for _, ok, _ in self.checks if ok)

    @property
    def score(self) -> float:
        return self.n_passed / self.total if self.total else 0.0

    @property
    def passed(self) -> bool:
        return self.nbval_passed and self.total > 0 and self.n_passed == self.total \
            and not self.problems

    def summary(self) -> str:
        lines = [f"{self.path}: exercise {self.exercise}"]
        lines += [f"  problem: {p}" for p in self.problems]
        lines += [f"  {'PASS' if ok else 'FAIL'}  {name}" + ("" if ok else f": {reason}")
                  for name, ok, reason in self.checks]
        lines.append(f"  nbval: {self.nbval_summary}")
        lines.append(f"  score: {self.n_passed}/{self.total} checks ({self.score:.0%}), "
                     f"{'PASSED' if self.passed else 'FAILED'}")
        return "\n".join(lines)


def _pristine(n: int, exercises_dir: Path):
    matches = sorted(Path(exercises_dir).glob(f"{n:02d}_*.ipynb"))
    if not matches:
        raise FileNotFoundError(f"no exercises/{n:02d}_*.ipynb in {exercises_dir}")
    return nbformat.read(matches[0], as_version=4)


def restore_check_cells(nb, pristine) -> list:
    """Replace the notebook's check cells by the pristine ones (by id); return problems."""
    problems = []
    by_id = {c.get("id"): i for i, c in enumerate(nb.cells)}
    for cell in pristine.cells:
        if "check" not in cell.get("metadata", {}).get("tags", []):
            continue
        i = by_id.get(cell.get("id"))
        if i is None:
            problems.append(f"check cell {cell.get('id')} is missing")
        else:
            nb.cells[i] = nbformat.from_dict(json.loads(json.dumps(cell)))
    return problems


def grade(path, exercises_dir=EXERCISES, timeout: int = 300) -> Grade:
    """Grade one notebook (never raises for a student's mistake)."""
    path = Path(path)
    result = Grade(str(path))
    try:
        nb = nbformat.read(path, as_version=4)
        result.exercise = exercise_number(nb)
        result.total = len(battery_of(result.exercise))
        result.problems += restore_check_cells(nb, _pristine(result.exercise, exercises_dir))
    except Exception as exc:      # noqa: BLE001 - unreadable submission: score 0
        result.problems.append(f"{type(exc).__name__}: {exc}")
        result.nbval_summary = "not run"
        return result
    with tempfile.TemporaryDirectory(prefix="percolator-grade-") as tmp:
        copy, log = Path(tmp) / path.name, Path(tmp) / "checks.jsonl"
        nbformat.write(nb, copy)
        env = dict(os.environ, **{GRADE_LOG_ENV: str(log)})
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
             "-p", "no:cacheprovider", "-q", "-o", "addopts=", copy.name],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        result.nbval_passed = proc.returncode == 0
        tail = [l for l in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
        summary = tail[-1].strip("= ") if tail else f"exit {proc.returncode}"
        result.nbval_summary = re.sub(r" in [\d.]+s.*$", "", summary)   # cells, not seconds
        runs = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
    runs = [r for r in runs if r["exercise"] == result.exercise]
    if runs:
        result.checks = [(r["name"], r["passed"], r["reason"]) for r in runs[-1]["results"]]
    else:
        result.problems.append("the check cell never ran its battery")
    return result
