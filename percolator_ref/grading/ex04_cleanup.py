"""Exercise 4: lazy lock cleanup (§2.2, BackoffAndMaybeCleanupLock), as scenarios + verdicts.

The student writes ``backoff_and_maybe_cleanup_lock(session, cell, lock,
attempt)``: what a reader does when its snapshot read met ``lock`` on
``cell`` at or below its start_ts. The scenarios plug it in where the
reference's ``get`` and ``scan`` call it (``cleanup.backoff_and_maybe_cleanup_lock``),
or call it directly.

While grading, the reference cleanup is hidden: the function itself and the
steps it is made of (``cleanup_lock``, ``resolve_primary`` and the
:class:`~percolator_ref.cleanup.Cleanup` methods ``roll_forward``, ``roll_back``), so
the student resolves the lock with the row-level helpers of :mod:`percolator_ref.rows`. The worlds are written cell by cell
(:mod:`.protocol_world`); the readers are reference transactions (Get is not
hidden here).
"""
from __future__ import annotations

import math
from contextlib import contextmanager

from percolator_ref import Transaction, cleanup
from percolator_ref.errors import ClientCrash
from percolator_ref.interceptors import attach
from percolator_ref.model import Cell
from percolator_ref.session import Session
from percolator_ref.step import Step

from .framework import Exercise, outcome, plain, require
from .protocol_world import (TABLE, TTL, Once, World, amounts, is_write, locks, returned, said,
                             show, timeline, value_at, versions)

exercise = Exercise(
    4, "lock cleanup: roll forward, roll back, only for dead clients",
    answer="backoff_and_maybe_cleanup_lock", graded={"backoff_and_maybe_cleanup_lock": ()},
    hidden=tuple(f"percolator_ref.cleanup:{name}" for name in (
        "backoff_and_maybe_cleanup_lock", "cleanup_lock", "resolve_primary",
        "Cleanup.backoff_and_maybe_cleanup_lock", "Cleanup.cleanup_lock",
        "Cleanup.resolve_primary", "Cleanup.roll_forward", "Cleanup.roll_back")))

BALANCES = ("b0", "j0", "b1", "j1", "j2")
BOB, JOE = Cell(TABLE, "Bob", "bal"), Cell(TABLE, "Joe", "bal")


def _p(*stamps, **more):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *BALANCES),
                            **{k: v(rng) for k, v in more.items()})


@contextmanager
def plugged(fn):
    """Readers (the reference ``get``) call ``fn`` when they meet a lock."""
    saved = cleanup.backoff_and_maybe_cleanup_lock
    cleanup.backoff_and_maybe_cleanup_lock = fn
    try:
        yield
    finally:
        cleanup.backoff_and_maybe_cleanup_lock = saved


def _crashed(p, delete=False, committed=False) -> tuple:
    """Bob, Joe committed at (s0, c0); W prewrote a transfer at s_w (Bob primary) and died,
    after its commit point at c_w if ``committed``."""
    w = World(p["t0"])
    transfer = {("Bob", "bal"): p["b1"], ("Joe", "bal"): None if delete else p["j1"]}
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked(transfer, p["s_w"], "W")
    if committed:
        w.commit_point(transfer, p["s_w"], p["c_w"])
    w.crash("W")
    return w, transfer


def _read(fn, w, p, row: str) -> dict:
    with plugged(fn):
        got = _read_at(w, p["s_r"], row)
    return {"get": got, "cells": w.cells()}


def _read_at(w, start: int, row: str) -> dict:
    reader = w.begin(Transaction, start)
    try:
        return outcome(reader.get, row, "bal")
    finally:
        reader.abandon()


def _gone(cells, row: str, start: int) -> list:
    """What is left of the transaction that started at ``start`` on ``row``: lock, data."""
    return [f"{kind} at {start} ({show(found)})" for kind in ("lock", "data")
            if (found := value_at(cells, row, f"bal:{kind}", start)) is not None]


# -- 1. a live holder --------------------------------------------------------------------

@exercise.scenario("a live holder: back off one step, change nothing",
                   params=_p("s0", "c0", "s_w", attempt=lambda rng: rng.randrange(2, 9)))
def _live(fn, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    w.locked({("Bob", "bal"): p["b1"]}, p["s_w"], "W")
    session, lock, before = Session(w.cluster, "R"), w.lock_on("Bob", "bal"), w.cells()
    calls = []
    for attempt in (0, p["attempt"]):
        start = w.cluster.clock.now()
        call = outcome(fn, session, BOB, lock, attempt)
        calls.append({"call": call, "slept": plain(w.cluster.clock.now() - start)})
    return {"calls": calls, "unchanged": w.cells() == before, "cells": w.cells()}


@exercise.verdict("a live holder: back off one step, change nothing")
def _live_ok(obs, p):
    calls = obs.get("calls")
    require(isinstance(calls, list) and len(calls) == 2, "malformed observations")
    require(obs.get("unchanged") is True,
            f"W, the holder of Bob.bal's lock, is alive: cleaning its lock up would abort a "
            f"transaction that may still commit (§2.2); your cleanup changed the store (locks "
            f"now: {locks(obs.get('cells'))})")
    for attempt, call in zip((0, p["attempt"]), calls):
        require(isinstance(call, dict) and "call" in call, "malformed observations")
        require("raised" not in call["call"], f"W (alive) holds the lock on Bob.bal: back off; "
                                              f"yours {said(call['call'])}")
        want, slept = cleanup.backoff_delay(attempt, TTL), call.get("slept")
        require(isinstance(slept, (int, float)) and math.isclose(slept, want, abs_tol=1e-9),
                f"W, the holder of Bob.bal's lock, is alive: the reader waits one step of "
                f"exponential backoff ({want:g} s at attempt {attempt}: session.backoff) and "
                f"reads again; yours waited {_seconds(slept)}")


def _seconds(value) -> str:
    return f"{value:.4g} s" if isinstance(value, (int, float)) else repr(value)


# -- 2. rolling back ---------------------------------------------------------------------------

@exercise.scenario("crashed before its commit point: a reader of a secondary rolls it all back",
                   params=_p("s0", "c0", "s_w", "s_r"))
def _back_secondary(fn, p, ctx):
    w, _ = _crashed(p)
    return _read(fn, w, p, "Joe")


@exercise.verdict("crashed before its commit point: a reader of a secondary rolls it all back")
def _back_secondary_ok(obs, p):
    rule = ("W died before its commit point (its primary Bob.bal is still locked): erase the "
            "primary's lock first, so W can never commit, then roll Joe.bal back")
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


@exercise.scenario("crashed before its commit point: a reader of the primary rolls it back",
                   params=_p("s0", "c0", "s_w", "s_r"))
def _back_primary(fn, p, ctx):
    w, _ = _crashed(p)
    return _read(fn, w, p, "Bob")


@exercise.verdict("crashed before its commit point: a reader of the primary rolls it back")
def _back_primary_ok(obs, p):
    rule = (f"the reader met W's primary lock on Bob.bal (at {p['s_w']}); W is dead and did not "
            f"commit: roll Bob.bal back (erase its lock and data at {p['s_w']})")
    left = _gone(obs.get("cells"), "Bob", p["s_w"])
    require(left == [], f"{rule}; Bob.bal still has {', '.join(left)}")
    require(returned(obs.get("get"), p["b0"]), f"{rule}, then read {p['b0']}; the reader "
                                               f"{said(obs.get('get'))}")


# -- 3. rolling forward ------------------------------------------------------------------------

@exercise.scenario("crashed after its commit point: roll forward at the primary's commit_ts",
                   params=_p("s0", "c0", "s_w", "c_w", "s_r"))
def _forward(fn, p, ctx):
    w, _ = _crashed(p, committed=True)
    return _read(fn, w, p, "Joe")


@exercise.verdict("crashed after its commit point: roll forward at the primary's commit_ts")
def _forward_ok(obs, p):
    _rolled_forward(obs, p, "data", p["j1"])


def _rolled_forward(obs, p, kind: str, value) -> None:
    rule = (f"W's primary Bob.bal has a write record at {p['c_w']} pointing at {p['s_w']}: W "
            f"committed, at {p['c_w']} for every cell. Roll Joe.bal forward: a write record "
            f"'{kind} @ {p['s_w']}' at the primary's commit_ts {p['c_w']}, the lock erased")
    cells = obs.get("cells")
    record = value_at(cells, "Joe", "bal:write", p["c_w"])
    found = [f"{show(v)} at {ts}" for ts, v in versions(cells, "Joe", "bal:write")
             if ts != p["c0"]]
    require(is_write(record, p["s_w"], kind), f"{rule}; Joe.bal's new write records: "
                                              f"{', '.join(found) or 'none'}")
    require(value_at(cells, "Joe", "bal:lock", p["s_w"]) is None,
            f"{rule}; the lock at {p['s_w']} is still there")
    require(returned(obs.get("get"), value), f"{rule}; the reader then reads {value}; it "
                                             f"{said(obs.get('get'))}")


@exercise.scenario("a delete is rolled forward as a delete",
                   params=_p("s0", "c0", "s_w", "c_w", "s_r"))
def _forward_delete(fn, p, ctx):
    w, _ = _crashed(p, delete=True, committed=True)
    return _read(fn, w, p, "Joe")


@exercise.verdict("a delete is rolled forward as a delete")
def _forward_delete_ok(obs, p):
    _rolled_forward(obs, p, "delete", None)


# -- 4. the primary decides; liveness --------------------------------------------------------

@exercise.scenario("a slow holder cannot commit after a cleanup: the primary is decided first",
                   params=_p("s0", "c0", "s"))
def _race(fn, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    t = w.begin(Transaction, p["s"])
    t.set("Bob", "bal", p["b1"])
    t.set("Joe", "bal", p["j1"])
    seen = {}
    hook = Once(lambda rt: rt.client == t.client and rt.step == Step.COMMIT_PRIMARY,
                lambda rt: seen.update(_half_cleanup(fn, w)), at="before")
    attach(w.cluster.bigtable, hook)
    commit = outcome(t.commit)
    return dict(seen, commit=commit, cells=w.cells())


def _half_cleanup(fn, w) -> dict:
    """T looks dead (TTL passed): reader R cleans up Joe.bal's lock, dies after its first change."""
    w.cluster.clock.advance(TTL + 1)
    r = Transaction(w.cluster)
    first = []

    def die(rt):
        first.append(rt.row)
        r.session.crash()
        raise ClientCrash(str(rt.step), 1)
    dies = Once(lambda rt: rt.client == r.client and rt.mutations, die)
    attach(w.cluster.bigtable, dies)
    with plugged(fn):
        got = outcome(r.get, "Joe", "bal")
    return {"first": first, "r_get": got}


@exercise.verdict("a slow holder cannot commit after a cleanup: the primary is decided first")
def _race_ok(obs, p):
    first = obs.get("first")
    require(first in (["Bob"], ["Joe"]),
            f"T's token expired while it held locks on Bob.bal and Joe.bal: the reader of Joe.bal "
            f"must clean up (T looks dead); your cleanup changed nothing (first change: {first})")
    cells = obs.get("cells")
    wrote = [row for row in ("Bob", "Joe")
             if any(is_write(v, p["s"]) for _, v in versions(cells, row, "bal:write"))]
    require(returned(obs.get("commit"), False) and wrote == [],
            f"a reader judged T dead and began cleaning up; its first change was on "
            f"{first[0]}.bal, then it died. T was only slow and reached its commit point: "
            f"commit() {said(obs.get('commit'))}, write records for {p['s']} on {wrote}. Erase "
            f"the PRIMARY's lock first (the synchronizing point, §2.2): then T cannot commit")


@exercise.scenario("an expired token counts as dead: clean up at once",
                   params=_p("s0", "c0", "s_w"))
def _expired(fn, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    w.locked({("Bob", "bal"): p["b1"]}, p["s_w"], "W")
    w.cluster.clock.advance(TTL + 1)                 # W never heartbeats again
    start = w.cluster.clock.now()
    call = outcome(fn, Session(w.cluster, "R"), BOB, w.lock_on("Bob", "bal"), 0)
    return {"call": call, "slept": plain(w.cluster.clock.now() - start), "cells": w.cells()}


@exercise.verdict("an expired token counts as dead: clean up at once")
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


@exercise.scenario("a lock someone already resolved: cleaning it up again changes nothing",
                   params=_p("s0", "c0", "s_w", "s_u"))
def _stale(fn, p, ctx):
    w, transfer = _crashed(p)
    stale = w.lock_on("Joe", "bal")                  # a reader met this lock ...
    w.rolled_back(transfer, p["s_w"])                # ... another reader rolled W back ...
    w.locked({("Joe", "bal"): p["j2"]}, p["s_u"], "U")   # ... and U, alive, locked Joe.bal
    before = w.cells()
    call = outcome(fn, Session(w.cluster, "R"), JOE, stale, 0)
    return {"call": call, "unchanged": w.cells() == before, "cells": w.cells()}


@exercise.verdict("a lock someone already resolved: cleaning it up again changes nothing")
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
