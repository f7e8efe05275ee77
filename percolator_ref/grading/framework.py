"""Checks that student code cannot reach: the grader owns the world, the student's code is a client.

How to write an exercise
========================

An exercise is two modules of one name, ``exNN_<name>.py``, on the two sides
of the trust line (:mod:`percolator_ref.grading`'s docstring):

- ``client/exNN_<name>.py`` defines one :class:`Exercise` called ``exercise``
  (the spec, 1.) and registers its roles (2.); the sandboxed child imports it
  (:func:`percolator_ref.grading.roles`) and nothing of the judge;
- ``judge/exNN_<name>.py`` imports that ``exercise`` and registers its checks
  (3.) on it; the grader and the self-check import it
  (:func:`percolator_ref.grading.exercise`).

:data:`percolator_ref.grading.MODULES` maps ``NN`` to the name. Everything else
is found from that object. ``ex05_oracle`` is a worked example (a world of its
own with a disk), ``ex01_snapshot_read`` one with families of schedules.

1. **The spec.** ::

       exercise = Exercise(
           5, "timestamp oracle: ranges and a persisted high-water mark",
           answer="Oracle",                          # the name the check cell passes
           graded={"Oracle": ("__init__", "get_timestamp")},
           hidden=("percolator_ref.services.oracle:TimestampOracle",),
           forbidden_bases=("TimestampOracle",))

   - ``answer``: the object the roles receive; it must be the name that the
     notebook's check cell hands to ``grading.check(NN, <answer>)``.
   - ``graded``: what the student's answer cells must define *themselves*.
     ``{"Cls": ("m1", "m2")}`` means a ``class Cls`` whose body has ``def m1``
     and ``def m2``; ``{"fn": ()}`` means a top-level ``def fn``. The grader
     (:mod:`.grade.answers`) rejects, before running anything, a name that is
     imported or assigned instead of defined, a class that inherits a graded
     method, and a graded body that only delegates (``return super().m(...)``,
     ``return Reference.m(self, ...)``, a call of the reference function).
   - ``hidden``: ``"module:qualname"`` of the reference implementation of the
     graded step. In the sandbox, after the notebook's own (pristine) setup
     cells and before the student's cells, every function of a hidden class
     (or the hidden function, in every module that imported it) is replaced
     by a stub raising :class:`ReferenceHidden`, and its source file becomes
     unreadable. So inheriting, aliasing or delegating at run time fails too.
     Hide the step the student writes, not what the roles need: a
     ``Transaction``-subclass exercise hides the graded method
     (``"percolator_ref.transaction:Transaction.snapshot_read"``), not the
     class. If a replaced function is still reachable afterwards (kept in a
     table, a default argument, a closure), grading stops with an internal
     error: hide that holder too.
   - ``forbidden_bases``: class names the answer class may not inherit from.

2. **Roles** (``@exercise.role(name)``: ``fn(answer, cluster, *args)``) build a
   *client* from the student's answer. A role runs where the client runs (the
   sandbox when grading, the notebook's kernel in its self-check) on a proxy
   cluster (:mod:`.client.host`): every row transaction, timestamp and
   lock-service call is a message to the grader's world. Roles hold no
   verdict: what a client answers is only ever compared with the world's own
   record.

3. **Checks** (``@exercise.check(title, params=..., limit=seconds)``) register
   ``fn(trial, p)``, which runs in the grader. ``trial.world()`` is a
   :class:`~.judge.trusted.TrustedWorld`: the grader's own cluster (Bigtable, oracle,
   lock service, manual clock) whose past the check writes cell by cell
   (``w.committed``, ``w.locked``, ``w.commit_point``, ``w.crash``).
   ``c = w.client(role, *args)`` spawns a student client and serves it until it
   answers, ``w.call(c, method, *args)`` runs one of its methods. Every
   message is executed and recorded by the world (``c.timestamps``,
   ``c.seen``, ``c.answers``, ``w.log``, the cells); the check judges only
   that record and the clients' answers, with :func:`require`, in ONE sentence
   that names the rule of the protocol that was broken, in the paper's terms,
   with this run's numbers. ``trial.explore(family, judge)`` runs every
   schedule of a family of :class:`~.judge.participants.Participant` s within the bounds
   of :mod:`.judge.schedules` (crashes included) and raises the shortest failing one
   as a counterexample (:mod:`.judge.replay`).

   - ``params(rng) -> dict`` runs in the grader with a ``random.Random`` seeded
     by a secret drawn for each grading run (a fixed seed in the notebook's
     own check cell). Put every timestamp, size or seed of the check in ``p``
     (``p["t0"]`` is the oracle's first timestamp of each world).
   - ``classes``: the value classes the check covers, enumerated like
     schedules, never drawn. The secret may choose values and names, not
     which *kind* of value a check meets (a put or a delete, a withdrawal
     within its own account or over it): a check names its classes at
     registration and runs ``for c in trial.each_class(): ...``, building
     each class's values from ``p``; after building them it states the class
     they really are, computed from the values, with ``trial.covered(c,
     computed)`` (an internal error if they differ). A check that passes has
     covered every class it names, in order, under every secret.
   - ``limit``: seconds the check may take; past it the check fails alone
     (``percolator grade`` gives a notebook the sum of its checks' limits plus
     :data:`.sandbox.launcher.SETUP_SECONDS`).

   The notebook's check cell runs the same checks and schedules in-process
   (:func:`.judge.interactive.self_check`, not trusted); ``percolator grade`` runs
   the clients in the sandbox (:mod:`.sandbox.child`) and the world in the grader
   (:mod:`.grade.grader`).

4. **The catalogue of wrong answers** lives in ``tests/wrong_answers/exNN_*.py``
   as ``WRONG = {"what the student got wrong": '''<answer cell source>'''}``,
   each written as a student would write the whole answer cell (not a
   one-token mutation); ``tests/test_grading_catalogue.py`` grades each one
   through the sandbox and requires at least one FAIL, and requires the
   solution notebook's answer cells to pass every check. At least 6 per
   exercise.

5. **The notebook.** The check cell stays ``grading.check(NN, <answer>)``
   (the self-check, for the student's own use). ``percolator grade`` never
   runs it: it runs the pristine code cells of ``exercises/NN_*.ipynb`` and
   the student's versions of the answer cells (those that hold the
   generator's stub) in the sandbox, which then serves the world's clients.
"""
from __future__ import annotations

import re

import random
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional


ANSWER_FILENAME = "<answer cell {}>"     # filename the sandbox compiles answer cells under
MAX_FEEDBACK = 300


class Fail(Exception):
    """Raised by a verdict: the check failed; ``str(exc)`` is the feedback sentence."""


class ReferenceHidden(RuntimeError):
    """Raised by the stub that replaces a hidden reference step during grading."""


def require(condition, feedback: str) -> None:
    """In a verdict: fail the check with ``feedback`` unless ``condition`` holds."""
    if not condition:
        raise Fail(feedback)


@dataclass(frozen=True)
class TrustedCheck:
    """A check run by the trusted world (:mod:`.judge.trusted`): ``fn(trial, p)`` raises
    :class:`Fail`.

    ``limit``: seconds this check may take (the notebook's limit is their sum).
    """
    name: str
    params: Callable
    fn: Callable
    limit: float = 10.0
    classes: tuple = ()


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
        self._trusted: dict = {}
        self.roles: dict = {}

    def check(self, name: str, params: Optional[Callable] = None, limit: float = 10.0,
              classes: tuple = ()) -> Callable:
        """Decorator: ``fn(trial, p)`` is check ``name``, run and judged by the trusted world.

        The title is written once, here. ``trial`` (:class:`.judge.interactive.Trial`)
        builds worlds whose clients run the student's code elsewhere.
        ``classes``: the value classes it covers, every one under every secret.
        """
        if not isinstance(classes, tuple) or not all(isinstance(c, str) and c for c in classes) \
                or len(set(classes)) != len(classes):
            raise ValueError(f"classes must be a tuple of distinct names, got {classes!r}")

        def register(fn):
            if name in self._trusted:
                raise ValueError(f"duplicate check {name!r}")
            self._trusted[name] = TrustedCheck(name, params or (lambda rng: {}), fn, limit, classes)
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
    def checks(self) -> list:
        """The checks in registration order."""
        return list(self._trusted.values())

    @property
    def time_limit(self) -> float:
        """The notebook's time limit: the sum of its checks' limits."""
        return sum(c.limit for c in self.checks)

    def params(self, secret: int) -> dict:
        """``{check name: params}`` for one grading run with ``secret``."""
        return {c.name: c.params(random.Random(f"{secret}:{self.number}:{c.name}"))
                for c in self.checks}

    def __len__(self):
        return len(self._trusted)

    def __repr__(self):
        return f"<Exercise {self.number}: {self.title}, {len(self)} checks>"


# -- what a client answers (where the client runs) ---------------------------------

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
        text = without_addresses(repr(value))
    except Exception:            # noqa: BLE001 - a student's __repr__ may raise
        text = "<unprintable>"
    return {"repr": text[:200], "type": type(value).__name__}


ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def without_addresses(text: str) -> str:
    """``text`` with memory addresses (``<Foo object at 0x7f..>``) written ``0x..``: where
    an object lies differs from one process to the next, and what a client says must
    depend only on what it heard (:mod:`~.sandbox.transcripts`)."""
    return ADDRESS.sub("0x..", text)


def describe_exception(exc: BaseException) -> str:
    """``"TypeError: msg (line N of your answer cell)"``: one line, never a traceback."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = without_addresses(text)
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


def spec_of(module, answer: str) -> Exercise:
    """The :class:`Exercise` of an exercise module, checked against the check cell's answer name."""
    spec = getattr(module, "exercise", None)
    if not isinstance(spec, Exercise):
        raise ValueError(f"{module.__name__} defines no Exercise called exercise")
    if spec.answer != answer:
        raise ValueError(f"exercise {spec.number}: the check cell grades {answer!r}, "
                         f"the spec says answer={spec.answer!r}")
    return spec


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
