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

Partial-order reduction (sleep sets)
------------------------------------
A *transition* is what one choice runs: the chosen client's pending request
served, then that client alone until its next scheduled request (or its
answer); or the chosen client's crash. The world records each transition's
*footprint* (:meth:`~.trusted.TrustedWorld.touch`): what it read or wrote of
the world's state, taken from the messages served — ``("row", table, row)``
read for every row transaction, written when it applied mutations;
``("table", t)`` read by a listing (it overlaps every row of ``t``); the
oracle written by a timestamp, read by a peek; the clock read by ``now`` and
the lock service, written by ``sleep``; one token of the lock service
(``("ls", name)``: every call the channel reaches touches only the token it
names) written by register/heartbeat/crash/release and by the crash of a
client that registered or heartbeat that name, read by is_alive/status; the history written when a reference client
began a transaction; the client itself written by each of its transitions.
A world whose state these do not cover (a subclass, a check's interceptor)
marks every transition as touching everything.

Two transitions are *independent* when they belong to different clients and
neither writes what the other reads or writes (one row's reads commute; so do
transitions on different rows). Then running them in either order from the
same state reaches the same state, and each sends its client the same
messages: a transition depends only on what it reads and on its own client,
and a client is a function of what it heard. A crash is a transition of its
client (dependent on everything that client does) that writes its lock
service tokens. Judges read the final state and each client's own steps; a judge
that reads the order of two clients' steps in the log (exercise 8's "one ran
before the other") sees the same order in the run kept, as the equivalence
run checks.

Sleep sets (Godefroid) use it: after the run that took transition ``t`` at a
decision point, a sibling branch ``u`` carries ``t`` asleep while ``t`` is
independent of everything run since; an asleep transition is not chosen (a
run whose every option is asleep stops, :class:`Merged`): every schedule that
would run it there is equivalent to one in ``t``'s branch. Sleep sets alone
still reach every state; they cut the orders.

Combined with the preemption bound that argument can fail (the equivalent
schedule in ``t``'s branch may spend more preemptions, and be outside the
bound). So ``t`` is put asleep in ``u``'s branch only where moving ``t`` to
the front never costs more (checked case by case on the preemption count,
see :meth:`Chooser.cheap`): ``t`` is a crash (a crash neither preempts nor
changes who ran last); or ``t`` continues the client that ran last (then
``u`` was the preemption and moving ``t`` first saves it); or ``t`` was its
client's last transition and cost no more than ``u``. Inherited sleepers keep
that property. A state met again (the merging above) is merged only if the
earlier visit's sleep set was no larger. The switch ``PERCOLATOR_POR=0`` (or
``explore(..., reduce=False)``) turns the reduction off; what it may change is
how many schedules run, never a verdict (tools/por_equivalence.py checks the
catalogue both ways). Footprints name rows, whose names the secret chooses
injectively, so which schedules run still does not depend on the secret.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..battery import BudgetExceeded
from ..framework import Fail
from .hub import CheckTimeout, Violation


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
    drowsy: dict = field(default_factory=dict)       # {option: footprint}: asleep after the
                                                     # prefix's last choice if independent of it
    preemptions: Optional[int] = None                # the bounds (None: unbounded)
    crashes: Optional[int] = None
    sleep: dict = field(default_factory=dict)        # asleep now: {option: footprint}
    sleeps: list = field(default_factory=list)       # per decision: the sleep set there
    prints: list = field(default_factory=list)       # per decision: the footprint of its choice
    after: list = field(default_factory=list)        # per decision: its client still waiting after?
    asleep: bool = False                             # stopped: every option asleep

    def choose(self, ready: list, world=None):
        """``("go" or "crash", client)`` for this decision point.

        With ``world`` (its ``log`` of steps, its ``fingerprint()``): :class:`Merged`
        when this run is already longer than the shortest failure found, or when an
        earlier run met this state with no more steps, no more of the bounds used and
        no more asleep; also when every option within the bounds is asleep.
        """
        i = len(self.taken)
        if i and self.prints[i - 1] is None:
            self.sleep = {}                          # what ran last is unknown: nothing sleeps
        if world is not None and self.limit is not None and len(world.log) > self.limit:
            raise Merged()
        if world is not None and self.seen is not None and i >= len(self.prefix):
            self.visit(world.fingerprint(), len(world.log))
        opts = [("go", c.label) for c in ready] + [("crash", c.label) for c in ready if c.crashable]
        stay = ("go", self.last)
        if i < len(self.prefix) and self.prefix[i] in opts:
            choice = self.prefix[i]
        else:
            allowed = [o for o in [stay] + opts if o in opts and o not in self.sleep
                       and self.within(o, stay in opts, self.switches, self.crashed)]
            if not allowed:
                self.asleep = True
                raise Merged()
            choice = allowed[0]                      # stay, else the first waiting client
        self.options.append(opts)
        self.lasts.append(self.last)
        self.bounds.append((self.switches, self.crashed))
        self.sleeps.append(dict(self.sleep))
        self.prints.append(None)
        self.after.append(None)
        self.switches += choice[0] == "go" and stay in opts and choice != stay
        self.crashed += choice[0] == "crash"
        self.taken.append(choice)
        if choice[0] == "go":
            self.last = choice[1]
        return choice[0], next(c for c in ready if c.label == choice[1])

    def within(self, option, stay_waits: bool, switches: int, crashed: int) -> bool:
        """May ``option`` be taken with ``switches`` preemptions and ``crashed`` crashes
        spent (no bound given: yes)? ``stay_waits``: the client that ran last waits."""
        if option[0] == "crash":
            return self.crashes is None or crashed + 1 <= self.crashes
        if stay_waits and option != ("go", self.last):
            return self.preemptions is None or switches + 1 <= self.preemptions
        return True

    def executed(self, footprint: frozenset, waits: bool) -> None:
        """The world ran this run's last choice: it touched ``footprint`` (see
        :meth:`~.trusted.TrustedWorld.touch`); ``waits``: its client waits at another
        scheduled request. Wakes every sleeper it does not commute with."""
        i = len(self.taken) - 1
        self.prints[i], self.after[i] = footprint, waits
        asleep = self.drowsy if i == len(self.prefix) - 1 else self.sleep
        self.sleep = {o: f for o, f in asleep.items() if independent(f, footprint)}

    def visit(self, fingerprint, steps: int) -> None:
        """Remember this decision point; :class:`Merged` if an earlier run met the same one
        (same state, same last client) after no more steps, preemptions and crashes, and
        with no more asleep: that run's subtree holds every schedule of this one's, each
        no longer."""
        if fingerprint is None:
            return
        mine, asleep = (self.switches, self.crashed, steps), frozenset(self.sleep)
        budgets = self.seen.setdefault((fingerprint, self.last), [])
        if any(all(a <= b for a, b in zip(earlier, mine)) and slept <= asleep
               for earlier, slept in budgets):
            raise Merged()
        budgets.append((mine, asleep))

    def alternatives(self, i: int, preemptions: int, crashes: int, reduce: bool = False) -> list:
        """``(prefix, drowsy)`` for each branch at decision ``i`` within the bounds and not
        asleep there; ``reduce``: ``drowsy`` holds what sleeps in that branch if it commutes
        with the branch's first transition (this run's choice at ``i`` where :meth:`cheap`,
        and what slept at ``i``)."""
        stay = ("go", self.lasts[i])
        switches, crashed = self.bounds[i]
        out = []
        for option in self.options[i]:
            if option == self.taken[i] or option in self.sleeps[i]:
                continue
            if option[0] == "crash" and crashed + 1 > crashes:
                continue
            if option[0] == "go" and stay in self.options[i] and switches + 1 > preemptions:
                continue
            drowsy = dict(self.sleeps[i]) if reduce else {}
            if reduce and self.prints[i] is not None and self.cheap(i, option):
                drowsy[self.taken[i]] = self.prints[i]
            out.append((tuple(self.taken[:i]) + (option,), drowsy))
        return out

    def cheap(self, i: int, u) -> bool:
        """May this run's choice ``t`` at decision ``i`` sleep in the branch that takes ``u``
        there? Only if every schedule ``s u v.. t w`` (the v's commuting with ``t``) costs at
        least the preemptions of ``s t u v.. w``, its equivalent in ``t``'s branch:

        - ``t`` is a crash: it neither preempts nor changes who ran last, and after it
          its client no longer waits, so ``u`` costs no more there;
        - ``t`` continues the client that ran last (which waits): ``u`` at ``s`` is a
          preemption (1) that moving ``t`` first turns into at most 1 after ``t``; the
          v's cost alike; ``t`` after the v's costs whatever the last of them left,
          which bounds what that client's switch costs in the other order;
        - ``t`` was its client's last transition and costs no more at ``s`` than ``u``:
          after ``t`` its client never waits, so ``u`` and what follows cost no more.
        """
        t = self.taken[i]
        stay = ("go", self.lasts[i])
        waits = stay in self.options[i]
        if t[0] == "crash" or (waits and t == stay):
            return True

        def cost(o):
            return int(o[0] == "go" and waits and o != stay)
        return self.after[i] is False and cost(t) <= cost(u)


def independent(a: Optional[frozenset], b: Optional[frozenset]) -> bool:
    """Do transitions with footprints ``a`` and ``b`` commute (see the module's doc)? Unknown
    footprints (None) never do; one client's transitions never do (each writes its client)."""
    if a is None or b is None:
        return False
    for what, mode in a:
        for other, other_mode in b:
            if "w" in (mode, other_mode) and _overlap(what, other):
                return False
    return True


def _overlap(x: tuple, y: tuple) -> bool:
    if x == y or x == ("*",) or y == ("*",):
        return True
    rows = {x[0], y[0]} == {"row", "table"}
    return rows and x[1] == y[1]


def reduction_on() -> bool:
    """The reduction's switch: on unless the environment sets ``PERCOLATOR_POR=0``."""
    return os.environ.get("PERCOLATOR_POR", "1") != "0"


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
    asleep: int = 0                                  # runs stopped: every option asleep
    failure: Optional[str] = None
    schedule: tuple = ()
    steps: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.failure is None


def explore(run: Callable, preemptions: int = 2, crashes: int = 1,
            max_runs: int = 5000, reduce: Optional[bool] = None) -> Outcome:
    """Run every schedule within the bounds; keep the shortest failing one.

    Two prunings keep that exact: a run stops (:class:`Merged`) where it meets a
    decision point that an earlier run met in the same state with no more steps
    and no more of the bounds spent (the earlier run's subtree holds every
    continuation, each no longer), and once it is longer than the shortest
    failure found so far (no continuation can be shorter).

    ``run(chooser, record) -> (failure sentence or None, log of steps)``; ``record``:
    True for the failure's run again, whose log is reported. A time
    limit or a protocol violation stops the search at once (it is the
    failure). ``reduce``: sleep sets (module doc); None: :func:`reduction_on`.
    """
    reduce = reduction_on() if reduce is None else reduce
    outcome, todo, seen = Outcome(), [((), {})], {}
    while todo:
        if outcome.runs >= max_runs:
            raise RuntimeError(f"internal: more than {max_runs} schedules: bound the family")
        limit = len(outcome.steps) if outcome.failure is not None else None
        prefix, drowsy = todo.pop()
        chooser = Chooser(prefix, seen=seen, limit=limit, drowsy=drowsy,
                          preemptions=preemptions, crashes=crashes)
        failure = _tally(outcome, chooser, *run(chooser, False))
        if failure is not None and failure.startswith(LOOPED):
            break                                # a loop: one is enough (each costs a budget)
        for i in range(len(chooser.taken) - 1, len(chooser.prefix) - 1, -1):
            todo.extend(reversed(chooser.alternatives(i, preemptions, crashes, reduce)))
    if outcome.failure is not None:             # run it again, keeping the cells of each step
        again, steps = run(Chooser(outcome.schedule), True)
        if again is not None:                   # a failure seen is never taken back (a run
            outcome.failure, outcome.steps = again, steps   # that passes again keeps it)
    return outcome


def _tally(outcome: Outcome, chooser: Chooser, failure, steps: list):
    """Count one run in ``outcome`` (a merged or sleeping one apart) and keep its failure if
    it is the shortest so far; the run's failure, None for a merged run."""
    if failure is MERGED:
        outcome.merged += chooser.asleep is False
        outcome.asleep += chooser.asleep
        return None
    outcome.runs += 1
    if failure is not None and _shorter(steps, chooser.taken, outcome):
        outcome.failure, outcome.schedule, outcome.steps = failure, tuple(chooser.taken), steps
    return failure


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
