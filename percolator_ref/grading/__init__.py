"""Graded exercises: the student's code runs as clients, a trusted world owns the state and judges.

The folders say where the code runs:

- ``client/``: beside the student's code, in the sandboxed child (and in the
  notebook's kernel for the self-check): the client host and its proxy cluster
  (:mod:`.client.host`), the virtual disk's client side (:mod:`.client.vdisk`),
  observation helpers, the reference roles, and each exercise's spec and roles
  (``client/exNN_<name>.py``).
- ``judge/``: the trusted side: the world that owns every piece of state
  (:mod:`.judge.trusted`), the worlds of the protocol exercises, the invariants,
  the schedules, the counterexamples' replay, the disk's trusted side, and each
  exercise's checks (``judge/exNN_<name>.py``: they register on the spec that
  ``client/exNN_<name>.py`` declares).
- ``sandbox/``: the lockdown of the child: its entry (:mod:`.sandbox.child`),
  Landlock, privileges; and the parent's half: the launcher and the read policy.
- ``grade/``: ``percolator grade``: the grader, results (CSV, Gradescope),
  submissions, the answer cells, the generator of the exercise notebooks.
- this folder: the vocabulary both sides share (:mod:`.framework`: the spec,
  :mod:`.channel`: the wire, :mod:`.battery`: reports and budgets), and
  :mod:`.demos` (wrong answers the notebooks run as demos).

The layers (``tests/test_grading_layers.py`` enforces them on the imports):

1. ``client/``, the shared modules of this folder, and the child's side of
   ``sandbox/`` (``child``, ``landlock``, ``privileges``) import nothing from
   ``judge/``, ``grade/`` or ``percolator_ref.viz``, nor the parent's side of
   ``sandbox/``: the child loads none of it (a runtime test asks the child which
   modules it loaded).
2. ``judge/`` imports from ``client/`` only what the client side declares for
   it: the exercises' spec-and-roles modules (the spec its checks register on),
   the reference roles, the observation helpers, and the client host, which the
   world uses to run its own reference clients in its process and the self-check
   to run the student's in the notebook's. Never the virtual disk's client side
   (it patches the process's file calls), never ``sandbox/`` or ``grade/``.
3. The parent's side of ``sandbox/`` may import the shared modules, the child's
   side (its constants) and ``judge/`` (the hub that serves the child).
   ``grade/`` sits on top and may import everything.
4. No module uses another module's underscore names.

This package's own names load lazily, so the child's ``from .. import roles``
runs none of the judge: :func:`exercise` (the judge's module: checks and roles)
is for the grader and the self-check, :func:`roles` (the client's: spec and
roles only) for the child.
"""
from __future__ import annotations

import importlib

from .framework import Exercise, Fail, require

MODULES = {
    1: "ex01_snapshot_read",
    2: "ex02_prewrite",
    3: "ex03_commit",
    4: "ex04_cleanup",
    5: "ex05_oracle",
    6: "ex06_observers",
    7: "ex07_broker_hotspot",
    8: "ex08_write_skew",
    9: "ex09_rollback_records",
    10: "ex10_async_commit",
}

LAZY = {"BudgetExceeded": "battery", "Report": "battery", "Result": "battery",
        "Replay": "judge.replay", "replay": "judge.replay"}


def __getattr__(name: str):
    """The names of :data:`LAZY`, imported at first use (PEP 562)."""
    if name in LAZY:
        return getattr(importlib.import_module(f"{__name__}.{LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _module_name(n: int) -> str:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int exercise number, got {n!r}")
    if n not in MODULES:
        raise ValueError(f"n must be one of {sorted(MODULES)}, got {n}")
    return MODULES[n]


def exercise(n: int):
    """The judge's module of exercise ``n``: its ``exercise`` is the spec with its checks."""
    return importlib.import_module(f"{__name__}.judge.{_module_name(n)}")


def roles(n: int):
    """The client's module of exercise ``n``: its ``exercise`` is the spec with its roles, no
    check registered (what the sandboxed child imports)."""
    return importlib.import_module(f"{__name__}.client.{_module_name(n)}")


def check(n: int, impl):
    """Run exercise ``n``'s checks against ``impl`` in this process (the check cells' self-check):
    a :class:`~.battery.Report`.

    Not the grade: ``percolator grade`` runs the answer cells in a sandbox and
    judges outside it.
    """
    return run_local(exercise(n).exercise, impl)


def run_local(spec: Exercise, answer, secret: int = 0):
    """Every check of ``spec`` in this process, deterministic for ``secret``: the self-check
    (same worlds and schedules as the grader)."""
    from .judge.interactive import self_check
    return self_check(spec, answer, secret)


__all__ = ["BudgetExceeded", "Exercise", "Fail", "MODULES", "Replay", "Report", "Result", "check",
           "exercise", "replay", "require", "roles", "run_local"]
