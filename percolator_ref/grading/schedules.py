"""Every small interleaving: systematic enumeration of a family's schedules.

A schedule is the sequence of choices the trusted world's scheduler makes:
at each point where every live client waits at a scheduled request (a row
transaction or a timestamp), which client goes next, or which client crashes
there. :func:`explore` enumerates them by stateless search: each schedule is
run from scratch in a fresh world; a run follows its prefix of choices and
then the default (keep running the client that ran last; else the first
waiting client), and every other option at every later point starts a new
prefix.

Coverage is bounded, never sampled: every schedule with at most
``preemptions`` switches away from a client that could have gone on, and at
most ``crashes`` crashes, is run. Two preemptions put any two requests of two
clients in both orders (run A up to its request, switch to B up to its
request, switch back), so every pair of conflicting messages is tried both
ways. Nothing here depends on the secret: the secret chooses values and
names, never which schedules run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .battery import BudgetExceeded
from .framework import Fail
from .trusted import CheckTimeout, Violation


@dataclass
class Chooser:
    """Follows ``prefix``, then the default; records each decision's options."""
    prefix: tuple = ()
    taken: list = field(default_factory=list)
    options: list = field(default_factory=list)      # per decision: [(action, label), ...]
    lasts: list = field(default_factory=list)        # per decision: the client that ran last
    bounds: list = field(default_factory=list)       # per decision: (preemptions, crashes) before
    last: Optional[str] = None
    switches: int = 0
    crashed: int = 0
    seen: Optional[dict] = None                      # shared by the runs of one exploration
    limit: Optional[int] = None                      # steps of the shortest failure so far

    def choose(self, ready: list, world=None):
        """``("go" or "crash", client)`` for this decision point.

        With ``world`` (its ``log`` of steps, its ``fingerprint()``): :class:`Merged`
        when this run is already longer than the shortest failure found, or when an
        earlier run met this state with no more steps and no more of the bounds used.
        """
        i = len(self.taken)
        if world is not None and self.limit is not None and len(world.log) > self.limit:
            raise Merged()
        if world is not None and self.seen is not None and i >= len(self.prefix):
            self.visit(world.fingerprint(), len(world.log))
        opts = [("go", c.label) for c in ready] + [("crash", c.label) for c in ready if c.crashable]
        stay = ("go", self.last)
        default = stay if stay in opts else opts[0]
        choice = self.prefix[i] if i < len(self.prefix) and self.prefix[i] in opts else default
        self.options.append(opts)
        self.lasts.append(self.last)
        self.bounds.append((self.switches, self.crashed))
        self.switches += choice[0] == "go" and stay in opts and choice != stay
        self.crashed += choice[0] == "crash"
        self.taken.append(choice)
        if choice[0] == "go":
            self.last = choice[1]
        return choice[0], next(c for c in ready if c.label == choice[1])

    def visit(self, fingerprint, steps: int) -> None:
        """Remember this decision point; :class:`Merged` if an earlier run met the same one
        (same state, same last client) after no more steps, preemptions and crashes: that
        run's subtree holds every schedule of this one's, each no longer."""
        if fingerprint is None:
            return
        mine = (self.switches, self.crashed, steps)
        budgets = self.seen.setdefault((fingerprint, self.last), [])
        if any(all(a <= b for a, b in zip(earlier, mine)) for earlier in budgets):
            raise Merged()
        budgets.append(mine)

    def alternatives(self, i: int, preemptions: int, crashes: int) -> list:
        """Prefixes that branch at decision ``i`` within the bounds."""
        stay = ("go", self.lasts[i])
        switches, crashed = self.bounds[i]
        out = []
        for option in self.options[i]:
            if option == self.taken[i]:
                continue
            if option[0] == "crash" and crashed + 1 > crashes:
                continue
            if option[0] == "go" and stay in self.options[i] and switches + 1 > preemptions:
                continue
            out.append(tuple(self.taken[:i]) + (option,))
        return out


class Merged(Exception):
    """Stop this run here: its every continuation is covered by an earlier run's subtree
    (a state met before), or is longer than the shortest failure found."""


LOOPED = "the clients (or a reader after them) ran "
MERGED = object()


@dataclass
class Outcome:
    """What exploring a family found: how many schedules ran, the shortest failure."""
    runs: int = 0
    merged: int = 0
    failure: Optional[str] = None
    schedule: tuple = ()
    steps: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.failure is None


def explore(run: Callable, preemptions: int = 2, crashes: int = 1,
            max_runs: int = 5000) -> Outcome:
    """Run every schedule within the bounds; keep the shortest failing one.

    Two prunings keep that exact: a run stops (:class:`Merged`) where it meets a
    decision point that an earlier run met in the same state with no more steps
    and no more of the bounds spent (the earlier run's subtree holds every
    continuation, each no longer), and once it is longer than the shortest
    failure found so far (no continuation can be shorter).

    ``run(chooser, record) -> (failure sentence or None, log of steps)``; ``record``:
    keep the cells after each step (only for the failure reported). A time
    limit or a protocol violation stops the search at once (it is the
    failure).
    """
    outcome, todo, seen = Outcome(), [()], {}
    while todo:
        if outcome.runs >= max_runs:
            raise RuntimeError(f"internal: more than {max_runs} schedules: bound the family")
        limit = len(outcome.steps) if outcome.failure is not None else None
        chooser = Chooser(tuple(todo.pop()), seen=seen, limit=limit)
        failure, steps = run(chooser, False)
        if failure is MERGED:
            outcome.merged += 1
            failure = None
        else:
            outcome.runs += 1
        if failure is not None and _shorter(steps, chooser.taken, outcome):
            outcome.failure, outcome.schedule, outcome.steps = failure, tuple(chooser.taken), steps
        if failure is not None and failure.startswith(LOOPED):
            break                                # a loop: one is enough (each costs a budget)
        for i in range(len(chooser.taken) - 1, len(chooser.prefix) - 1, -1):
            todo.extend(reversed(chooser.alternatives(i, preemptions, crashes)))
    if outcome.failure is not None:             # run it again, keeping the cells of each step
        again, steps = run(Chooser(outcome.schedule), True)
        if again is not None:                   # a failure seen is never taken back (a run
            outcome.failure, outcome.steps = again, steps   # that passes again keeps it)
    return outcome


def _shorter(steps: list, taken: list, best: Outcome) -> bool:
    if best.failure is None:
        return True
    return (len(steps), tuple(taken)) < (len(best.steps), best.schedule)


def judged_run(world_factory: Callable, family: Callable, judge: Callable):
    """A ``run`` for :func:`explore`: fresh world, family, settle, judge.

    ``family(w) -> participants``; ``judge(w, clients)`` raises :class:`Fail`.
    Timeouts and violations propagate (they end the check).
    """
    def run(chooser, record: bool):
        w = world_factory()
        w.recording = record
        try:
            clients = w.run(family(w), chooser)
            w.settle()
            judge(w, {c.label: c for c in clients})
        except Fail as exc:
            return str(exc), w.log
        except BudgetExceeded as exc:
            return LOOPED + str(exc), w.log
        except Merged:
            return MERGED, w.log
        except (CheckTimeout, Violation):
            raise
        finally:
            w.close()
        return None, w.log
    return run
