"""``percolator grade``'s engine: one sandboxed child per notebook, verdicts in this process.

For each notebook: read it (never execute it), find its exercise from
``metadata.percolator.exercise``, take the pristine ``exercises/NN_*.ipynb``,
keep only the student's answer cells (:mod:`.answers`), reject a syntax error
or a step the answer does not define itself, draw a secret, compute each
check's parameters from it, start a fresh sandboxed child (:mod:`..sandbox.child`)
whose student clients the trusted worlds of the checks serve here
(:mod:`..judge.interactive`, :mod:`..judge.trusted`).

The child's read policy is :mod:`..sandbox.policy`'s, its process :mod:`..sandbox.launcher`'s;
the CSV and Gradescope files are :mod:`.results`'.

Nothing a notebook does can stop a bulk run: a child that times out, exits,
crashes, exhausts its memory or answers garbage scores 0 with the reason, and
its whole session is killed before the next notebook's grade is returned.
"""
from __future__ import annotations

import multiprocessing
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .. import exercise as exercise_module
from .answers import check_answer_name, plan, static_problems, syntax_problems
from ..battery import Result
from .feedback import escape_text, indent_lines, unreadable
from ..framework import spec_of
from .generate import exercise_number
from ..judge.interactive import run_trusted
from ..sandbox.launcher import GRACE_SECONDS, MB, NOT_RUN, SETUP_SECONDS, InteractiveChild, Limits
from ..sandbox.policy import ROOT, private_roots, read_policy
from .results import gradescope, write_csv  # noqa: F401 - re-exported (gradescope.py)

EXERCISES = ROOT / "exercises"
MAX_NOTEBOOK_MB = 20


@dataclass
class Grade:
    """One notebook's grade: a Result per check, and why anything was not run."""
    path: str
    student: str
    exercise: int = 0
    title: str = ""
    checks: list = field(default_factory=list)
    total: int = 0
    problems: list = field(default_factory=list)
    sandbox: str = ""
    submission: str = ""          # the student's folder, zip or notebook (:mod:`.submissions`)
    counted: bool = True          # False: another notebook counts for this exercise
    flags: list = field(default_factory=list)     # e.g. a duplicate student name
    cost: dict = field(default_factory=dict, compare=False)   # what grading it took (:func:`grade`)

    @property
    def n_passed(self) -> int:
        return sum(r.passed for r in self.checks)

    @property
    def score(self) -> float:
        return self.n_passed / self.total if self.total else 0.0

    @property
    def passed(self) -> bool:
        return self.total > 0 and self.n_passed == self.total and not self.problems

    def summary(self) -> str:
        """The terminal report; text a notebook controls is escaped (:func:`.escape_text`)."""
        lines = [f"{escape_text(self.path)} ({escape_text(self.student)}): exercise {self.exercise}"
                 + (f", {self.title}" if self.title else "")]
        lines += [f"  problem: {indent_lines(p, '    | ')}" for p in self.problems]
        lines += [f"  flag: {escape_text(f)}" for f in self.flags]
        lines += [f"  PASS  {r.name}" if r.passed else
                  f"  FAIL  {r.name}: {indent_lines(r.reason, '        | ')}" for r in self.checks]
        lines.append(f"  score: {self.n_passed}/{self.total} checks ({self.score:.0%}), "
                     f"{'PASSED' if self.passed else 'FAILED'}")
        return "\n".join(lines)


def student_name(nb, path: Path, folder) -> str:
    """``metadata.percolator.student`` if set, else the path below ``folder`` without .ipynb."""
    meta = nb.get("metadata", {}).get("percolator", {}) if nb is not None else {}
    name = meta.get("student") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name.strip():
        try:
            name = str(path.relative_to(folder).with_suffix("")) if folder else path.stem
        except ValueError:
            name = path.stem
    name = "".join(ch for ch in name if ch.isprintable())[:100].strip()
    return name or path.stem


def pristine(n: int, exercises_dir) -> "nbformat.NotebookNode":
    matches = sorted(Path(exercises_dir).glob(f"{n:02d}_*.ipynb"))
    if not matches:
        raise FileNotFoundError(f"no {n:02d}_*.ipynb in the pristine exercises {exercises_dir}")
    return nbformat.read(matches[0], as_version=4)


def grade(path, exercises_dir=EXERCISES, limits: Limits = Limits(), folder=None,
          others=()) -> Grade:
    """Grade one notebook; never raises for anything the notebook holds or does."""
    path = Path(path)
    others = tuple(others) + (str(path.resolve()),)
    with PREPARE:                 # one notebook read at a time; the children run in parallel
        g, spec, cells = prepare(path, exercises_dir, folder)
    if spec is None:
        return g
    params = spec.params(secrets.randbits(63))
    info: dict = {}
    started = time.process_time()
    try:
        g.checks = grade_interactive(_job(g.exercise, spec, cells, exercises_dir, others),
                                     spec, params, limits, info)
    except Exception as exc:     # noqa: BLE001 - the grader's fault: the row still names its student
        return _all_fail(g, spec, [f"grader error: {type(exc).__name__}: {exc}"[:300]], "")
    g.sandbox = info.get("sandbox", "")
    g.cost = dict(info.get("recall", {}), cpu=time.process_time() - started,
                  schedules=sum(r.runs for r in g.checks))
    g.problems += sorted({r.reason for r in g.checks if r.reason.startswith(NOT_RUN)})
    return g


PREPARE = threading.Lock()
"""Reading, validating and planning a notebook (nbformat's validator is not
thread-safe): one notebook at a time per process."""


def prepare(path: Path, exercises_dir, folder):
    """``(grade, spec, cells)`` ready for the child, or ``(final grade, None, None)``."""
    nb, problem = None, ""
    try:
        too_large = path.stat().st_size > MAX_NOTEBOOK_MB * MB
        nb = None if too_large else nbformat.read(path, as_version=4)
    except Exception as exc:     # noqa: BLE001 - an unreadable submission scores 0
        problem = unreadable(exc)
    if nb is None:
        problem = problem or f"not a readable notebook: larger than {MAX_NOTEBOOK_MB} MB"
        return Grade(str(path), student_name(None, path, folder), problems=[problem]), None, None
    g = Grade(str(path), student_name(nb, path, folder))
    try:
        g.exercise = exercise_number(nb)
        spec = spec_of(exercise_module(g.exercise), check_answer_name(pristine(g.exercise, exercises_dir)))
        cells, missing = plan(nb, pristine(g.exercise, exercises_dir), g.exercise)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        g.problems.append(str(exc))
        return g, None, None
    g.title, g.total = spec.title, len(spec)
    rejected = missing + syntax_problems(cells)
    if not rejected:
        try:
            rejected = static_problems(cells, spec.graded, spec.forbidden_bases, spec.hidden)
        except (RecursionError, MemoryError, ValueError) as exc:
            rejected = [f"your answer cells cannot be analysed: {type(exc).__name__}"]
    if rejected:
        return _all_fail(g, spec, rejected, "not run: "), None, None
    return g, spec, cells


def _all_fail(g: Grade, spec, problems: list, prefix: str) -> Grade:
    g.problems += problems
    g.checks = [Result(c.name, False, f"{prefix}{problems[0]}"[:300]) for c in spec.checks]
    return g


# -- the child's job and its checks ----------------------------------------------------

def _job(n, spec, cells, exercises_dir, others) -> dict:
    return {"exercise": n, "answer": spec.answer,
            "cells": [{"id": c.id, "kind": c.kind, "source": c.source} for c in cells],
            **read_policy(spec, exercises_dir, others)}


COUNTED = ("processes", "virtual", "recalled", "heard_again", "stopped")
"""What :attr:`Grade.cost` adds up over a notebook's children (:mod:`..sandbox.transcripts`)."""


def grade_interactive(job: dict, spec, params: dict, limits: Limits, info=None) -> list:
    """Every check of ``spec`` judged by the trusted world against a sandboxed client.

    A check that runs past its limit (or breaks the channel) costs only that
    check: the child is killed and a fresh one serves the remaining checks. One
    check per notebook may run twice (a client that is not a function of what it heard
    is run again without recall, :func:`~..judge.interactive.run_trusted`; the children
    after it start without recall, so no other check runs twice): each child's time,
    and :func:`longest_notebook`, allow for it.
    """
    results, todo, recall = {}, list(spec.checks), True
    while todo:
        seconds = SETUP_SECONDS + sum(c.limit for c in todo) + max(c.limit for c in todo)
        with InteractiveChild(job, spec, limits, seconds, recall) as child:
            problem = child.wait_ready()
            if info is not None and child.sandbox:
                info["sandbox"] = child.sandbox
            if problem is not None:
                results.update({c.name: Result(c.name, False, problem[:300]) for c in todo})
                break
            while todo and not child.hub.broken:
                check = todo.pop(0)
                results[check.name] = run_trusted(check, child.hub, params[check.name])
            if child.pipes is not None:
                recall = recall and not child.pipes.transcripts.stopped
            if info is not None and child.pipes is not None:
                for k, v in child.pipes.transcripts.figures().items():
                    if k in COUNTED:
                        info.setdefault("recall", {})[k] = info.get("recall", {}).get(k, 0) + v
    return [results[c.name] for c in spec.checks]



# -- many notebooks ----------------------------------------------------------------

def grade_all(paths, exercises_dir=EXERCISES, limits: Limits = Limits(), jobs: int = 1,
              folder=None, progress=None, stall=None) -> list:
    """Grade every notebook, ``jobs`` at a time; grades in the order of ``paths``.

    With ``jobs > 1`` each notebook is graded in one of ``jobs`` worker
    processes (the trusted worlds are Python that holds the GIL: worker
    threads would take turns on one core). ``progress``: its ``update(1)`` is
    called as each notebook is done. The run's watchdog: when no notebook is
    done for ``stall`` seconds (default :func:`longest_notebook` and a minute),
    the workers are ended (each kills its child's session) and every notebook
    not done gets a row saying so, with its student and exercise.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    paths = [Path(p) for p in paths]
    others = private_roots(paths)          # never another submission's path in a child's job
    tasks = [(k, path, exercises_dir, limits, folder, others) for k, path in enumerate(paths)]
    grades: dict = {}
    if jobs == 1 or len(tasks) < 2:
        return [_tick(progress, g) for _, g in map(_grade_task, tasks)]
    stall = longest_notebook() + 60.0 if stall is None else stall
    context = multiprocessing.get_context("spawn")   # fresh interpreters: nothing forked
    with context.Pool(min(jobs, len(tasks)), initializer=_worker_started,
                      initargs=(list(sys.path),)) as pool:
        done = pool.imap_unordered(_grade_task, tasks)
        try:
            while len(grades) < len(tasks):
                k, g = done.next(timeout=stall)
                grades[k] = _tick(progress, g)
        except multiprocessing.TimeoutError:
            pool.terminate()      # SIGTERM: each worker unwinds its grade, killing its child
            pool.join()
        else:
            pool.close()          # every worker ends on its own: none is killed mid-exit
            pool.join()
    for k in set(range(len(tasks))) - set(grades):
        grades[k] = _tick(progress, _stalled(tasks[k], stall))
    return [grades[k] for k in range(len(tasks))]


def longest_notebook() -> float:
    """The most seconds one notebook's grade may take: each check past its limit (one of
    them twice), then a fresh child for the next one (:data:`SETUP_SECONDS`,
    :data:`..sandbox.launcher.GRACE_SECONDS`)."""
    from .. import MODULES
    specs = [exercise_module(n).exercise for n in MODULES]
    return max(len(s) * (SETUP_SECONDS + GRACE_SECONDS) + s.time_limit
               + max(c.limit for c in s.checks) for s in specs)


def _stalled(task, stall: float) -> Grade:
    """The row of a notebook the run's watchdog ended: its student and exercise, and why."""
    _, path, exercises_dir, _, folder, _ = task
    with PREPARE:
        g, spec, _ = prepare(path, exercises_dir, folder)
    why = f"not graded: no notebook of the run finished for {stall:g} s, so the run ended it"
    return _all_fail(g, spec, [why], "") if spec is not None else g


def _grade_task(task) -> tuple:
    """``(k, grade)`` of one notebook; a bulk run always finishes, so never raises.

    In a worker, SIGTERM (the pool ending early) unwinds the grade, so the notebook's
    sandbox session is killed on the way out; outside a grade it ends the worker quietly.
    """
    k, path, exercises_dir, limits, folder, others = task
    if WORKER["started"]:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return k, grade(path, exercises_dir, limits, folder, others)
    except Exception as exc:     # noqa: BLE001 - a bulk run always finishes
        return k, Grade(str(path), path.stem,
                        problems=[f"grader error: {type(exc).__name__}: {exc}"])
    finally:
        if WORKER["started"]:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


WORKER = {"started": False}
"""Is this process a grading worker (:func:`_worker_started`)?"""


def _tick(progress, g: "Grade") -> "Grade":
    if progress is not None:
        progress.update(1)
    return g


def _worker_started(path: list) -> None:
    """In a grading worker: the main process's ``sys.path`` exactly (the sandbox's read
    policy derives from it; a spawned interpreter has the working directory in place of
    ``""``, and that would let a child read it). Ctrl-C is the main process's to handle;
    SIGTERM is handled while a notebook is graded (:func:`_grade_task`)."""
    sys.path[:] = path
    WORKER["started"] = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)
