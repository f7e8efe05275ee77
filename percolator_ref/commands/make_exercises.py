"""``percolator make-exercises``: generate exercises/ from solutions/ (or check they agree)."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "make-exercises", help="generate exercise notebooks from the solution notebooks",
        description="Replace every '# BEGIN SOLUTION' ... '# END SOLUTION' region of "
                    "solutions/NN_*.ipynb by a stub raising NotImplementedError and write "
                    "exercises/NN_*.ipynb (outputs are copied: they are the passing report).")
    p.add_argument("--solutions", default=str(REPO / "solutions"), help="solution notebooks folder")
    p.add_argument("--exercises", default=str(REPO / "exercises"), help="exercise notebooks folder")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if any exercise differs from what would be generated")
    p.set_defaults(func=run)


def run(args) -> int:
    from percolator_ref.grading.grade.generate import generate
    drift = generate(args.solutions, args.exercises, check=args.check)
    verb = "out of date" if args.check else "written"
    for name in drift:
        print(f"{verb}: {name}")
    if args.check and drift:
        print("run: percolator make-exercises")
        return 1
    print(f"{len(drift)} exercise notebook(s) {verb}" if drift else "exercises are up to date")
    return 0
