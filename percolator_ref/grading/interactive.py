"""Running trusted checks: a :class:`Trial` per check, in the grader or in the notebook.

The grader (:mod:`.grader`) connects a :class:`~.trusted.Hub` to the sandboxed
child's pipe; the notebook's self-check (:func:`self_check`) runs the
student's clients in threads of its own process, through the same channel
messages, the same worlds and the same families of schedules. Only the grade
is trusted: the self-check runs where the student's code could change it.
"""
from __future__ import annotations

import time

from .battery import BudgetExceeded, Report, Result
from .channel import ClientGone
from .clients import ClientHost, threads_available
from .framework import Fail
from .schedules import explore, judged_run
from .trusted import CheckTimeout, Hub, TrustedWorld, Violation

MAX_FEEDBACK = 300


class Counterexample(Fail):
    """A failing schedule: the sentence, and the steps that lead to it."""

    def __init__(self, text: str, steps: list, schedule: tuple, runs: int):
        super().__init__(text)
        self.steps, self.schedule, self.runs = steps, schedule, runs


class Trial:
    """What a trusted check uses: fresh worlds on this hub, and schedule exploration."""

    def __init__(self, hub: Hub, deadline: float, p: dict):
        self.hub, self.deadline, self.p = hub, deadline, p
        self.runs = 0
        self.worlds: list = []

    def world(self, ttl: float = 10.0) -> TrustedWorld:
        """A fresh world whose oracle starts at ``p["t0"]``."""
        self.worlds.append(TrustedWorld(self.hub, self.p["t0"], self.deadline, ttl))
        return self.worlds[-1]

    def close(self) -> None:
        for w in self.worlds:
            w.close()
        self.worlds.clear()

    def explore(self, family, judge, ttl: float = 10.0, preemptions: int = 2,
                crashes: int = 1, world=None) -> int:
        """Run every schedule of ``family`` within the bounds; Counterexample on a failure.
        ``world``: makes each schedule's fresh world (default: a :class:`TrustedWorld`)."""
        def fresh():
            if world is not None:
                return world()
            return TrustedWorld(self.hub, self.p["t0"], self.deadline, ttl)
        outcome = explore(judged_run(fresh, family, judge), preemptions, crashes)
        self.runs += outcome.runs
        if not outcome.passed:
            raise Counterexample(f"{outcome.failure} (shortest failing schedule: "
                                 f"{len(outcome.steps)} steps, of {outcome.runs} schedules run)",
                                 outcome.steps, outcome.schedule, outcome.runs)
        return outcome.runs


def run_trusted(check, hub: Hub, p: dict) -> Result:
    """Run one trusted check on ``hub``; its Result (never raises for the student's doing)."""
    trial = Trial(hub, time.monotonic() + check.limit, p)
    try:
        try:
            check.fn(trial, p)
        finally:
            trial.close()
    except Counterexample as exc:
        example = {"check": check.name, "failure": _text(exc), "steps": exc.steps,
                   "schedule": [list(c) for c in exc.schedule]}
        return Result(check.name, False, _text(exc), example)
    except Fail as exc:
        return Result(check.name, False, _text(exc))
    except CheckTimeout:
        return Result(check.name, False, f"it ran past its time limit of {check.limit:g} s "
                                         f"(an endless loop?)")
    except (Violation, BudgetExceeded) as exc:
        return Result(check.name, False, _text(exc))
    return Result(check.name, True)


def _text(exc) -> str:
    return " ".join(str(exc).split())[:MAX_FEEDBACK]


def local_hub(exercise, answer) -> Hub:
    """A hub whose student clients run in this process (the self-check): in threads, or
    in greenlets where threads cannot start (Pyodide; a looping answer then never returns)."""
    greenlets = not threads_available()
    hub = Hub(None, exercise.roles, greenlets)
    host = ClientHost(lambda m: hub.arrive("student", m), exercise.roles, answer, ttl=10.0,
                      greenlets=greenlets)
    hub.student_send = host.deliver
    return hub


def self_check(exercise, answer, secret: int = 0) -> Report:
    """The notebook's check cell: every check, every schedule, as the grader runs them."""
    report = Report(exercise.number, exercise.title, self_check=True)
    params = exercise.params(secret)
    hub = local_hub(exercise, answer)
    for check in exercise.checks:
        report.results.append(run_trusted(check, hub, params[check.name]))
        if hub.broken:
            hub = local_hub(exercise, answer)
    return report


__all__ = ["ClientGone", "Counterexample", "Trial", "local_hub", "run_trusted", "self_check"]
