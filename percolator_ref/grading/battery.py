"""What a run of checks reports, and the row-transaction budget that stops endless loops.

A :class:`Report` holds one :class:`Result` per check of an exercise, in
order; ``print(report)`` is its deterministic text (``PASS``, or ``FAIL`` with
the feedback sentence, then ``k/n checks passed``). The text depends only on
the outcomes. A check cell prints it and then calls :meth:`Report.raise_if_failed`,
which raises a short :class:`ChecksFailed` while any check fails: so nbval passes an
exercise exactly when the student's code passes every check, and the exercise need not
store a passing report (it stores none: an unsolved exercise must not look solved).

:func:`guard` attaches a budget to a scenario's cluster: a student's retry
loop that never ends raises :class:`BudgetExceeded` instead of hanging the
notebook's own check cell (the grader also has a time limit per scenario).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..interceptors import Gate, attach

ROW_TRANSACTION_BUDGET = 400


class ChecksFailed(AssertionError):
    """Some check of an exercise failed; the printed report above says which and why."""


class BudgetExceeded(Exception):
    """A scenario ran more row transactions than any correct answer needs (a loop?)."""


@dataclass(frozen=True)
class Result:
    """One check's outcome; a failing family check carries its shortest counterexample."""
    name: str
    passed: bool
    reason: str = ""
    counterexample: Optional[dict] = field(default=None, compare=False, repr=False)
    runs: int = field(default=0, compare=False, repr=False)    # schedules its families ran


@dataclass
class Report:
    """Outcomes of one run of an exercise's checks; ``print(report)`` is the deterministic text."""
    exercise: int
    title: str
    results: list = field(default_factory=list)
    self_check: bool = False      # the notebook's own run (not the grade)
    bound: str = ""               # a self-check that ran less than the grader: what it ran

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def n_passed(self) -> int:
        return sum(r.passed for r in self.results)

    def failures(self) -> str:
        return "; ".join(f"{r.name}: {r.reason}" for r in self.results if not r.passed)

    def raise_if_failed(self) -> None:
        """Raise :class:`ChecksFailed` (one short line) unless every check passed: the end of
        a check cell, after ``print(report)``, so the reasons are read once, in the report."""
        __tracebackhide__ = True          # IPython and pytest show the cell's line, not this
        if not self.results:
            raise ChecksFailed(f"exercise {self.exercise}: no check ran")
        failed = len(self.results) - self.n_passed
        if failed:
            raise ChecksFailed(f"exercise {self.exercise}: {failed} of {len(self.results)} "
                               "checks failed (the FAIL lines above say why)")

    def __str__(self):
        lines = [f"Exercise {self.exercise}: {self.title}"]
        if self.self_check and self.bound:
            lines.append(f"  (self-check: the grader's checks, run in this notebook; {self.bound}; "
                         f"the grade is computed by the grader)")
        elif self.self_check:
            lines.append("  (self-check: the grader's checks and schedules, run in this notebook; "
                         "the grade is computed by the grader)")
        for r in self.results:
            lines.append(f"  PASS  {r.name}" if r.passed else f"  FAIL  {r.name}: {r.reason}")
            if r.counterexample and self.self_check:
                lines.append("        step through it: grading.replay(report).widget()")
        lines.append(f"{self.n_passed}/{len(self.results)} checks passed")
        return "\n".join(lines)

    __repr__ = __str__


def guard(cluster, budget: int = ROW_TRANSACTION_BUDGET):
    """Stop a scenario that loops: raise BudgetExceeded after ``budget`` row transactions."""
    count = [0]

    def gate(client, table, row, step):
        count[0] += 1
        if count[0] > budget:
            raise BudgetExceeded(f"more than {budget} row transactions (an endless retry loop?)")
    attach(cluster.bigtable, Gate(gate))
    return cluster
