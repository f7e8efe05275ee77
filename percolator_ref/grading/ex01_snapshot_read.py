"""Exercise 1: the snapshot read (Figure 6's Get), as scenarios + verdicts.

The student subclasses :class:`~percolator_ref.Transaction` as
``SnapshotReadTransaction`` and overrides ``snapshot_read(self, rt, cell) ->
SnapshotRead``: what ``cell`` holds in the snapshot at ``start_ts``, read in
the row transaction ``rt`` of the cell's row. The reference ``get`` and
``scan`` call it, wait for or clean up the lock it reports, and call it again.

The reference step (the method and the module function it wraps) is hidden
while grading, so the worlds are written cell by cell (:mod:`.protocol_world`)
and observed through the student's ``get``/``scan``, the clock and the cells.
Every timestamp and balance comes from the per-run secret.
"""
from __future__ import annotations

from percolator_ref.interceptors import attach
from percolator_ref.model import Cell
from percolator_ref.step import Step

from .framework import Exercise, outcome, plain, require
from .protocol_world import (TABLE, Once, World, amounts, locks, returned, said, show,
                             snapshot_fields, timeline, value_at)

exercise = Exercise(
    1, "snapshot read (Get)", answer="SnapshotReadTransaction",
    graded={"SnapshotReadTransaction": ("snapshot_read",)},
    hidden=("percolator_ref.transaction:Transaction.snapshot_read",
            "percolator_ref.transaction:snapshot_read"))


def _p(*stamps, values=("v0", "v1", "v2")):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *values))


def _get(obs, key: str = "get"):
    require(isinstance(obs, dict) and key in obs, "malformed observations")
    return obs[key]


def _reads(obs, expected, rule: str) -> None:
    """The check's Get must have returned ``expected``; else fail with ``rule``."""
    result = _get(obs)
    require(returned(result, expected), f"{rule}; your Get {said(result)}")


# -- 1. which write record, which data ------------------------------------------------

@exercise.scenario("a cell never written reads as absent", params=_p("s0", "c0", "s_r"))
def _absent(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Joe", "bal"): p["v0"], ("Bob", "limit"): p["v1"]}, p["s0"], p["c0"])
    return {"get": outcome(w.begin(Answer, p["s_r"]).get, "Bob", "bal")}


@exercise.verdict("a cell never written reads as absent")
def _absent_ok(obs, p):
    _reads(obs, None, f"Bob.bal has no write record at all (only Joe.bal and Bob.limit were "
                      f"committed, at {p['c0']}): Get must return None, the cell is absent")


@exercise.scenario("a committed value is read through its write record",
                   params=_p("s0", "c0", "s_r"))
def _committed(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    return {"get": outcome(w.begin(Answer, p["s_r"]).get, "Bob", "bal")}


@exercise.verdict("a committed value is read through its write record")
def _committed_ok(obs, p):
    _reads(obs, p["v0"], f"a write record at commit_ts {p['c0']} points at start_ts {p['s0']}: "
                         f"the data to return is the version at {p['s0']} ({p['v0']})")


@exercise.scenario("a write committed after start_ts is invisible",
                   params=_p("s0", "c0", "s_r", "s1", "c1"))
def _later(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.begin(Answer, p["s_r"])
    w.committed({("Bob", "bal"): p["v1"]}, p["s1"], p["c1"])
    return {"get": outcome(reader.get, "Bob", "bal")}


@exercise.verdict("a write committed after start_ts is invisible")
def _later_ok(obs, p):
    _reads(obs, p["v0"], f"your start_ts is {p['s_r']}: the write record at {p['c1']} is above "
                         f"it, not in your snapshot; the newest at or below {p['s_r']} is at "
                         f"{p['c0']} and points at {p['s0']}, so return {p['v0']}")


@exercise.scenario("a writer that started before you and committed after you started is invisible",
                   params=_p("s0", "c0", "s_w", "s_r", "c_w"))
def _straddle(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.stamp(p["s_w"])                        # the writer begins
    reader = w.begin(Answer, p["s_r"])
    w.committed({("Bob", "bal"): p["v1"]}, p["s_w"], p["c_w"])
    return {"get": outcome(reader.get, "Bob", "bal")}


@exercise.verdict("a writer that started before you and committed after you started is invisible")
def _straddle_ok(obs, p):
    _reads(obs, p["v0"], f"the data at {p['s_w']} ({p['v1']}) was committed at {p['c_w']}, after "
                         f"your start_ts {p['s_r']}: data counts only through a write record at or "
                         f"below start_ts, here at {p['c0']} pointing at {p['s0']}: "
                         f"return {p['v0']}")


@exercise.scenario("among several versions the newest write record at or below start_ts wins",
                   params=_p("s0", "c0", "s1", "c1", "s_r", "s2", "c2"))
def _several(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.committed({("Bob", "bal"): p["v1"]}, p["s1"], p["c1"])
    reader = w.begin(Answer, p["s_r"])
    w.committed({("Bob", "bal"): p["v2"]}, p["s2"], p["c2"])
    return {"get": outcome(reader.get, "Bob", "bal")}


@exercise.verdict("among several versions the newest write record at or below start_ts wins")
def _several_ok(obs, p):
    _reads(obs, p["v1"], f"write records at {p['c0']}, {p['c1']} and {p['c2']}: with start_ts "
                         f"{p['s_r']} the newest at or below it is at {p['c1']}, pointing at "
                         f"{p['s1']}: return {p['v1']}")


# -- 2. deletes ---------------------------------------------------------------------------

@exercise.scenario("a committed delete reads as absent", params=_p("s0", "c0", "s_d", "c_d", "s_r"))
def _deleted(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.committed({("Bob", "bal"): None}, p["s_d"], p["c_d"])
    return {"get": outcome(w.begin(Answer, p["s_r"]).get, "Bob", "bal")}


@exercise.verdict("a committed delete reads as absent")
def _deleted_ok(obs, p):
    _reads(obs, None, f"the newest write record at or below your start_ts {p['s_r']} is "
                      f"'delete @ {p['s_d']}' at {p['c_d']}: in your snapshot the cell is deleted "
                      f"and Get returns None (a delete has no data; {p['v0']} is older)")


@exercise.scenario("a snapshot from before a delete still sees the value",
                   params=_p("s0", "c0", "s_r", "s_d", "c_d"))
def _before_delete(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.begin(Answer, p["s_r"])
    w.committed({("Bob", "bal"): None}, p["s_d"], p["c_d"])
    return {"get": outcome(reader.get, "Bob", "bal")}


@exercise.verdict("a snapshot from before a delete still sees the value")
def _before_delete_ok(obs, p):
    _reads(obs, p["v0"], f"the delete committed at {p['c_d']}, after your start_ts {p['s_r']}: "
                         f"it is not in your snapshot; the write record at {p['c0']} points at "
                         f"{p['s0']}: return {p['v0']}")


# -- 3. locks -------------------------------------------------------------------------------

@exercise.scenario("a lock above start_ts is ignored: no wait, no cleanup",
                   params=_p("s0", "c0", "s_r", "s_w"))
def _lock_above(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.begin(Answer, p["s_r"])
    w.locked({("Bob", "bal"): p["v1"], ("Joe", "bal"): p["v2"]}, p["s_w"], "W")
    got = outcome(reader.get, "Bob", "bal")
    return {"get": got, "waited": plain(w.cluster.clock.now()), "cells": w.cells()}


@exercise.verdict("a lock above start_ts is ignored: no wait, no cleanup")
def _lock_above_ok(obs, p):
    rule = (f"the lock on Bob.bal at {p['s_w']} is above your start_ts {p['s_r']}: its "
            f"transaction will commit above {p['s_w']}, outside your snapshot, so Get reads "
            f"past it")
    _reads(obs, p["v0"], f"{rule} and returns {p['v0']}")
    require(obs.get("waited") == 0, f"{rule} without waiting; your reader waited "
                                    f"{obs.get('waited')} s for it")
    lock = value_at(obs.get("cells"), "Bob", "bal:lock", p["s_w"])
    require(isinstance(lock, dict) and lock.get("lock") is True,
            f"{rule}, leaving it alone; after your Get the live writer's lock was gone (your "
            f"reader blocked on it until it looked dead and cleaned it up)")


@exercise.scenario("a lock at or below start_ts blocks until its transaction resolves",
                   params=_p("s0", "c0", "s_w", "c_w", "s_r"))
def _lock_below(Answer, p, ctx):
    w = World(p["t0"])
    values = {("Bob", "bal"): p["v1"]}
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.locked(values, p["s_w"], "W")
    w.stamp(p["c_w"])                               # W has its commit_ts, not committed yet
    reader = w.begin(Answer, p["s_r"])
    finish = Once(lambda rt: rt.client == reader.client,
                  lambda rt: w.commit_point(values, p["s_w"], p["c_w"]))
    attach(w.cluster.bigtable, finish)   # W commits right after your first read
    return {"get": outcome(reader.get, "Bob", "bal"), "fired": finish.fired}


@exercise.verdict("a lock at or below start_ts blocks until its transaction resolves")
def _lock_below_ok(obs, p):
    _reads(obs, p["v1"], f"Bob.bal holds a lock at {p['s_w']}, at or below your start_ts "
                         f"{p['s_r']}: its transaction may commit below your snapshot (here at "
                         f"{p['c_w']}), so Get must wait for it and read again, then see {p['v1']}")


@exercise.scenario("a dead client's lock below start_ts is rolled back, then read past",
                   params=_p("s0", "c0", "s_w", "s_r", values=("b0", "j0", "b1", "j1")))
def _dead_before(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked({("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}, p["s_w"], "W")
    w.crash("W")
    got = outcome(w.begin(Answer, p["s_r"]).get, "Joe", "bal")
    return {"get": got, "cells": w.cells()}


@exercise.verdict("a dead client's lock below start_ts is rolled back, then read past")
def _dead_before_ok(obs, p):
    rule = (f"Joe.bal holds a lock at {p['s_w']} of client W, which crashed before its commit "
            f"point: Get must report that lock (SnapshotRead(lock=...)) so it is cleaned up "
            f"through the primary Bob.bal")
    _reads(obs, p["j0"], f"{rule}, then read {p['j0']}")
    left = locks(obs.get("cells"))
    require(left == [], f"{rule}; locks left after your Get: {left}")


@exercise.scenario("a dead client's lock after its commit point is rolled forward, then read",
                   params=_p("s0", "c0", "s_w", "c_w", "s_r", values=("b0", "j0", "b1", "j1")))
def _dead_after(Answer, p, ctx):
    w = World(p["t0"])
    transfer = {("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked(transfer, p["s_w"], "W")
    w.commit_point(transfer, p["s_w"], p["c_w"])
    w.crash("W")
    return {"get": outcome(w.begin(Answer, p["s_r"]).get, "Joe", "bal")}


@exercise.verdict("a dead client's lock after its commit point is rolled forward, then read")
def _dead_after_ok(obs, p):
    _reads(obs, p["j1"], f"W crashed after its commit point: its primary Bob.bal has a write "
                         f"record at {p['c_w']}, below your start_ts {p['s_r']}, so Joe.bal's lock "
                         f"at {p['s_w']} is rolled forward and your snapshot reads {p['j1']}")


# -- 4. what snapshot_read returns, and scan ------------------------------------------------

@exercise.scenario("SnapshotRead reports the lock met, or the commit_ts of the version read",
                   params=_p("s0", "c0", "s_d", "c_d", "s_l", "s_r"))
def _fields(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({("Bob", "bal"): p["v0"], ("Joe", "bal"): p["v1"]}, p["s0"], p["c0"])
    w.committed({("Joe", "bal"): None}, p["s_d"], p["c_d"])
    w.locked({("Zed", "bal"): p["v2"]}, p["s_l"], "W")
    reader = w.begin(Answer, p["s_r"])
    found = {}
    for row in ("Bob", "Joe", "Ann", "Zed"):
        with w.cluster.bigtable.row_transaction(TABLE, row, client=reader.client,
                                                step=Step.GET) as rt:
            cell = Cell(TABLE, row, "bal")
            found[row] = outcome(lambda: snapshot_fields(reader.snapshot_read(rt, cell)))
    return found


@exercise.verdict("SnapshotRead reports the lock met, or the commit_ts of the version read")
def _fields_ok(obs, p):
    expected = {"Bob": (None, p["c0"], p["v0"], f"the write record at {p['c0']} (-> {p['s0']})"),
                "Joe": (None, p["c_d"], None, f"the delete record at {p['c_d']}"),
                "Ann": (None, None, None, "no write record")}
    for row, (lock, version, value, what) in expected.items():
        result = _get(obs, row)
        got = result.get("value") if isinstance(result, dict) else None
        require(isinstance(got, dict) and (got.get("lock"), got.get("version"), got.get("value"))
                == (lock, version, value),
                f"snapshot_read of {row}.bal at start_ts {p['s_r']} reads {what}: it must return "
                f"SnapshotRead(version={version}, value={value}), the version being the write "
                f"record's commit_ts; yours {_fields_said(result)}")
    result = _get(obs, "Zed")
    got = result.get("value") if isinstance(result, dict) else None
    lock = got.get("lock") if isinstance(got, dict) else None
    require(isinstance(lock, dict) and lock.get("start_ts") == p["s_l"],
            f"Zed.bal holds W's lock at {p['s_l']}, below your start_ts {p['s_r']}: snapshot_read "
            f"must return SnapshotRead(lock=<that Lock>) so Get can wait or clean it up; yours "
            f"{_fields_said(result)}")


def _fields_said(result) -> str:
    if isinstance(result, dict) and isinstance(result.get("value"), dict):
        f = result["value"]
        return (f"returned a {f.get('type')} with lock={_brief(f.get('lock'))}, "
                f"version={_brief(f.get('version'))}, value={_brief(f.get('value'))}")
    return said(result)


def _brief(value) -> str:
    """A field of the student's result in a few words."""
    if isinstance(value, dict) and value.get("lock") is True:
        return f"the {show(value)} at {value.get('start_ts')}"
    if isinstance(value, list):
        return "a (timestamp, lock) pair" if len(value) == 2 else f"a list of {len(value)}"
    if isinstance(value, dict):
        return "<missing>" if value.get("missing") else f"a {value.get('type', 'dict')}"
    return repr(value)[:40]


@exercise.scenario("scan applies the same snapshot rule to every row",
                   params=_p("s0", "c0", "s_b", "c_b", "s_w", "s_r", "c_w", "s_a", "c_a",
                             values=("a0", "b0", "c0x", "d0", "d1", "a1", "e1")))
def _scan(Answer, p, ctx):
    w = World(p["t0"])
    w.committed({(r, "x"): p[v] for r, v in (("A", "a0"), ("B", "b0"), ("C", "c0x"), ("D", "d0"))},
                p["s0"], p["c0"])
    w.committed({("B", "x"): None}, p["s_b"], p["c_b"])
    w.stamp(p["s_w"])
    reader = w.begin(Answer, p["s_r"])
    w.committed({("D", "x"): p["d1"]}, p["s_w"], p["c_w"])
    w.committed({("A", "x"): p["a1"], ("E", "x"): p["e1"]}, p["s_a"], p["c_a"])
    return {"scan": outcome(reader.scan)}


@exercise.verdict("scan applies the same snapshot rule to every row")
def _scan_ok(obs, p):
    expected = [["A", "x", p["a0"]], ["C", "x", p["c0x"]], ["D", "x", p["d0"]]]
    result = _get(obs, "scan")
    require(isinstance(result, dict) and result.get("value") == expected,
            f"scan at start_ts {p['s_r']} must return {[tuple(e) for e in expected]}: B was "
            f"deleted "
            f"at {p['c_b']}, D's data at {p['s_w']} and A's and E's writes committed after "
            f"{p['s_r']}; your scan {said(result)}")
