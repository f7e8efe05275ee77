"""``percolator grade``: grade exercise notebooks in a sandbox (one, or a folder to a CSV)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .arguments import Count

JOBS = Count(1, 64)
MEMORY = Count(64, 65_536)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "grade", help="grade students' exercise notebooks (answer cells only, in a sandbox)",
        description="Grade a submitted exercise notebook, or every *.ipynb under a folder. Only "
                    "the student's answer cells are taken; each notebook runs in its own "
                    "sandboxed process with time and memory limits, and the checks' verdicts "
                    "are computed outside it. Each check has its own time limit, set by its "
                    "exercise; a notebook's limit is their sum plus the time to start (an "
                    "answer that loops fails only the checks it loops in). Prints a per-check "
                    "report; exit status 1 when any notebook did not pass every check.")
    p.add_argument("path", nargs="?",
                   help="a notebook, a .zip, or a folder of submissions: each top-level "
                        "sub-folder, .zip or notebook in it is one student's submission, in which "
                        "only one notebook per exercise counts")
    p.add_argument("--exercise", type=int, metavar="N", default=None,
                   help="grade the assignment of exercise N: a notebook for another exercise "
                        "scores 0, with the reason")
    p.add_argument("--gradescope-autograder", metavar="OUT.zip", default=None,
                   help="write a complete Gradescope autograder for --exercise N (setup.sh, "
                        "run_autograder, the kit, pinned requirements) instead of grading")
    p.add_argument("--csv", metavar="FILE", help="write one row per notebook: student, one "
                   "column per check, total")
    p.add_argument("--gradescope", metavar="FILE",
                   help="write Gradescope's autograder results.json (one test per check) of "
                        "one student's submission; needs --exercise N")
    p.add_argument("-j", "--jobs", type=JOBS, default=1, metavar="N",
                   help=f"grade N notebooks in parallel, {JOBS} (default 1)")
    p.add_argument("--memory", type=MEMORY, default=1024, metavar="MB",
                   help=f"address-space limit of one notebook's process, {MEMORY} MB "
                        f"(default 1024)")
    p.add_argument("--exercises", metavar="DIR", default=None,
                   help="folder of the pristine exercise notebooks (default: the repo's exercises/)")
    p.add_argument("--counterexamples", metavar="DIR", default=None,
                   help="write each failing check's shortest failing schedule there as JSON "
                        "(step through one with `percolator replay FILE`)")
    p.set_defaults(func=run)


def _autograder(args) -> int:
    from percolator_ref.grading import MODULES
    from percolator_ref.grading.grade.gradescope import build_autograder
    if args.exercise not in MODULES:
        print(f"percolator grade: --gradescope-autograder needs --exercise N, N one of "
              f"{sorted(MODULES)}; got {args.exercise}", file=sys.stderr)
        return 2
    out = build_autograder(args.gradescope_autograder, args.exercise)
    print(f"wrote {out} (Gradescope autograder for exercise {args.exercise})")
    return 0


def _check_args(args):
    """The first problem with the arguments, or None."""
    from percolator_ref.grading import MODULES
    if args.path is None:
        return "give a PATH to grade (or --gradescope-autograder OUT.zip)"
    if not Path(args.path).exists():
        return f"path {args.path!r} does not exist"
    if args.exercise is not None and args.exercise not in MODULES:
        return f"--exercise must be one of {sorted(MODULES)}, got {args.exercise}"
    if args.jobs < 1:
        return f"-j/--jobs must be at least 1, got {args.jobs}"
    return _gradescope_problem(args)


def _gradescope_problem(args):
    """``--gradescope`` writes one student's results.json: refused for a class or no exercise."""
    from percolator_ref.grading.grade.submissions import entries
    if not args.gradescope:
        return None
    if args.exercise is None:
        return ("--gradescope writes one student's results.json for one assignment: give "
                "--exercise N (or build the autograder: --gradescope-autograder OUT.zip)")
    if Path(args.path).is_dir() and len(entries(Path(args.path))) > 1:
        return (f"--gradescope writes one student's results.json, and {args.path!r} holds "
                f"{len(entries(Path(args.path)))} submissions (one score summed over a class "
                f"is no one's): use --csv for a class, or --gradescope-autograder OUT.zip")
    return None


def run(args) -> int:
    from tqdm import tqdm

    from percolator_ref.grading.grade.grader import EXERCISES, Limits
    from percolator_ref.grading.grade.submissions import grade_submissions
    if args.gradescope_autograder:
        return _autograder(args)
    problem = _check_args(args)
    if problem:
        print(f"percolator grade: {problem}", file=sys.stderr)
        return 2
    path = Path(args.path)
    try:
        limits = Limits(memory_mb=args.memory)
    except ValueError as exc:
        print(f"percolator grade: {exc}", file=sys.stderr)
        return 2
    exercises = Path(args.exercises) if args.exercises else EXERCISES
    if not exercises.is_dir():
        print(f"percolator grade: --exercises {str(exercises)!r} is not a folder", file=sys.stderr)
        return 2
    with tqdm(desc="grading", unit="notebook", file=sys.stderr, disable=not path.is_dir()) as bar:
        grades = grade_submissions(path, exercises, limits, jobs=args.jobs, only=args.exercise,
                                   progress=bar)
    if not grades:
        print(f"percolator grade: no notebooks under {path}", file=sys.stderr)
        return 2
    return _report(args, grades)


def _report(args, grades) -> int:
    """Print every grade, write the CSV / results.json asked for; the exit status."""
    from percolator_ref.grading.grade.results import gradescope, write_csv
    for g in grades:
        print(g.summary())
    if args.csv:
        write_csv(grades, args.csv)
        print(f"wrote {args.csv} ({len(grades)} notebooks)")
    if args.gradescope:
        Path(args.gradescope).write_text(json.dumps(gradescope(grades), indent=2) + "\n")
        print(f"wrote {args.gradescope} (Gradescope results)")
    write_counterexamples(grades, args.counterexamples)
    counted = [g for g in grades if g.counted]
    if len(grades) > 1:
        print(f"{sum(g.passed for g in counted)}/{len(counted)} notebooks passed"
              + (f" ({len(grades) - len(counted)} not counted)" if len(counted) < len(grades) else ""))
    return 0 if all(g.passed for g in counted) and not any(g.flags for g in grades) else 1


def write_counterexamples(grades, folder) -> int:
    """One JSON file per failing check that found a failing schedule (``folder``: None, none);
    step through one with ``percolator replay FILE``."""
    from percolator_ref.grading.judge.replay import save
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
