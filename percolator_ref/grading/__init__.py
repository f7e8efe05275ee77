"""Graded exercises: specs of scenario checks, the generator, the sandboxed grader.

Each exercise ``N`` has a module ``exNN_<name>``. A converted exercise defines
``exercise``, a :class:`~.framework.Exercise` (scenarios run against the
student's code in a sandbox, verdicts in the grader: read
:mod:`.framework`'s docstring to write one). An exercise not converted yet
defines the old ``battery`` (with ``reference`` and ``mutants``), graded in
the sandbox through :mod:`.legacy`. The notebooks in ``solutions/`` are the
source of truth for ``exercises/`` (:mod:`.generate`); :mod:`.grader` grades
submitted notebooks (``percolator grade``).
"""
from __future__ import annotations

import importlib

from .battery import GRADE_LOG_ENV, Battery, BudgetExceeded, Report, Result
from .framework import Exercise, Fail, require, run_local

MODULES = {
    1: "ex01_snapshot_read",
    2: "ex02_prewrite",
    3: "ex03_commit",
    4: "ex04_cleanup",
    5: "ex05_oracle",
    6: "ex06_observers",
    7: "ex07_broker_hotspot",
    8: "ex08_write_skew",
}


def exercise(n: int):
    """The module of exercise ``n`` (``battery``, ``reference``, ``mutants``)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int exercise number, got {n!r}")
    if n not in MODULES:
        raise ValueError(f"n must be one of {sorted(MODULES)}, got {n}")
    return importlib.import_module(f"{__name__}.{MODULES[n]}")


def battery(n: int) -> Battery:
    """The old battery of an exercise not converted yet."""
    return exercise(n).battery


def check(n: int, impl) -> Report:
    """Run exercise ``n``'s checks against ``impl`` in this process (the check cells' self-check).

    Not the grade: ``percolator grade`` runs the answer cells in a sandbox and
    judges outside it.
    """
    module = exercise(n)
    spec = getattr(module, "exercise", None)
    if isinstance(spec, Exercise):
        return run_local(spec, impl)
    return module.battery.run(impl)


__all__ = ["Battery", "BudgetExceeded", "Exercise", "Fail", "GRADE_LOG_ENV", "MODULES", "Report",
           "Result", "battery", "check", "exercise", "require", "run_local"]
