"""Checks that student code cannot reach: the grader owns the world, the student's code is a client.

Two kinds of check
==================

- **Trusted checks** (exercises 1-4; the way to write new ones):
  ``@exercise.check(title, params=..., limit=seconds)`` registers ``fn(trial, p)``,
  which runs in the grader. ``trial.world()`` is a
  :class:`~.trusted.TrustedWorld`: the grader's own cluster (Bigtable, oracle,
  lock service, manual clock) whose past the check writes cell by cell
  (``w.committed``, ``w.locked``, ``w.commit_point``, ``w.crash``). The
  student's code runs elsewhere as a *client* built by a *role*
  (``@exercise.role(name)``: ``fn(answer, cluster, *args)``, run where the
  client runs, on a proxy cluster): ``c = w.client(role, *args)`` spawns one and
  serves it until it answers, ``w.call(c, method, *args)`` runs one of its
  methods. Every row transaction, timestamp and lock-service call of a client
  is a message (:mod:`.channel`) that the world executes and records
  (``c.timestamps``, ``c.seen``, ``c.answers``, ``w.log``, the cells). The
  check judges only that record and the clients' answers, with
  :func:`require`; the title is written once. ``trial.explore(family, judge)``
  runs every schedule of a family of :class:`~.trusted.Participant` s within
  the bounds of :mod:`.schedules` (crashes included) and raises the shortest
  failing one as a counterexample (:mod:`.replay`). The notebook's check cell
  runs the same checks and schedules in-process (:mod:`.interactive`: a
  self-check); ``percolator grade`` runs the clients in the sandbox
  (:mod:`.sandbox`) and the world in the grader (:func:`.grader.grade_interactive`).
  A check has its own time limit; a check past it fails alone.
- **Scenario checks** (the older form, exercises 5-8 until converted): a
  scenario runs in the sandbox and returns observations, a verdict judges them
  in the grader. Described below; the observations come from the process that
  runs the student's code, so convert these to trusted checks.

How to write (or convert) a scenario exercise
=============================================

An exercise module ``percolator_ref/grading/exNN_<name>.py`` defines one
:class:`Exercise` called ``exercise``; :data:`percolator_ref.grading.MODULES`
maps ``NN`` to the module. Everything else is found from that object.

1. **The spec.** ::

       exercise = Exercise(
           5, "timestamp oracle: ranges and a persisted high-water mark",
           answer="Oracle",                          # the name the check cell passes
           graded={"Oracle": ("__init__", "get_timestamp")},
           hidden=("percolator_ref.services.oracle:TimestampOracle",),
           forbidden_bases=("TimestampOracle",))

   - ``answer``: the object the checks receive; it must be the name that the
     notebook's check cell hands to ``grading.check(NN, <answer>)``.
   - ``graded``: what the student's answer cells must define *themselves*.
     ``{"Cls": ("m1", "m2")}`` means a ``class Cls`` whose body has ``def m1``
     and ``def m2``; ``{"fn": ()}`` means a top-level ``def fn``. The grader
     (:mod:`.answers`) rejects, before running anything, a name that is
     imported or assigned instead of defined, a class that inherits a graded
     method, and a graded body that only delegates (``return super().m(...)``,
     ``return Reference.m(self, ...)``, a call of the reference function).
   - ``hidden``: ``"module:qualname"`` of the reference implementation of the
     graded step. In the sandbox, after the notebook's own (pristine) setup
     cells and before the student's cells, every function of a hidden class
     (or the hidden function, in every module that imported it) is replaced
     by a stub raising :class:`ReferenceHidden`, and its source file becomes
     unreadable. So inheriting, aliasing or delegating at run time fails too.
     Hide the step the student writes, not what the scenario needs to build
     its world: a ``Transaction``-subclass exercise hides the graded method
     (``"percolator_ref.transaction:Transaction.snapshot_read"``), not the
     class; the student's subclass overrides the stub. After hiding, the
     scenario cannot use the hidden step either: build the world with other
     steps, run the student's class, and observe through
     ``cluster.bigtable.dump()`` and the student's own results, never
     through a reference ``Transaction`` that would call the stub. If a
     replaced function is still reachable afterwards (kept in a table, a
     default argument, a closure), grading stops with an internal error:
     hide that holder too.
   - ``forbidden_bases``: class names the answer class may not inherit from.

2. **A check = a scenario + a verdict**, registered under the same name, in
   the order they are reported::

       @exercise.scenario("a restart jumps forward to the mark, never back",
                          params=lambda rng: {"first": rng.randrange(10, 10**6)})
       def restart(Oracle, p, ctx):
           path = ctx.path("oracle.state")
           old = Oracle(path, first_timestamp=p["first"], range_size=10)
           served = [old.get_timestamp() for _ in range(3)]
           return {"served": served, "after": Oracle(path, p["first"], 10).get_timestamp()}

       @exercise.verdict("a restart jumps forward to the mark, never back")
       def restart_ok(obs, p):
           mark = p["first"] + 10
           require(obs["after"] == mark,
                   f"the oracle allocated up to {mark} and restarted: it must jump "
                   f"forward to {mark}, it served {obs['after']!r}")

   - ``params(rng) -> dict`` runs in the grader with a ``random.Random`` seeded
     by a secret drawn for each grading run (a fixed seed in the notebook's
     own check cell). Put every timestamp, size or seed the scenario uses in
     ``p``: observations copied from another run then disagree with ``p``.
   - ``scenario(answer, p, ctx) -> dict`` runs in the sandbox, against the
     student's code, and returns plain JSON (dict, list, str, int, float,
     bool, None): what was observed, never a judgement. Return values go
     through :func:`plain` (a non-JSON value becomes ``{"repr", "type"}``),
     calls that may raise through :func:`outcome` (``{"value": ...}`` or
     ``{"raised": "TypeError: ... (line 7 of your answer cell)"}``); raw
     cells (locks and write records are objects) through
     :func:`.worlds.versions`. ``ctx.path(name)`` is a
     path in a fresh directory of this scenario, ``ctx.writes()`` records
     which files are opened for writing (see :class:`Context`). An exception
     that escapes the scenario fails the check with feedback naming the
     scenario and the line of the student's cell; the verdict is not called.
     A scenario runs at most ``--scenario-timeout`` seconds (10 by default)
     in the sandbox; a world that stops endless retry loops is built with
     :func:`.battery.guard` (see :mod:`.worlds`).
   - ``verdict(obs, p) -> None`` runs in the grader (the parent process) on the
     observations. It raises :class:`Fail` (use :func:`require`) with ONE
     sentence that names the rule of the protocol that was broken, in the
     paper's terms, with the numbers of this scenario. Observations are
     untrusted: check their shape with :func:`require` too (any other
     exception in a verdict counts as FAIL "malformed observations").

3. **The catalogue of wrong answers** lives in ``tests/wrong_answers/exNN_*.py``
   as ``WRONG = {"what the student got wrong": '''<answer cell source>'''}``,
   each written as a student would write the whole answer cell (not a
   one-token mutation); ``tests/test_grading_catalogue.py`` grades each one
   through the sandbox and requires at least one FAIL, and requires the
   solution notebook's answer cells to pass every check. At least 6 per
   exercise.

4. **The notebook.** The check cell stays ``grading.check(NN, <answer>)``
   (in-process, :func:`run_local`, for the student's own use; not trusted).
   ``percolator grade`` never runs it: it runs the pristine code cells of
   ``exercises/NN_*.ipynb`` and the student's versions of the answer cells
   (those that hold the generator's stub), then the scenarios.
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .battery import Report, Result

ANSWER_FILENAME = "<answer cell {}>"     # filename the sandbox compiles answer cells under
MAX_FEEDBACK = 300


class Fail(Exception):
    """Raised by a verdict: the check failed; ``str(exc)`` is the feedback sentence."""


class ReferenceHidden(RuntimeError):
    """Raised by the stub that replaces a hidden reference step during grading."""


class ScenarioTimeout(BaseException):
    """Raised in the sandbox when one scenario runs past its time limit."""


def require(condition, feedback: str) -> None:
    """In a verdict: fail the check with ``feedback`` unless ``condition`` holds."""
    if not condition:
        raise Fail(feedback)


@dataclass(frozen=True)
class Check:
    """One named check: ``params(rng)``, ``scenario(answer, p, ctx)``, ``verdict(obs, p)``."""
    name: str
    params: Callable
    scenario: Callable
    verdict: Callable
    trusted = False


@dataclass(frozen=True)
class TrustedCheck:
    """A check run by the trusted world (:mod:`.trusted`): ``fn(trial, p)`` raises :class:`Fail`.

    ``limit``: seconds this check may take (the notebook's limit is their sum).
    """
    name: str
    params: Callable
    fn: Callable
    limit: float = 10.0
    trusted = True


class Exercise:
    """The grading spec of one exercise (see the module docstring)."""

    def __init__(self, number: int, title: str, answer: str, graded: dict,
                 hidden: tuple = (), forbidden_bases: tuple = ()):
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise ValueError(f"number must be a positive int, got {number!r}")
        if not isinstance(answer, str) or not answer.isidentifier():
            raise ValueError(f"answer must be an identifier, got {answer!r}")
        self.number, self.title, self.answer = number, title, answer
        self.graded = {name: tuple(methods) for name, methods in graded.items()}
        self.hidden, self.forbidden_bases = tuple(hidden), tuple(forbidden_bases)
        self._scenarios: dict = {}
        self._verdicts: dict = {}
        self._trusted: dict = {}
        self.roles: dict = {}

    def scenario(self, name: str, params: Optional[Callable] = None) -> Callable:
        """Decorator: ``fn(answer, p, ctx) -> dict`` is the scenario of check ``name``."""
        def register(fn):
            if name in self._scenarios:
                raise ValueError(f"duplicate scenario {name!r}")
            self._scenarios[name] = (params or (lambda rng: {}), fn)
            return fn
        return register

    def check(self, name: str, params: Optional[Callable] = None, limit: float = 10.0) -> Callable:
        """Decorator: ``fn(trial, p)`` is check ``name``, run and judged by the trusted world.

        The title is written once, here. ``trial`` (:class:`.trusted_checks.Trial`)
        builds worlds whose clients run the student's code elsewhere.
        """
        def register(fn):
            if name in self._scenarios or name in self._trusted:
                raise ValueError(f"duplicate check {name!r}")
            self._trusted[name] = TrustedCheck(name, params or (lambda rng: {}), fn, limit)
            return fn
        return register

    def role(self, name: str) -> Callable:
        """Decorator: ``fn(answer, cluster, *args)`` builds a client of this exercise.

        Roles run where the client runs (the student's in the sandbox, the
        reference's in the grader) and see only a proxy cluster.
        """
        def register(fn):
            if name in self.roles:
                raise ValueError(f"duplicate role {name!r}")
            self.roles[name] = fn
            return fn
        return register

    @property
    def interactive(self) -> bool:
        """Are this exercise's checks run by the trusted world?"""
        return bool(self._trusted)

    def verdict(self, name: str) -> Callable:
        """Decorator: ``fn(obs, p)`` is the verdict of check ``name`` (raise :class:`Fail`)."""
        def register(fn):
            if name in self._verdicts:
                raise ValueError(f"duplicate verdict {name!r}")
            self._verdicts[name] = fn
            return fn
        return register

    @property
    def checks(self) -> list:
        """The checks in registration order; every scenario needs its verdict and back."""
        missing = set(self._scenarios) ^ set(self._verdicts)
        if missing:
            raise ValueError(f"exercise {self.number}: scenario or verdict missing for {sorted(missing)}")
        return [Check(n, p, s, self._verdicts[n]) for n, (p, s) in self._scenarios.items()] \
            + list(self._trusted.values())

    @property
    def time_limit(self) -> float:
        """The notebook's time limit: the sum of its checks' limits."""
        return sum(getattr(c, "limit", 10.0) for c in self.checks)

    def params(self, secret: int) -> dict:
        """``{check name: params}`` for one grading run with ``secret``."""
        return {c.name: c.params(random.Random(f"{secret}:{self.number}:{c.name}"))
                for c in self.checks}

    def __len__(self):
        return len(self._scenarios) + len(self._trusted)

    def __repr__(self):
        return f"<Exercise {self.number}: {self.title}, {len(self)} checks>"


# -- observations (sandbox side) ---------------------------------------------

def plain(value, depth: int = 0):
    """``value`` as JSON if it is plain data, else ``{"repr": ..., "type": ...}``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value) in (int, float):
        return value
    if isinstance(value, (list, tuple)) and depth < 6:
        return [plain(v, depth + 1) for v in value]
    if type(value) is dict and depth < 6 and all(isinstance(k, str) for k in value):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    try:
        text = repr(value)
    except Exception:            # noqa: BLE001 - a student's __repr__ may raise
        text = "<unprintable>"
    return {"repr": text[:200], "type": type(value).__name__}


def describe_exception(exc: BaseException) -> str:
    """``"TypeError: msg (line N of your answer cell)"``: one line, never a traceback."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    where = _student_line(exc)
    text = " ".join(text.split())
    if len(text) > MAX_FEEDBACK - 40:
        text = text[:MAX_FEEDBACK - 43] + "..."
    return f"{text} ({where})" if where else text


def _student_line(exc: BaseException) -> str:
    """Where in the student's code ``exc`` was raised (innermost frame of an answer cell)."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.filename.startswith("<answer cell"):
        return f"line {exc.lineno} of your answer cell"
    found = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith("<answer cell"):
            found = f"line {frame.lineno} of your answer cell"
        elif not _is_library(frame.filename):
            found = f"line {frame.lineno} of your cell"
    return found


def _is_library(filename: str) -> bool:
    here = str(Path(__file__).resolve().parents[1])
    return filename.startswith((here, sys.prefix, sys.base_prefix, "<frozen"))


def outcome(fn: Callable, *args, **kwargs) -> dict:
    """Call ``fn``: ``{"value": plain(result)}`` or ``{"raised": describe_exception(exc)}``."""
    try:
        return {"value": plain(fn(*args, **kwargs))}
    except Exception as exc:     # noqa: BLE001 - what the student's code raised is an observation
        return {"raised": describe_exception(exc)}


class Context:
    """What a scenario may use besides the answer: a private directory, a write recorder."""

    def __init__(self, directory: str):
        self.directory = directory

    def path(self, name: str) -> str:
        """A path inside this scenario's own (initially empty) directory."""
        return str(Path(self.directory) / name)

    def files(self) -> list:
        """The names of the files in this scenario's directory, sorted."""
        return sorted(p.name for p in Path(self.directory).iterdir())

    def writes(self) -> "WriteRecorder":
        """``with ctx.writes() as w:`` -> ``w.paths``: files opened for writing meanwhile."""
        return WriteRecorder()


class WriteRecorder:
    """Records the paths opened for writing (through ``sys.addaudithook``) while active."""

    _active: list = []
    _installed = False

    def __init__(self):
        self.paths: list = []

    def __enter__(self):
        if not WriteRecorder._installed:
            sys.addaudithook(_record_open)
            WriteRecorder._installed = True
        WriteRecorder._active.append(self)
        return self

    def __exit__(self, *exc):
        WriteRecorder._active.remove(self)
        return False


def _record_open(event, args):
    if event != "open" or not WriteRecorder._active:
        return
    path, mode, flags = args
    writing = (mode is not None and any(c in str(mode) for c in "wax+")) or \
              (mode is None and isinstance(flags, int) and flags & 0o3103)   # WRONLY|RDWR|CREAT|TRUNC
    if writing and isinstance(path, (str, bytes)):
        name = path.decode(errors="replace") if isinstance(path, bytes) else path
        for recorder in WriteRecorder._active:
            recorder.paths.append(name)


# -- running checks ----------------------------------------------------------

def run_scenario(check: Check, answer, p: dict, directory: str) -> dict:
    """``{"obs": ...}`` or ``{"error": ...}`` for one scenario (sandbox or in-process)."""
    try:
        obs = check.scenario(answer, p, Context(directory))
    except ScenarioTimeout as exc:
        return {"error": f"it ran past its time limit of {exc} s (an endless loop?)"}
    except Exception as exc:     # noqa: BLE001 - the student's exception is feedback
        return {"error": describe_exception(exc)}
    try:
        json.dumps(obs)
    except (TypeError, ValueError) as exc:
        return {"error": f"internal: the scenario returned non-JSON data ({exc})"}
    return {"obs": obs}


def judge(check: Check, result, p: dict) -> Result:
    """The trusted verdict on one scenario's (untrusted) result."""
    if not isinstance(result, dict) or not ({"obs"} == set(result) or {"error"} == set(result)):
        return Result(check.name, False, "no observations came back from this scenario")
    if "error" in result:
        error = str(result["error"])[:MAX_FEEDBACK]
        return Result(check.name, False, f"the scenario '{check.name}' stopped: {error}")
    try:
        check.verdict(result["obs"], p)
    except Fail as exc:
        text = " ".join(str(exc).split())
        return Result(check.name, False, text[:MAX_FEEDBACK])
    except Exception as exc:     # noqa: BLE001 - observations are untrusted input
        return Result(check.name, False, f"malformed observations ({type(exc).__name__}: {exc})"[:MAX_FEEDBACK])
    return Result(check.name, True)


def spec_of(module, answer: str) -> Exercise:
    """The :class:`Exercise` of an exercise module, checked against the check cell's answer name."""
    spec = getattr(module, "exercise", None)
    if not isinstance(spec, Exercise):
        raise ValueError(f"{module.__name__} defines no Exercise called exercise")
    if spec.answer != answer:
        raise ValueError(f"exercise {spec.number}: the check cell grades {answer!r}, "
                         f"the spec says answer={spec.answer!r}")
    return spec


def run_local(exercise: Exercise, answer, secret: int = 0) -> Report:
    """Run every check in this process (the notebook's check cell); deterministic for ``secret``.

    An exercise of trusted checks is run by :func:`.interactive.self_check`
    instead (``grading.run_local`` and ``grading.check`` choose).
    """
    if exercise.interactive:
        raise ValueError(f"exercise {exercise.number} has trusted checks: run it with "
                         f"interactive.self_check")
    report = Report(exercise.number, exercise.title)
    params = exercise.params(secret)
    for check in exercise.checks:
        with tempfile.TemporaryDirectory(prefix="percolator-check-") as tmp:
            result = run_scenario(check, answer, params[check.name], tmp)
        report.results.append(judge(check, result, params[check.name]))
    return report


# -- verdict helpers shared by the exercises (grader side) ------------------------------

def said(out) -> str:
    """What a call did, for feedback: ``returned X`` / ``raised E`` / ``gave no answer``.

    The one phrasing of an outcome (:func:`outcome`, or a client's answer in the
    trusted world); a stored value is shown as the paper's figures print it.
    """
    if out is None:
        return "gave no answer (its client crashed or never finished)"
    if isinstance(out, dict) and set(out) == {"raised"}:
        text = str(out["raised"])
        return f"raised {text if len(text) <= 140 else text[:137] + '...'}"
    if isinstance(out, dict) and set(out) == {"value"}:
        return f"returned {show(out['value'])}"
    return f"gave {out!r}"


def show(value) -> str:
    """A stored version as the paper's figures print it."""
    if isinstance(value, dict) and "write" in value:
        return f"write record '{value.get('write')} @ {value.get('start_ts')}'"
    if isinstance(value, dict) and value.get("lock") is True:
        primary = value.get("primary")
        where = (f"{primary[1]}.{primary[2]}" if isinstance(primary, list) and len(primary) == 3
                 else repr(primary))
        return "lock 'I am primary'" if value.get("is_primary") else f"lock 'primary @ {where}'"
    if isinstance(value, dict) and "repr" in value:
        return str(value["repr"])
    return repr(value)


def observed(obs, *keys) -> list:
    """``[obs[k] for k in keys]``, failing the check if the observations lack one."""
    require(isinstance(obs, dict) and all(k in obs for k in keys),
            f"malformed observations (expected {', '.join(keys)})")
    return [obs[k] for k in keys]
