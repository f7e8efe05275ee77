"""Exercise 4: lazy lock cleanup (§2.2, BackoffAndMaybeCleanupLock), checked by the trusted world.

The student writes ``backoff_and_maybe_cleanup_lock(session, cell, lock,
attempt)``: what a reader does when its snapshot read met ``lock`` on
``cell`` at or below its start_ts. The scenarios plug it in where the
reference's ``get`` and ``scan`` call it (``cleanup.backoff_and_maybe_cleanup_lock``),
or call it directly.

While grading, the reference cleanup is hidden: the function itself and the
steps it is made of (``cleanup_lock``, ``resolve_primary``, ``roll_forward``,
``roll_back``), so the student resolves the lock with the row-level helpers of
:mod:`percolator_ref.rows`. The worlds are written cell by cell
(:mod:`.protocol_world`); the readers are reference transactions (Get is not
hidden here). The student's function runs in the sandbox, as the cleanup of
clients of the grader's :class:`~.trusted.TrustedWorld`, which holds the
cells and judges what the clients answered against its own record.
"""
from __future__ import annotations

import math

from percolator_ref import Transaction, cleanup
from percolator_ref.interceptors import attach
from percolator_ref.model import Cell, notify_col
from percolator_ref.step import Step

from ..client.ex04_cleanup import exercise
from ..framework import outcome, require
from .invariants import answered_reads, history_with, judge_history, protocol_invariants
from .participants import Participant
from .protocol_world import (Once, TABLE, TTL, amounts, is_write, locks, returned, said, show,
                             timeline, value_at, versions_in)


BALANCES = ("b0", "j0", "b1", "j1", "j2", "b2")
BOB, JOE = Cell(TABLE, "Bob", "bal"), Cell(TABLE, "Joe", "bal")


def _p(*stamps, **more):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *BALANCES),
                            **{k: v(rng) for k, v in more.items()})


def _crashed(trial, p, delete=False, committed=False) -> tuple:
    """A world in which W died mid-transfer (:meth:`World.crashed_transfer`); the transfer."""
    w = trial.world()
    return w, w.crashed_transfer(p, delete, committed)


def _read(w, p, row: str) -> dict:
    """A reader at ``s_r`` (your cleanup plugged in) reads ``row``'s bal: its answer, the cells."""
    got = _read_at(w, p["s_r"], row)
    return {"get": got, "cells": w.cells()}


def _read_at(w, start: int, row: str, column: str = "bal") -> dict:
    w.reach(start)
    reader = w.client("reader", [[row, column]])
    result = reader.answer
    if isinstance(result, dict) and isinstance(result.get("value"), list) \
            and len(result["value"]) == 1:
        return {"value": result["value"][0]}
    return result if isinstance(result, dict) else {"raised": "no answer"}


def _call(w, cell, lock, attempt, client="R") -> dict:
    """One call of your function; what it answered and how long it slept on the world's clock."""
    start = w.cluster.clock.now()
    c = w.client("call", cell, lock, attempt, client)
    return {"call": c.answer, "slept": w.cluster.clock.now() - start}


def _gone(cells, row: str, start: int) -> list:
    """What is left of the transaction that started at ``start`` on ``row``: lock, data."""
    return [f"{kind} at {start} ({show(found)})" for kind in ("lock", "data")
            if (found := value_at(cells, row, f"bal:{kind}", start)) is not None]


# -- 1. a live holder --------------------------------------------------------------------

FIRST, FEW, MANY = "the first attempt", "within ten backoffs", "past ten backoffs"


def _attempt_class(attempt: int) -> str:
    return FIRST if attempt == 0 else FEW if attempt <= 10 else MANY


@exercise.check("a live holder: back off one step, change nothing",
                params=_p("s0", "c0", "s_w", few=lambda rng: rng.randrange(2, 9),
                          many=lambda rng: rng.randrange(11, 40)),
                classes=(FIRST, FEW, MANY))
def _live(trial, p):
    for value_class in trial.each_class():
        attempt = {FIRST: 0, FEW: p["few"], MANY: p["many"]}[value_class]
        trial.covered(value_class, _attempt_class(attempt))
        w = trial.world()
        w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
        w.locked({("Bob", "bal"): p["b1"]}, p["s_w"], "W")
        lock, before = w.lock_on("Bob", "bal"), w.cells()
        call = _call(w, BOB, lock, attempt)
        _live_ok({"call": call, "unchanged": w.cells() == before, "cells": w.cells()}, attempt)


def _live_ok(obs, attempt: int):
    call = obs.get("call")
    require(obs.get("unchanged") is True,
            f"W, the holder of Bob.bal's lock, is alive (attempt {attempt}): cleaning its lock up "
            f"would abort a transaction that may still commit (§2.2), however long it has held "
            f"it; your cleanup changed the store (locks now: {locks(obs.get('cells'))})")
    require(isinstance(call, dict) and "call" in call, "malformed observations")
    require("raised" not in call["call"], f"W (alive) holds the lock on Bob.bal: back off "
                                          f"(attempt {attempt}); yours {said(call['call'])}")
    want, slept = cleanup.backoff_delay(attempt, TTL), call.get("slept")
    require(isinstance(slept, (int, float)) and math.isclose(slept, want, abs_tol=1e-9),
            f"W, the holder of Bob.bal's lock, is alive: the reader waits one step of "
            f"exponential backoff ({want:g} s at attempt {attempt}: session.backoff) and "
            f"reads again; yours waited {_seconds(slept)}")


def _seconds(value) -> str:
    return f"{value:.4g} s" if isinstance(value, (int, float)) else repr(value)


# -- 2. rolling back ---------------------------------------------------------------------------

LOCKED, REWRITTEN = ("its primary still locked",
                     "its primary rolled back by a cleaner, then written by a later transaction")


def _primary_class(w, p) -> str:
    """What the world's primary Bob.bal holds of W: its lock, or no trace of W and a later
    transaction's write record."""
    cells = w.cells()
    if value_at(cells, "Bob", "bal:lock", p["s_w"]) is not None:
        return LOCKED
    later = [v for ts, v in versions_in(cells, "Bob", "bal:write") if ts > p["s_w"]]
    return REWRITTEN if later and not any(is_write(v, p["s_w"]) for v in later) else "other"


@exercise.check("crashed before its commit point: a reader of a secondary rolls it all back",
                params=_p("s0", "c0", "s_w", "s_v", "c_v", "s_r"), classes=(LOCKED, REWRITTEN))
def _back_secondary(trial, p):
    for value_class in trial.each_class():
        w, _ = _crashed(trial, p)
        if value_class == REWRITTEN:
            w.rolled_back([("Bob", "bal")], p["s_w"])          # a cleaner decided W aborted
            w.committed({("Bob", "bal"): p["b2"]}, p["s_v"], p["c_v"])    # then V wrote Bob
        trial.covered(value_class, _primary_class(w, p))
        _back_secondary_ok(_read(w, p, "Joe"), p, value_class)


def _back_secondary_ok(obs, p, value_class=LOCKED):
    if value_class == LOCKED:
        rule = ("W died before its commit point (its primary Bob.bal is still locked): erase the "
                "primary's lock first, so W can never commit, then roll Joe.bal back")
    else:
        rule = (f"a cleaner rolled W back at its primary Bob.bal, and V then wrote Bob.bal "
                f"(write record at {p['c_v']} pointing at {p['s_v']}): no write record there "
                f"points at W's start_ts {p['s_w']}, so W did not commit: roll Joe.bal back "
                f"(V's newer record is not W's)")
    require(returned(obs.get("get"), p["j0"]), f"{rule}; the reader then reads {p['j0']}; "
                                               f"it {said(obs.get('get'))}")
    cells = obs.get("cells")
    for row, old in (("Bob", p["b0"]), ("Joe", p["j0"])):
        left = _gone(cells, row, p["s_w"])
        require(left == [], f"{rule}: rolling back erases the lock and the data at {p['s_w']}; "
                            f"{row}.bal still has {', '.join(left)}")
        require(value_at(cells, row, "bal:data", p["s0"]) == old and
                is_write(value_at(cells, row, "bal:write", p["c0"]), p["s0"]),
                f"{rule}, erasing only W's versions (at {p['s_w']}); {row}.bal lost its committed "
                f"version (data {old} at {p['s0']}, write record at {p['c0']})")
    stray = [f"{show(v)} at {ts}" for ts, v in versions_in(cells, "Joe", "bal:write")
             if ts != p["c0"]]
    require(stray == [], f"{rule}; Joe.bal has new write records: {', '.join(stray)}")


@exercise.check("crashed before its commit point: a reader of the primary rolls it back",
                params=_p("s0", "c0", "s_w", "s_r"))
def _back_primary(trial, p):
    w, _ = _crashed(trial, p)
    _back_primary_ok(_read(w, p, "Bob"), p)


def _back_primary_ok(obs, p):
    rule = (f"the reader met W's primary lock on Bob.bal (at {p['s_w']}); W is dead and did not "
            f"commit: roll Bob.bal back (erase its lock and data at {p['s_w']})")
    left = _gone(obs.get("cells"), "Bob", p["s_w"])
    require(left == [], f"{rule}; Bob.bal still has {', '.join(left)}")
    require(returned(obs.get("get"), p["b0"]), f"{rule}, then read {p['b0']}; the reader "
                                               f"{said(obs.get('get'))}")


# -- 3. rolling forward ------------------------------------------------------------------------

COMMITTED, COMMITTED_REWRITTEN = ("its primary's newest write record W's",
                                  "its primary committed by W, then written by a later transaction")


def _committed_class(w, p) -> str:
    """Whether W's write record on the primary Bob.bal is its newest, or a later transaction's
    write record stands above it."""
    found = versions_in(w.cells(), "Bob", "bal:write")
    ours = [ts for ts, v in found if is_write(v, p["s_w"])]
    if not ours:
        return "other"
    return COMMITTED if found[0][0] == ours[0] else COMMITTED_REWRITTEN


@exercise.check("crashed after its commit point: roll forward at the primary's commit_ts",
                params=_p("s0", "c0", "s_w", "c_w", "s_v", "c_v", "s_r"),
                classes=(COMMITTED, COMMITTED_REWRITTEN))
def _forward(trial, p):
    for value_class in trial.each_class():
        w, _ = _crashed(trial, p, committed=True)
        if value_class == COMMITTED_REWRITTEN:      # W's primary lock is gone: V writes Bob.bal
            w.committed({("Bob", "bal"): p["b2"]}, p["s_v"], p["c_v"])
        trial.covered(value_class, _committed_class(w, p))
        _forward_ok(_read(w, p, "Joe"), p, value_class)


def _forward_ok(obs, p, value_class=COMMITTED):
    _rolled_forward(obs, p, "data", p["j1"], later=value_class == COMMITTED_REWRITTEN)


def _rolled_forward(obs, p, kind: str, value, later: bool = False) -> None:
    rule = (f"W's primary Bob.bal has a write record at {p['c_w']} pointing at {p['s_w']}"
            + (f" (and above it V's, at {p['c_v']} pointing at {p['s_v']}: V wrote Bob.bal "
               f"after W committed; the record that decides is the one pointing at the lock's "
               f"start_ts)" if later else "")
            + f": W committed, at {p['c_w']} for every cell. Roll Joe.bal forward: a write record "
            f"'{kind} @ {p['s_w']}' at the primary's commit_ts {p['c_w']}, the lock erased")
    cells = obs.get("cells")
    record = value_at(cells, "Joe", "bal:write", p["c_w"])
    found = [f"{show(v)} at {ts}" for ts, v in versions_in(cells, "Joe", "bal:write")
             if ts != p["c0"]]
    require(is_write(record, p["s_w"], kind), f"{rule}; Joe.bal's new write records: "
                                              f"{', '.join(found) or 'none'}")
    require(value_at(cells, "Joe", "bal:lock", p["s_w"]) is None,
            f"{rule}; the lock at {p['s_w']} is still there")
    require(returned(obs.get("get"), value), f"{rule}; the reader then reads {value}; it "
                                             f"{said(obs.get('get'))}")


@exercise.check("a delete is rolled forward as a delete",
                params=_p("s0", "c0", "s_w", "c_w", "s_r"))
def _forward_delete(trial, p):
    w, _ = _crashed(trial, p, delete=True, committed=True)
    _forward_delete_ok(_read(w, p, "Joe"), p)


def _forward_delete_ok(obs, p):
    _rolled_forward(obs, p, "delete", None)


# -- 3b. rolling forward leaves the secondary as its commit would: its notification ---------

OWN, PRIMARY_ONLY = ("the secondary's column observed, the primary's not",
                     "the primary's column observed, the secondary's not")


def _observer(txn, row, column) -> None:
    """An observer of the world (its runs are not part of the check: only whether a commit of
    its column sets ``notify``)."""


def _notify_class(w) -> str:
    """Which of W's two columns the world's observers watch."""
    watched = tuple(w.cluster.observers.watches(TABLE, column) for column in ("bal", "mail"))
    return {(False, True): OWN, (True, False): PRIMARY_ONLY}.get(watched, "other")


@exercise.check("rolling a secondary forward sets its notify when its own column is observed",
                params=_p("s0", "c0", "s_w", "c_w", "s_r", m0=lambda rng: rng.randrange(1000),
                          m1=lambda rng: rng.randrange(1000, 2000)),
                classes=(OWN, PRIMARY_ONLY))
def _forward_notify(trial, p):
    """W (primary Bob.bal, secondary Joe.mail: two columns, one of them observed) committed and
    died with no notification of its secondary written. The kit's own Transaction writes an
    observed secondary's notify before its commit point (README, *Notifications are written
    before the commit point*); a writer that sets each cell's notification with its write
    record leaves this state (§2.4 only says the notify column is written when a transaction
    commits), and Cleanup.roll_forward finishes it: it sets the notify of the cell's own
    column, as the student's roll-forward must."""
    for value_class in trial.each_class():
        w = trial.world()
        w.cluster.observe(TABLE, "mail" if value_class == OWN else "bal")(_observer)
        transfer = {("Bob", "bal"): p["b1"], ("Joe", "mail"): p["m1"]}   # two columns
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "mail"): p["m0"]}, p["s0"], p["c0"])
        w.locked(transfer, p["s_w"], "W")
        w.commit_point(transfer, p["s_w"], p["c_w"])
        if value_class == PRIMARY_ONLY:          # the primary's notification travels with its
            with w.row("Bob") as rt:             # write record (Transaction.commit_primary)
                rt.write(notify_col("bal"), p["c_w"], True)
        w.crash("W")                             # dead before any secondary's notification
        trial.covered(value_class, _notify_class(w))
        got = _read_at(w, p["s_r"], "Joe", "mail")
        _forward_notify_ok({"get": got, "cells": w.cells()}, p, value_class)


def _forward_notify_ok(obs, p, value_class=OWN):
    cells = obs["cells"]
    rule = (f"W committed at {p['c_w']} (Bob.bal's write record) and died before setting any "
            f"notification of its secondary Joe.mail; rolling Joe.mail forward finishes its "
            f"commit")
    record, lock = (value_at(cells, "Joe", f"mail:{kind}", ts)
                    for kind, ts in (("write", p["c_w"]), ("lock", p["s_w"])))
    require(is_write(record, p["s_w"]) and lock is None,
            f"{rule}: a write record at {p['c_w']} (yours: {show(record)}), the lock at "
            f"{p['s_w']} erased (yours: {show(lock)})")
    notes = {f"{row}.{physical.split(':')[0]} at {ts}"
             for row in ("Bob", "Joe") for physical in ("bal:notify", "mail:notify")
             for ts, _ in versions_in(cells, row, physical)}
    want = {f"{'Joe.mail' if value_class == OWN else 'Bob.bal'} at {p['c_w']}"}
    observed = "Joe.mail's column" if value_class == OWN else "the primary's (bal)"
    require(notes == want,
            f"only {observed} is observed; W committed at {p['c_w']} and died before any "
            f"notification of Joe.mail: rolling it forward sets notify when its own column is "
            f"observed (session.is_observed(cell.table, cell.column)); notify is then on "
            f"{', '.join(sorted(want))}; yours on {', '.join(sorted(notes)) or 'none'}")
    require(returned(obs.get("get"), p["m1"]), f"{rule}; the reader then reads {p['m1']}; it "
                                               f"{said(obs.get('get'))}")


# -- 4. the primary decides; liveness --------------------------------------------------------

@exercise.check("a slow holder cannot commit after a cleanup: the primary is decided first",
                params=_p("s0", "c0", "s"))
def _race(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.reach(p["s"])
    t = Transaction(w.cluster)                       # a slow holder (a reference transaction)
    t.set("Bob", "bal", p["b1"])
    t.set("Joe", "bal", p["j1"])
    seen = {}
    hook = Once(lambda rt: rt.client == t.client and rt.step == Step.COMMIT_PRIMARY,
                lambda rt: seen.update(_half_cleanup(w)), at="before")
    attach(w.cluster.bigtable, hook)
    commit = outcome(t.commit)
    _race_ok(dict(seen, commit=commit, cells=w.cells()), p)


def _half_cleanup(w) -> dict:
    """T looks dead (TTL passed): reader R cleans up Joe.bal's lock, dies after its first change."""
    w.cluster.clock.advance(TTL + 1)
    first = []

    def die(rt):
        first.append(rt.row)
        w.doom(next(c for c in w.clients.values() if c.label == "R"))
    attach(w.cluster.bigtable, 
        Once(lambda rt: rt.client == "R" and rt.mutations, die))
    reader = w.client("reader", [["Joe", "bal"]], label="R")
    return {"first": first, "r_get": reader.answer}


def _race_ok(obs, p):
    first = obs.get("first")
    require(first in (["Bob"], ["Joe"]),
            f"T's token expired while it held locks on Bob.bal and Joe.bal: the reader of Joe.bal "
            f"must clean up (T looks dead); your cleanup changed nothing (first change: {first})")
    cells = obs.get("cells")
    wrote = [row for row in ("Bob", "Joe")
             if any(is_write(v, p["s"]) for _, v in versions_in(cells, row, "bal:write"))]
    require(returned(obs.get("commit"), False) and wrote == [],
            f"a reader judged T dead and began cleaning up; its first change was on "
            f"{first[0]}.bal, then it died. T was only slow and reached its commit point: "
            f"commit() {said(obs.get('commit'))}, write records for {p['s']} on {wrote}. Erase "
            f"the PRIMARY's lock first (the synchronizing point, §2.2): then T cannot commit")


@exercise.check("an expired token counts as dead: clean up at once",
                params=_p("s0", "c0", "s_w"))
def _expired(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    w.locked({("Bob", "bal"): p["b1"]}, p["s_w"], "W")
    w.cluster.clock.advance(TTL + 1)                 # W never heartbeats again
    _expired_ok(dict(_call(w, BOB, w.lock_on("Bob", "bal"), 0), cells=w.cells()), p)


def _expired_ok(obs, p):
    rule = (f"W's token has not been refreshed for {TTL + 1:g} s, more than the TTL ({TTL:g} s): "
            f"W is alive but not working, so it counts as dead (§2.2) and its lock is cleaned up "
            f"at once")
    require(isinstance(obs.get("call"), dict) and "raised" not in obs["call"],
            f"{rule}; yours {said(obs.get('call'))}")
    require(obs.get("slept") == 0,
            f"{rule}, without waiting; yours waited {_seconds(obs.get('slept'))}")
    left = _gone(obs.get("cells"), "Bob", p["s_w"])
    require(left == [], f"{rule}: W did not commit, so roll Bob.bal back; it still has "
                        f"{', '.join(left)}")


@exercise.check("a lock someone already resolved: cleaning it up again changes nothing",
                params=_p("s0", "c0", "s_w", "s_u"))
def _stale(trial, p):
    w, transfer = _crashed(trial, p)
    stale = w.lock_on("Joe", "bal")                  # a reader met this lock ...
    w.rolled_back(transfer, p["s_w"])                # ... another reader rolled W back ...
    w.locked({("Joe", "bal"): p["j2"]}, p["s_u"], "U")   # ... and U, alive, locked Joe.bal
    before = w.cells()
    call = _call(w, JOE, stale, 0)["call"]
    _stale_ok({"call": call, "unchanged": w.cells() == before, "cells": w.cells()}, p)


def _stale_ok(obs, p):
    cells = obs.get("cells")
    lock = value_at(cells, "Joe", "bal:lock", p["s_u"])
    require(isinstance(lock, dict) and lock.get("lock") is True
            and value_at(cells, "Joe", "bal:data", p["s_u"]) == p["j2"],
            f"the lock you were handed (W's, at {p['s_w']}) was already rolled back by another "
            f"reader, and U (alive) now locks Joe.bal at {p['s_u']}: a cleanup touches only the "
            f"versions at the dead lock's start_ts {p['s_w']}; U's lock or data is gone")
    require(obs.get("unchanged") is True and "raised" not in (obs.get("call") or {}),
            f"W's lock at {p['s_w']} is already gone (rolled back): cleaning it up again must "
            f"change nothing; yours {said(obs.get('call'))} and changed the store")


# -- 5. every small interleaving -------------------------------------------------------------

FAMILY_TTL = 0.004
CELLS = (("Joe", "bal"), ("Bob", "bal"))


def _family_p(rng):
    return dict(timeline(rng), **amounts(rng, "b0", "j0", "b1", "j1"))


def _judge_readers(labels):
    def judge(w, clients):
        readers = answered_reads(clients, labels, CELLS, "your cleanup")
        judge_history(history_with(w, readers))
        protocol_invariants(w)
    return judge


def _family(p, readers):
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        writer = Participant("W", "writer", ([["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]],),
                             host="trusted", crashable=True)
        return [writer] + [Participant(r, "reader", (CELLS,)) for r in readers]
    return family


@exercise.check("every interleaving of a reader (your cleanup) with a transfer, and the "
                "transfer's crash", params=_family_p, limit=60.0)
def _race_reader(trial, p):
    trial.explore(_family(p, ["R"]), _judge_readers(["R"]), ttl=FAMILY_TTL)


@exercise.check("every interleaving of two readers (your cleanup) racing to clean up a crashed "
                "transfer", params=_family_p, limit=90.0)
def _race_cleaners(trial, p):
    trial.explore(_family(p, ["R1", "R2"]), _judge_readers(["R1", "R2"]), ttl=FAMILY_TTL,
                  preemptions=1)
