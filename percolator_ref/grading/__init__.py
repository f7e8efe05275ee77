"""Graded exercises: specs of trusted checks, the generator, the sandboxed grader.

Each exercise ``N`` has a module ``exNN_<name>`` that defines ``exercise``, a
:class:`~.framework.Exercise` (roles run the student's code as clients, in a
sandbox; checks judge the grader's own world: read :mod:`.framework`'s
docstring to write one). The notebooks in ``solutions/`` are the source of truth for ``exercises/`` (:mod:`.generate`); :mod:`.grader` grades
submitted notebooks (``percolator grade``).
"""
from __future__ import annotations

import importlib

from .battery import BudgetExceeded, Report, Result
from .framework import Exercise, Fail, require
from .judge.interactive import self_check
from .judge.replay import Replay, replay

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


def exercise(n: int):
    """The module of exercise ``n`` (its spec is the module's ``exercise``)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int exercise number, got {n!r}")
    if n not in MODULES:
        raise ValueError(f"n must be one of {sorted(MODULES)}, got {n}")
    return importlib.import_module(f"{__name__}.judge.{MODULES[n]}")


def check(n: int, impl) -> Report:
    """Run exercise ``n``'s checks against ``impl`` in this process (the check cells' self-check).

    Not the grade: ``percolator grade`` runs the answer cells in a sandbox and
    judges outside it.
    """
    return run_local(exercise(n).exercise, impl)


def run_local(spec: Exercise, answer, secret: int = 0) -> Report:
    """Every check of ``spec`` in this process, deterministic for ``secret``: the self-check
    (same worlds and schedules as the grader)."""
    return self_check(spec, answer, secret)


__all__ = ["BudgetExceeded", "Exercise", "Fail", "MODULES", "Replay", "Report", "Result", "check",
           "exercise", "replay", "require", "run_local"]
