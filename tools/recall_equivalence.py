"""Recall's equivalence run: every verdict is the same with and without it (issue 27 item 7).

Grades, sandboxed as ``percolator grade`` does, the solution and every wrong answer of
``tests/wrong_answers/`` for the chosen exercises, once with recall off
(``PERCOLATOR_RECALL=0``: every client incarnation is a process) and once on
(:mod:`percolator_ref.grading.sandbox.transcripts`), under one fixed secret, and
compares the results check by check: passed or not, and the feedback sentence. Prints,
per exercise, the client processes started and the grader's CPU seconds both ways;
exits 1 if any result differs.

    nice -n 10 .venv/bin/python tools/recall_equivalence.py          # every exercise (long)
    nice -n 10 .venv/bin/python tools/recall_equivalence.py 2 8      # exercises 2 and 8
    ... --first 2                                                     # the solution and 2 entries

CPU seconds are the grader's own (:attr:`Grade.cost`); the client processes' CPU is
``tools/grade_cpu.py``'s. A measurement under whatever load the machine has, never asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from percolator_ref import grading                                  # noqa: E402
from percolator_ref.grading.grade import grader                     # noqa: E402
from grading_helpers import load_catalogue, solution_answer, student_notebook  # noqa: E402

SWITCH = "PERCOLATOR_RECALL"
SECRET = 20261128


def grade_both(n: int, source: str, path: Path) -> tuple:
    """``(results off, results on, cost off, cost on)`` of one answer, one fixed secret."""
    path = student_notebook(path, n, source)
    out = []
    for switch in ("0", "1"):
        with mock.patch.dict(os.environ, {SWITCH: switch}), \
                mock.patch.object(grader.secrets, "randbits", lambda bits: SECRET):
            g = grader.grade(path)
        out.append(([(r.name, r.passed, r.reason) for r in g.checks] + g.problems, g.cost))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*", type=int, help="exercise numbers (default all)")
    parser.add_argument("--first", type=int, default=None,
                        help="only the solution and the first K catalogue entries")
    args = parser.parse_args()
    differ = 0
    print(f"{'ex':>3} {'answers':>7} {'processes off':>13} {'on':>6} {'cpu off':>8} {'on':>6}"
          f"  differ")
    for n in args.exercises or sorted(grading.MODULES):
        answers = [("solution", solution_answer(n)), *sorted(load_catalogue(n).items())]
        answers = answers[:None if args.first is None else args.first + 1]
        procs, cpu, bad = [0, 0], [0.0, 0.0], []
        with tempfile.TemporaryDirectory(prefix="recall-") as tmp:
            for k, (name, source) in enumerate(answers):
                off, on, cost_off, cost_on = grade_both(n, source, Path(tmp) / f"{k}.ipynb")
                for k, cost in enumerate((cost_off, cost_on)):
                    procs[k] += cost.get("processes", 0)
                    cpu[k] += cost.get("cpu", 0.0)
                if off != on or any("grader error" in str(r) for r in off + on):
                    bad.append(name)
                    print(f"    {name}: off {off}\n    {name}: on  {on}", flush=True)
        differ += len(bad)
        print(f"{n:>3} {len(answers):>7} {procs[0]:>13} {procs[1]:>6} {cpu[0]:>8.1f} "
              f"{cpu[1]:>6.1f}  {', '.join(bad) or '-'}", flush=True)
    print("every result is the same with and without recall" if not differ
          else f"{differ} answers graded differently")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
