"""``percolator grade-bench``: how long grading a class takes (issue 19's benchmark).

It writes N notebooks per exercise (default 25: the solution's answer and the
wrong answers of ``tests/wrong_answers``, mixed), grades them all as
``percolator grade DIR -j J`` does (the sandbox, every check, every schedule),
checks that every right one passed and every wrong one failed, and prints the
wall time with the machine's load average (the figure is only comparable on
an idle machine).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

from .arguments import Count

PER_EXERCISE = Count(1, 1_000)
JOBS = Count(1, 64)
REPO = Path(__file__).resolve().parents[2]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "grade-bench", help="time grading N right and wrong notebooks per exercise with -j J",
        description=__doc__.splitlines()[0] + " Exit status 1 if a right notebook failed or a "
                    "wrong one passed.")
    p.add_argument("--per-exercise", type=PER_EXERCISE, default=25, metavar="N",
                   help=f"notebooks per exercise, {PER_EXERCISE} (default 25)")
    p.add_argument("-j", "--jobs", type=JOBS, default=2, metavar="J",
                   help=f"notebooks graded in parallel, {JOBS} (default 2)")
    p.add_argument("--catalogue", metavar="DIR", default=str(REPO / "tests" / "wrong_answers"),
                   help="folder of the wrong answers, exNN_*.py each with a WRONG dict "
                        "(default: the repo's tests/wrong_answers)")
    p.set_defaults(func=run)


def wrong_answers(folder: Path, n: int) -> list:
    """``[(name, answer cell)]`` of exercise ``n``'s catalogue, sorted by name."""
    paths = sorted(folder.glob(f"ex{n:02d}_*.py"))
    if not paths:
        return []
    spec = importlib.util.spec_from_file_location(f"grade_bench_wrong_{n:02d}", paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return sorted(module.WRONG.items())


def solution_answer(n: int) -> str:
    """The solution notebook's answer cell, its BEGIN/END markers removed."""
    import nbformat

    from percolator_ref.grading.grade.generate import BEGIN, END
    path = next((REPO / "solutions").glob(f"{n:02d}_*.ipynb"))
    cell = next(c.source for c in nbformat.read(path, as_version=4).cells
                if c.cell_type == "code" and BEGIN in c.source)
    return "\n".join(line for line in cell.splitlines() if line.strip() not in (BEGIN, END))


def write_notebook(path: Path, n: int, answer: str, student: str) -> None:
    """The pristine exercise ``n`` with its answer cell holding ``answer``."""
    import nbformat

    from percolator_ref.grading.grade.answers import answer_cell_ids
    from percolator_ref.grading.grade.grader import EXERCISES
    nb = nbformat.read(next(EXERCISES.glob(f"{n:02d}_*.ipynb")), as_version=4)
    ids = answer_cell_ids(nb, n)
    for cell in nb.cells:
        if cell.get("id") in ids:
            cell.source, cell.outputs = answer, []
    nb.metadata.setdefault("percolator", {})["student"] = student
    nbformat.write(nb, path)


def make_class(folder: Path, catalogue: Path, per_exercise: int) -> dict:
    """Write the notebooks; ``{path: True if right}``. Odd places hold wrong answers,
    taken in turn from the catalogue (all right where an exercise has none)."""
    from percolator_ref.grading import MODULES
    expected = {}
    for n in sorted(MODULES):
        right, wrong = solution_answer(n), wrong_answers(catalogue, n)
        for k in range(per_exercise):
            is_right = not wrong or k % 2 == 0
            name, answer = ("solution", right) if is_right else wrong[(k // 2) % len(wrong)]
            path = folder / f"ex{n:02d}-{k:03d}.ipynb"
            write_notebook(path, n, answer, f"ex{n:02d}-{k:03d} {name[:40]}")
            expected[path] = is_right
    return expected


def cost_table(paths: list, grades: list) -> str:
    """Per exercise: notebooks, schedules run, the grader's CPU seconds, client processes
    started, clients that ran with no process and messages recalled (:attr:`Grade.cost`;
    the client processes' own CPU is not counted here: ``tools/grade_cpu.py`` does)."""
    rows = {}
    for path, g in zip(paths, grades):
        row = rows.setdefault(int(path.name[2:4]), [0, 0, 0.0, 0, 0, 0])
        c = g.cost
        for k, v in enumerate((1, c.get("schedules", 0), c.get("cpu", 0.0), c.get("processes", 0),
                               c.get("virtual", 0), c.get("recalled", 0))):
            row[k] += v
    lines = [f"{'ex':>3} {'notebooks':>9} {'schedules':>9} {'grader cpu s':>12} "
             f"{'processes':>9} {'no process':>10} {'recalled':>9}"]
    for n, (count, runs, cpu, procs, virtual, recalled) in sorted(rows.items()):
        lines.append(f"{n:>3} {count:>9} {runs:>9} {cpu:>12.1f} {procs:>9} {virtual:>10} "
                     f"{recalled:>9}")
    return "\n".join(lines)


def run(args) -> int:
    from tqdm import tqdm

    from percolator_ref.grading.grade.grader import grade_all
    catalogue = Path(args.catalogue)
    if not catalogue.is_dir():
        print(f"percolator grade-bench: --catalogue {str(catalogue)!r} is not a folder",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="grade-bench-") as tmp:
        expected = make_class(Path(tmp), catalogue, args.per_exercise)
        paths = sorted(expected)
        load_before = os.getloadavg()
        started = time.perf_counter()
        with tqdm(total=len(paths), desc="grading", unit="notebook", file=sys.stderr) as bar:
            grades = grade_all(paths, jobs=args.jobs, folder=Path(tmp), progress=bar)
        seconds = time.perf_counter() - started
        wrong = [(p.name, g.summary().splitlines()[0]) for p, g in zip(paths, grades)
                 if g.passed != expected[p] or g.problems]
    rights = sum(expected.values())
    print(f"graded {len(paths)} notebooks ({rights} right, {len(paths) - rights} wrong) with "
          f"-j {args.jobs} in {seconds:.1f} s ({seconds / 60:.1f} min)")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    print(cost_table(paths, grades))
    for name, line in wrong:
        print(f"UNEXPECTED  {name}: {line}")
    print("every right notebook passed and every wrong one failed" if not wrong
          else f"{len(wrong)} notebooks graded unexpectedly")
    return 0 if not wrong else 1
