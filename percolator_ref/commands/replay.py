"""``percolator replay FILE``: step through a grading counterexample in the terminal."""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "replay", help="print a grading counterexample step by step, with the cells after each",
        description="Print the shortest failing schedule a grading check found (a JSON file "
                    "written by `percolator grade --counterexamples DIR`): which client did "
                    "which row transaction, and the cells after it.")
    p.add_argument("file", help="a counterexample file (*.json)")
    p.set_defaults(func=run)


def run(args) -> int:
    from percolator_ref.grading.judge.replay import replay
    try:
        shown = replay(args.file)
    except (OSError, ValueError) as exc:
        print(f"percolator replay: file {args.file!r}: {exc}", file=sys.stderr)
        return 2
    print(shown.transcript())
    return 0
