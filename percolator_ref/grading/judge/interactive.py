"""Running trusted checks: a :class:`Trial` per check, in the grader or in the notebook.

The grader (:mod:`..grade.grader`) connects a :class:`~.hub.Hub` to the sandboxed
child's pipe; the notebook's self-check (:func:`self_check`) runs the
student's clients in threads of its own process, through the same channel
messages, the same worlds and the same families of schedules. Only the grade
is trusted: the self-check runs where the student's code could change it.
"""
from __future__ import annotations

import dataclasses
import time

from ..battery import BudgetExceeded, Report, Result
from ..channel import ClientGone
from ..client.host import ClientHost, threads_available
from ..framework import Fail
from .journal import to_json
from .schedules import explore, judged_run
from .hub import CheckTimeout, Diverged, Hub, Violation
from .trusted import TrustedWorld
from percolator_ref.harness.greenlets import gc_paused

MAX_FEEDBACK = 300
BROWSER_PREEMPTIONS = 1     # where threads cannot start (Pyodide): a family's preemption bound


class Counterexample(Fail):
    """A failing schedule: the sentence, and the steps that lead to it (the world's journal
    entries, :class:`~.journal.Entry`)."""

    def __init__(self, text: str, steps: list, schedule: tuple, runs: int):
        super().__init__(text)
        self.steps, self.schedule, self.runs = steps, schedule, runs


class Trial:
    """What a trusted check uses: fresh worlds on this hub, and schedule exploration."""

    def __init__(self, hub: Hub, deadline: float, p: dict, max_preemptions=None, classes=()):
        self.hub, self.deadline, self.p = hub, deadline, p
        self.max_preemptions = max_preemptions      # a lower bound than the family's (browser)
        self.bounded = False                         # did it lower one?
        self.runs = 0
        self.worlds: list = []
        self.classes = tuple(classes)                # the value classes the check names
        self.covered_classes: list = []              # ... and those it built, in order

    def each_class(self):
        """The check's value classes, one by one (enumerated at registration, never drawn)."""
        for name in self.classes:
            self._current = name
            yield name

    def covered(self, name: str, computed: str) -> None:
        """The values built for class ``name`` are of class ``computed`` (from the values
        themselves): they must be the same, else the check's values were drawn wrong."""
        if name != getattr(self, "_current", None) or computed != name:
            raise RuntimeError(f"internal: the values built for value class {name!r} are of "
                               f"class {computed!r}")
        self.covered_classes.append(name)

    def all_covered(self) -> None:
        """A check that passed has covered every value class it names, in order."""
        if tuple(self.covered_classes) != self.classes:
            raise RuntimeError(f"internal: the check names value classes {self.classes}, it "
                               f"covered {tuple(self.covered_classes)}")

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
        if self.max_preemptions is not None and preemptions > self.max_preemptions:
            preemptions, self.bounded = self.max_preemptions, True
        outcome = explore(judged_run(fresh, family, judge), preemptions, crashes)
        self.runs += outcome.runs
        if not outcome.passed:
            raise Counterexample(f"{outcome.failure} (shortest failing schedule: "
                                 f"{len(outcome.steps)} steps, of {outcome.runs} schedules run)",
                                 outcome.steps, outcome.schedule, outcome.runs)
        return outcome.runs


def run_trusted(check, hub: Hub, p: dict, max_preemptions=None, bounded=None) -> Result:
    """Run one trusted check on ``hub``; its Result (never raises for the student's doing).

    ``max_preemptions``: explore the families with at most this many preemptions
    (the browser's self-check); ``bounded``: a set that gets the check's name if
    that lowered a family's bound. If a client the sandbox recalled turns out not to
    be a function of what it heard (:class:`~.hub.Diverged`), the check runs again
    from the start with nothing recalled: its verdict is the one without recall.
    """
    try:
        return _run_trusted(check, hub, p, max_preemptions, bounded)
    except Diverged:                    # the sandbox has stopped recalling (Transcripts.stop)
        return _run_trusted(check, hub, p, max_preemptions, bounded)


def _run_trusted(check, hub: Hub, p: dict, max_preemptions, bounded) -> Result:
    trial = Trial(hub, time.monotonic() + check.limit, p, max_preemptions, check.classes)
    return dataclasses.replace(_verdict(check, trial, p, bounded), runs=trial.runs)


def _verdict(check, trial: Trial, p: dict, bounded) -> Result:
    try:
        try:
            check.fn(trial, p)
            trial.all_covered()
        finally:
            trial.close()
            if trial.bounded and bounded is not None:
                bounded.add(check.name)
    except Counterexample as exc:
        example = {"check": check.name, "failure": _text(exc), "steps": to_json(exc.steps),
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


def local_hub(exercise, answer, threads: bool = True) -> Hub:
    """A hub whose student clients run in this process (the self-check): in threads, or
    in greenlets where threads cannot start (``threads=False``: Pyodide; a looping
    answer then never returns). Its reference clients run in greenlets."""
    hub = Hub(None, exercise.roles)
    host = ClientHost(lambda m: hub.arrive("student", m), exercise.roles, answer, ttl=10.0,
                      greenlets=not threads)
    hub.student_send = host.deliver
    return hub


def self_check(exercise, answer, secret: int = 0, only=None) -> Report:
    """The notebook's check cell: every check, every schedule, as the grader runs them
    (where threads cannot start, as in the browser, the families' schedules with at most
    :data:`BROWSER_PREEMPTIONS` preemptions, and the report says so).

    ``only``: the names of the checks to run (default: every check), e.g. to
    compare the self-check's verdicts with a grade's.
    """
    report = Report(exercise.number, exercise.title, self_check=True)
    params = exercise.params(secret)
    threads = threads_available()
    hub = local_hub(exercise, answer, threads)
    cap, bounded = (None if threads else BROWSER_PREEMPTIONS), set()
    unknown = set(only or ()) - {check.name for check in exercise.checks}
    if unknown:
        raise ValueError(f"only names checks exercise {exercise.number} does not have: "
                         f"{sorted(unknown)}")
    checks = [c for c in exercise.checks if only is None or c.name in only]
    with gc_paused(not threads):                 # Pyodide: see percolator_ref.harness.greenlets.gc_paused
        for check in checks:
            report.results.append(run_trusted(check, hub, params[check.name], cap, bounded))
            if hub.broken:
                hub = local_hub(exercise, answer, threads)
    if bounded:
        report.bound = (f"threads cannot start here, so {len(bounded)} of the family checks ran "
                        f"only the schedules with at most {cap} preemption(s) (the grader runs "
                        f"every schedule with at most 2)")
    return report


__all__ = ["ClientGone", "Counterexample", "Trial", "local_hub", "run_trusted", "self_check"]
