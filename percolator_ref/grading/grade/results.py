"""A class's grades as files: the CSV for any gradebook and Gradescope's ``results.json``.

Every cell a notebook controls is escaped (:func:`.feedback.escape_text`), and
a CSV cell a spreadsheet would run as a formula is quoted.
"""
from __future__ import annotations

import csv
from pathlib import Path

from .feedback import escape_text


def _cell(text) -> str:
    """A CSV cell a spreadsheet will not run as a formula, control characters escaped."""
    text = escape_text(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def check_columns(grades) -> list:
    """``(exercise, check name)`` in first-seen order: one CSV column each."""
    columns = []
    for g in grades:
        for r in g.checks:
            if (g.exercise, r.name) not in columns:
                columns.append((g.exercise, r.name))
    return columns


def write_csv(grades, file) -> None:
    """student, notebook, exercise, one 0/1 column per check, passed, total, score, problems."""
    columns = check_columns(grades)
    several = len({n for n, _ in columns}) > 1
    with open(file, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "exercise"]
                   + [f"ex{n}: {name}" if several else name for n, name in columns]
                   + ["checks_passed", "checks_total", "score", "problems", "submission",
                      "counted", "flags"])
        for g in grades:
            outcome = {(g.exercise, r.name): int(r.passed) for r in g.checks}
            w.writerow([_cell(g.student), _cell(g.path), g.exercise]
                       + [outcome.get(c, "") for c in columns]
                       + [g.n_passed, g.total, f"{g.score:.3f}", _cell("; ".join(g.problems)),
                          _cell(g.submission), "yes" if g.counted else "no",
                          _cell("; ".join(g.flags))])


def gradescope(grades) -> dict:
    """Gradescope's autograder ``results.json``: one test per check, 1 point each."""
    tests = []
    for g in grades:
        prefix = escape_text(f"{Path(g.path).name}: ") if len(grades) > 1 else ""
        for r in g.checks:
            tests.append({"name": f"{prefix}{r.name}", "score": float(r.passed), "max_score": 1.0,
                          "status": "passed" if r.passed else "failed",
                          "output": "" if r.passed else escape_text(r.reason, newlines=True),
                          "visibility": "visible"})
        if not g.checks:
            tests.append({"name": f"{prefix}notebook", "score": 0.0,
                          "max_score": 1.0 if g.counted else 0.0, "status": "failed",
                          "output": escape_text("; ".join(g.problems + g.flags) or "not graded",
                                                newlines=True), "visibility": "visible"})
    output = "\n\n".join(g.summary() for g in grades)
    return {"score": float(sum(t["score"] for t in tests)), "output": output,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
