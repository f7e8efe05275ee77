"""The partial-order reduction's equivalence run (issue 27 item 6).

Self-checks every catalogue entry of the chosen exercises (the solution and each wrong
answer of tests/wrong_answers/) with the reduction off (``PERCOLATOR_POR=0``) and on,
and compares the verdicts check by check. Prints, per family (one ``trial.explore``
of one check), the schedules run and the CPU seconds summed over the entries, both ways;
exits 1 if any verdict differs.

    nice -n 10 .venv/bin/python tools/por_equivalence.py            # every exercise (long)
    nice -n 10 .venv/bin/python tools/por_equivalence.py 1 8        # exercises 1 and 8
    ... --json out.json                                              # the rows, for a report

CPU seconds are this process's (the self-check runs the student's clients in its
threads): a measurement under whatever load the machine has, never asserted.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from percolator_ref import grading                          # noqa: E402
from percolator_ref.grading.judge import interactive              # noqa: E402
from percolator_ref.grading.judge.interactive import self_check   # noqa: E402
from grading_helpers import load_catalogue, solution_answer  # noqa: E402

SWITCH = "PERCOLATOR_POR"


def entries(n: int) -> dict:
    return {"solution": solution_answer(n), **load_catalogue(n)}


def run_entry(n: int, source: str, reduce: bool, families: dict) -> list:
    """Self-check ``source`` with the reduction on or off; ``[(check, passed)]``. Adds each
    family's ``[runs, asleep, merged, cpu]`` to ``families[(check, k)]``."""
    spec = grading.exercise(n).exercise
    namespace: dict = {}
    exec(compile(source, "<answer>", "exec"), namespace)
    impl = namespace[spec.answer]
    real = interactive.explore
    current = {"check": None, "k": 0}
    real_run_trusted = interactive.run_trusted

    def run_trusted(check, *args, **kwargs):
        current["check"], current["k"] = check.name, 0
        return real_run_trusted(check, *args, **kwargs)

    def explore(run, *args, **kwargs):
        started = time.process_time()
        outcome = real(run, *args, **kwargs)
        row = families[(current["check"], current["k"])]
        row[0] += outcome.runs
        row[1] += outcome.asleep
        row[2] += outcome.merged
        row[3] += time.process_time() - started
        current["k"] += 1
        return outcome

    os.environ[SWITCH] = "1" if reduce else "0"
    with mock.patch.object(interactive, "explore", explore), \
            mock.patch.object(interactive, "run_trusted", run_trusted):
        report = self_check(spec, impl)
    return [(r.name, r.passed) for r in report.results]


def table(n: int, rows: list, count: int, totals) -> None:
    """Exercise ``n``'s families: schedules run and CPU seconds, before and after."""
    print(f"\n{'ex':>2} {'family (check, #)':58} {'runs before':>11} {'after':>6} "
          f"{'CPU s before':>12} {'after':>6}")
    for r in rows:
        print(f"{r['exercise']:2d} {(r['check'][:54] + ' #' + str(r['family'])):58} "
              f"{r['runs_before']:11d} {r['runs_after']:6d} {r['cpu_before']:12.1f} "
              f"{r['cpu_after']:6.1f}")
    print(f"exercise {n}: {count} entries, schedules {sum(r['runs_before'] for r in rows)}"
          f" -> {sum(r['runs_after'] for r in rows)}, CPU (whole self-checks) "
          f"{totals[(n, 'before')]:.1f} s -> {totals[(n, 'after')]:.1f} s\n", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*", type=int, help="default: every exercise")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    numbers = args.exercises or sorted(grading.MODULES)
    rows, differ, totals = [], [], collections.Counter()
    for n in numbers:
        off, on = collections.defaultdict(lambda: [0, 0, 0, 0.0]), \
            collections.defaultdict(lambda: [0, 0, 0, 0.0])
        cpu = {False: 0.0, True: 0.0}
        named = entries(n)
        for name, source in named.items():
            verdicts = {}
            for reduce, families in ((False, off), (True, on)):
                started = time.process_time()
                verdicts[reduce] = run_entry(n, source, reduce, families)
                cpu[reduce] += time.process_time() - started
            if verdicts[False] != verdicts[True]:
                differ.append((n, name, verdicts[False], verdicts[True]))
            print(f"ex{n:02d} {name[:60]:60s} "
                  f"{'same' if verdicts[False] == verdicts[True] else 'DIFFERENT'} "
                  f"{sum(p for _, p in verdicts[True])}/{len(verdicts[True])}", flush=True)
        for key in off:
            b, a = off[key], on[key]
            rows.append({"exercise": n, "check": key[0], "family": key[1], "entries": len(named),
                         "runs_before": b[0], "runs_after": a[0], "asleep_after": a[1],
                         "merged_before": b[2], "merged_after": a[2],
                         "cpu_before": round(b[3], 2), "cpu_after": round(a[3], 2)})
        totals[(n, "before")] += cpu[False]
        totals[(n, "after")] += cpu[True]
        table(n, [r for r in rows if r["exercise"] == n], len(named), totals)
        if args.json:                       # after each exercise: a cut-short run keeps them
            Path(args.json).write_text(json.dumps({"rows": rows, "differ": differ,
                                                   "done": numbers[:numbers.index(n) + 1]},
                                                  indent=1))
    for n, name, before, after in differ:
        print(f"VERDICTS DIFFER: exercise {n} {name}: {before} vs {after}")
    print("verdicts: " + ("identical" if not differ else f"{len(differ)} entries differ"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
