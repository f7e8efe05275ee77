"""``percolator grade``: grade exercise notebooks through nbval (one, or a folder to a CSV)."""
from __future__ import annotations

import csv
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "grade", help="grade a student's exercise notebook (or a folder of them) through nbval",
        description="Run a submitted exercise notebook through nbval with the original check "
                    "cells restored; print a per-check summary and a score. Exit status 1 when "
                    "anything fails. With a folder, grade every *.ipynb under it.")
    p.add_argument("path", help="a notebook, or a folder of submissions")
    p.add_argument("--csv", metavar="FILE", help="write one row of scores per notebook")
    p.add_argument("--exercises", metavar="DIR", default=None,
                   help="folder of the pristine exercise notebooks (default: the repo's exercises/)")
    p.set_defaults(func=run)


def run(args) -> int:
    from tqdm import tqdm

    from percolator_ref.grading.nbgrade import EXERCISES, grade
    path = Path(args.path)
    exercises = Path(args.exercises) if args.exercises else EXERCISES
    if path.is_dir():
        paths = sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    elif path.is_file():
        paths = [path]
    else:
        print(f"percolator grade: path {str(path)!r} does not exist", file=sys.stderr)
        return 2
    if not paths:
        print(f"percolator grade: no notebooks under {path}", file=sys.stderr)
        return 2
    grades = []
    for p in tqdm(paths, desc="grading", unit="notebook", file=sys.stderr, disable=len(paths) == 1):
        g = grade(p, exercises)
        grades.append(g)
        print(g.summary())
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["notebook", "exercise", "checks_passed", "checks_total", "score",
                        "nbval", "passed", "problems"])
            for g in grades:
                w.writerow([g.path, g.exercise, g.n_passed, g.total, f"{g.score:.3f}",
                            g.nbval_summary, g.passed, "; ".join(g.problems)])
        print(f"wrote {args.csv} ({len(grades)} notebooks)")
    if len(grades) > 1:
        print(f"{sum(g.passed for g in grades)}/{len(grades)} notebooks passed")
    return 0 if all(g.passed for g in grades) else 1
