"""``percolator grade``: grade exercise notebooks in a sandbox (one, or a folder to a CSV)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "grade", help="grade students' exercise notebooks (answer cells only, in a sandbox)",
        description="Grade a submitted exercise notebook, or every *.ipynb under a folder. Only "
                    "the student's answer cells are taken; each notebook runs in its own "
                    "sandboxed process with time and memory limits, and the checks' verdicts "
                    "are computed outside it. Prints a per-check report; exit status 1 when "
                    "any notebook did not pass every check.")
    p.add_argument("path", help="a notebook, or a folder of submissions (searched recursively)")
    p.add_argument("--csv", metavar="FILE", help="write one row per notebook: student, one "
                   "column per check, total")
    p.add_argument("--gradescope", metavar="FILE",
                   help="write Gradescope's autograder results.json (one test per check)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                   help="grade N notebooks in parallel (default 1)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="wall-time limit for one notebook (default 60)")
    p.add_argument("--scenario-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="wall-time limit for one check's scenario (default 10)")
    p.add_argument("--memory", type=int, default=1024, metavar="MB",
                   help="address-space limit of one notebook's process (default 1024)")
    p.add_argument("--exercises", metavar="DIR", default=None,
                   help="folder of the pristine exercise notebooks (default: the repo's exercises/)")
    p.add_argument("--counterexamples", metavar="DIR", default=None,
                   help="write each failing check's shortest failing schedule there as JSON "
                        "(step through one with `percolator replay FILE`)")
    p.set_defaults(func=run)


def _paths(path: Path):
    if path.is_dir():
        return sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return [path] if path.is_file() else None


def run(args) -> int:
    from tqdm import tqdm

    from percolator_ref.grading.grader import EXERCISES, Limits, grade_all, write_csv
    path = Path(args.path)
    paths = _paths(path)
    if paths is None:
        print(f"percolator grade: path {str(path)!r} does not exist", file=sys.stderr)
        return 2
    if not paths:
        print(f"percolator grade: no notebooks under {path}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"percolator grade: -j/--jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    try:
        limits = Limits(timeout=args.timeout, scenario_timeout=args.scenario_timeout,
                        memory_mb=args.memory)
    except ValueError as exc:
        print(f"percolator grade: {exc}", file=sys.stderr)
        return 2
    exercises = Path(args.exercises) if args.exercises else EXERCISES
    if not exercises.is_dir():
        print(f"percolator grade: --exercises {str(exercises)!r} is not a folder", file=sys.stderr)
        return 2
    with tqdm(total=len(paths), desc="grading", unit="notebook", file=sys.stderr,
              disable=len(paths) == 1) as bar:
        grades = grade_all(paths, exercises, limits, jobs=args.jobs,
                           folder=path if path.is_dir() else None, progress=bar)
    for g in grades:
        print(g.summary())
    if args.csv:
        write_csv(grades, args.csv)
        print(f"wrote {args.csv} ({len(grades)} notebooks)")
    write_counterexamples(grades, args.counterexamples)
    write_gradescope(grades, args.gradescope)
    if len(grades) > 1:
        print(f"{sum(g.passed for g in grades)}/{len(grades)} notebooks passed")
    return 0 if all(g.passed for g in grades) else 1


def write_gradescope(grades, path) -> None:
    """Gradescope's results.json (``path``: None, nothing)."""
    from percolator_ref.grading.grader import gradescope
    if path:
        Path(path).write_text(json.dumps(gradescope(grades), indent=2) + "\n")
        print(f"wrote {path} (Gradescope results)")


def write_counterexamples(grades, folder) -> int:
    """One JSON file per failing check that found a failing schedule (``folder``: None, none)."""
    from percolator_ref.grading.replay import save
    if not folder:
        return 0
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for i, g in enumerate(grades):
        stem = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in g.student)[:60]
        for k, r in enumerate(g.checks):
            if r.counterexample:
                save(r.counterexample, folder / f"{i:03d}-{stem}-ex{g.exercise}-check{k + 1}.json")
                written += 1
    print(f"wrote {written} counterexamples to {folder}")
    return written
