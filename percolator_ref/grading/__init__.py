"""Graded exercises: batteries of scenario checks, mutants, generator, grader.

Each exercise ``N`` has a module ``exNN_<name>`` defining ``battery`` (the
checks), ``reference`` (the reference implementation's answer, which passes)
and ``mutants`` (known-wrong answers, each of which the battery must reject).
The notebooks in ``solutions/`` are the source of truth for the exercises in
``exercises/`` (:mod:`.generate`); :mod:`.nbgrade` grades a student's
notebook through nbval.
"""
from __future__ import annotations

import importlib

from .battery import GRADE_LOG_ENV, Battery, BudgetExceeded, Report, Result

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
    return exercise(n).battery


def check(n: int, impl) -> Report:
    """Run exercise ``n``'s battery against ``impl`` (what the notebooks' check cells call)."""
    return battery(n).run(impl)


__all__ = ["Battery", "BudgetExceeded", "GRADE_LOG_ENV", "MODULES", "Report", "Result",
           "battery", "check", "exercise"]
