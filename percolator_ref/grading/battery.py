"""Batteries of scenario checks, and the deterministic report they print.

A :class:`Battery` is an ordered list of named checks for one exercise. Each
check is a function ``check(impl)`` that builds a small scenario on a fresh
:class:`~percolator_ref.Cluster` (manual clock, fixed timestamps), plugs the
student's ``impl`` in, and raises ``AssertionError("short reason")`` when
the implementation misbehaves. :meth:`Battery.run` never raises: any
exception inside a check is that check's FAIL, with a short reason.

The report text depends only on the outcomes, so a notebook can store the
passing report and nbval compares it: the exercise passes exactly when the
student's code passes every check.

When the environment variable ``PERCOLATOR_GRADE_LOG`` names a file, each run
appends one JSON line with its results (``percolator grade`` reads it to
print a per-check summary).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable

from ..interceptors import Gate

GRADE_LOG_ENV = "PERCOLATOR_GRADE_LOG"
ROW_TRANSACTION_BUDGET = 400


class BudgetExceeded(Exception):
    """A scenario ran more row transactions than any correct answer needs (a loop?)."""


@dataclass(frozen=True)
class Check:
    name: str
    fn: Callable
    doc: str = ""


@dataclass(frozen=True)
class Result:
    name: str
    passed: bool
    reason: str = ""


@dataclass
class Report:
    """Outcomes of one battery run; ``print(report)`` is the deterministic text."""
    exercise: int
    title: str
    results: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def n_passed(self) -> int:
        return sum(r.passed for r in self.results)

    def failures(self) -> str:
        return "; ".join(f"{r.name}: {r.reason}" for r in self.results if not r.passed)

    def __str__(self):
        lines = [f"Exercise {self.exercise}: {self.title}"]
        for r in self.results:
            lines.append(f"  PASS  {r.name}" if r.passed else f"  FAIL  {r.name}: {r.reason}")
        lines.append(f"{self.n_passed}/{len(self.results)} checks passed")
        return "\n".join(lines)

    __repr__ = __str__

    def to_json(self) -> dict:
        return {"exercise": self.exercise, "title": self.title,
                "results": [{"name": r.name, "passed": r.passed, "reason": r.reason}
                            for r in self.results]}


def _reason(exc: BaseException) -> str:
    """A one-line, deterministic reason for a failed check."""
    if isinstance(exc, AssertionError):
        text = str(exc) or "assertion failed"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


class Battery:
    """The scenario checks of exercise ``exercise``, run in order by :meth:`run`."""

    def __init__(self, exercise: int, title: str):
        self.exercise = exercise
        self.title = title
        self.checks: list[Check] = []

    def check(self, name: str) -> Callable:
        """Decorator: register ``fn(impl)`` as the check called ``name``."""
        def register(fn):
            if any(c.name == name for c in self.checks):
                raise ValueError(f"duplicate check name {name!r}")
            self.checks.append(Check(name, fn, (fn.__doc__ or "").strip()))
            return fn
        return register

    def run(self, impl) -> Report:
        """Run every check against ``impl``; never raises."""
        report = Report(self.exercise, self.title)
        for check in self.checks:
            try:
                check.fn(impl)
            except BaseException as exc:      # noqa: BLE001 - a student's bug is a FAIL
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                report.results.append(Result(check.name, False, _reason(exc)))
            else:
                report.results.append(Result(check.name, True))
        _log(report)
        return report

    def __len__(self):
        return len(self.checks)

    def __repr__(self):
        return f"<Battery exercise {self.exercise}: {self.title}, {len(self.checks)} checks>"


def _log(report: Report) -> None:
    path = os.environ.get(GRADE_LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(report.to_json()) + "\n")


def guard(cluster, budget: int = ROW_TRANSACTION_BUDGET):
    """Stop a scenario that loops: raise BudgetExceeded after ``budget`` row transactions."""
    count = [0]

    def gate(client, table, row, step):
        count[0] += 1
        if count[0] > budget:
            raise BudgetExceeded(f"more than {budget} row transactions (an endless retry loop?)")
    cluster.bigtable.interceptors.append(Gate(gate))
    return cluster
