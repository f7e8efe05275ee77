"""CPU seconds of grading a solution sandboxed against its in-process self-check (issue 27 item 7).

For each chosen exercise, grades its solution's answer the way ``percolator grade``
does (the sandbox, every check, every schedule) and runs the same answer's
self-check in this process (the notebook's check cell), and prints both CPU
figures and their ratio:

    nice -n 10 .venv/bin/python tools/grade_cpu.py 1 5 8          # exercises 1, 5 and 8
    ... --repeat 3                                                 # the least of 3 runs each
    ... --profile prof.out                                         # cProfile of this process's
                                                                   # share of the sandboxed grades

The sandboxed figure is this process's CPU (the trusted world, in the grader)
plus the CPU of every process of the child's session: the child is closed
politely (its channel closed, then waited for) before the grader kills its
session, so that every process it forked has been reaped and its CPU counted
(``RUSAGE_CHILDREN``). A measurement under whatever load the machine has,
never asserted.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from percolator_ref import grading                             # noqa: E402
from percolator_ref.grading.sandbox import launcher            # noqa: E402
from percolator_ref.grading.grade.grader import Limits, grade  # noqa: E402
from percolator_ref.grading.judge.interactive import self_check  # noqa: E402
from grading_helpers import solution_answer, student_notebook  # noqa: E402


REPORTS: list = []
RECALLS: list = []
"""What each child's transcripts say (:mod:`percolator_ref.grading.sandbox.transcripts`)."""
"""What each child's report says its clients cost (processes forked, their CPU, the template's)."""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def close_politely(exit_):
    """``InteractiveChild.__exit__``, but first close the child's channel and let it end by
    itself (its forks reaped, so their CPU reaches ``RUSAGE_CHILDREN``)."""
    def polite(self, *exc):
        if self.pipes is not None:
            RECALLS.append(self.pipes.transcripts.figures())
        if self.proc is not None and self.proc.returncode is None:
            for fd in list(self.fds):
                os.close(fd)
                self.fds.remove(fd)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:
                REPORTS.append(json.loads((self.io / "result").read_text()).get("clients") or {})
            except (OSError, ValueError):
                pass
        return exit_(self, *exc)
    return polite


def sandboxed(n: int, answer: str, profiler=None) -> tuple:
    """``(cpu seconds: grader, child session; checks passed, total)`` of one grade."""
    with tempfile.TemporaryDirectory(prefix="grade-cpu-") as tmp:
        path = student_notebook(Path(tmp) / f"ex{n:02d}.ipynb", n, answer)
        own, kids = time.process_time(), children_cpu()
        if profiler:
            profiler.enable()
        g = grade(path, limits=Limits())
        if profiler:
            profiler.disable()
        own, kids = time.process_time() - own, children_cpu() - kids
    if g.problems:
        raise SystemExit(f"exercise {n}: {g.problems}")
    return own, kids, g.n_passed, g.total, _clients()


def _clients() -> str:
    """The children's reports since the last call: client processes, their CPU, the template's."""
    found, REPORTS[:] = list(REPORTS), []
    recalls, RECALLS[:] = list(RECALLS), []
    if not found or not any(found):
        return "no client processes (a thread per client)"
    return (f"{len(found)} children: {sum(r.get('processes', 0) for r in found)} client "
            f"processes, {sum(r.get('cpu', 0) for r in found):.2f} s in them, "
            f"{sum(r.get('template_cpu', 0) for r in found):.2f} s in the templates; "
            f"{sum(r['virtual'] for r in recalls)} clients ran with no process, "
            f"{sum(r['recalled'] for r in recalls)} messages recalled, "
            f"{sum(r['heard_again'] for r in recalls)} heard again")


def in_process(n: int, answer: str) -> tuple:
    """``(cpu seconds, checks passed, total)`` of the self-check in this process."""
    spec = grading.exercise(n).exercise
    namespace: dict = {}
    exec(compile(answer, "<answer>", "exec"), namespace)
    started = time.process_time()
    report = self_check(spec, namespace[spec.answer])
    cpu = time.process_time() - started
    return cpu, sum(r.passed for r in report.results), len(report.results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*", type=int, help="exercise numbers (default all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the least is kept")
    parser.add_argument("--profile", metavar="FILE", help="cProfile of this process's share")
    args = parser.parse_args()
    launcher.InteractiveChild.__exit__ = close_politely(launcher.InteractiveChild.__exit__)
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    numbers = args.exercises or sorted(grading.MODULES)
    print(f"{'ex':>3} {'self-check':>10} {'sandboxed':>10} {'grader':>8} {'child':>8} "
          f"{'ratio':>6}  checks")
    for n in numbers:
        answer = solution_answer(n)
        local = min(in_process(n, answer) for _ in range(args.repeat))
        runs = [sandboxed(n, answer, profiler) for _ in range(args.repeat)]
        own, kids, passed, total, clients = min(runs, key=lambda r: r[0] + r[1])
        print(f"{n:>3} {local[0]:>10.2f} {own + kids:>10.2f} {own:>8.2f} {kids:>8.2f} "
              f"{(own + kids) / local[0]:>6.2f}  {passed}/{total} sandboxed, "
              f"{local[1]}/{local[2]} self-check; {clients}", flush=True)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs)")
    if profiler:
        profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
