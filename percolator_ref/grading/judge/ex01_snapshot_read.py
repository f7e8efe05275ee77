"""Exercise 1: the snapshot read (Figure 6's Get), checked by the trusted world.

The student subclasses :class:`~percolator_ref.Transaction` as
``SnapshotReadTransaction`` and overrides ``snapshot_read(self, rt, cell) ->
SnapshotRead``: what ``cell`` holds in the snapshot at ``start_ts``, read in
the row transaction ``rt`` of the cell's row. The reference ``get`` and
``scan`` call it, wait for or clean up the lock it reports, and call it again.

The student's transaction runs as a client in the sandbox; the grader's
:class:`~.trusted.TrustedWorld` holds the cells, writes each world's past
cell by cell, serves every row transaction, and judges what the client
answered against its own record. The last checks explore every small
interleaving of a student reader with reference writers (their crashes
included) and judge each schedule with the snapshot-isolation checker and
the protocol's invariants. Every timestamp and balance comes from the
per-run secret; which schedules run does not.
"""
from __future__ import annotations

from percolator_ref.interceptors import attach
from percolator_ref.model import Cell

from ..client.ex01_snapshot_read import exercise
from ..framework import require
from .invariants import history_with, judge_history, protocol_invariants
from .participants import Participant
from .protocol_world import Once, TABLE, amounts, locks, returned, said, show, timeline, value_at


def _p(*stamps, values=("v0", "v1", "v2")):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *values))


def _reads(reader, result, expected, rule: str) -> None:
    """The reader's call must have returned ``expected`` (read from the store); else ``rule``."""
    require(returned(result, expected), f"{rule}; your Get {said(result)}")
    require(reader.saw(expected), f"{rule}; your Get returned {expected!r} without reading it "
                                  f"from the store")


def _get(w, reader, row="Bob", column="bal"):
    return w.call(reader, "get", row, column)


# -- 1. which write record, which data ------------------------------------------------

@exercise.check("a cell never written reads as absent", params=_p("s0", "c0", "s_r"))
def _absent(trial, p):
    w = trial.world()
    w.committed({("Joe", "bal"): p["v0"], ("Bob", "limit"): p["v1"]}, p["s0"], p["c0"])
    reader = w.client_at(p["s_r"])
    _reads(reader, _get(w, reader), None,
           f"Bob.bal has no write record at all (only Joe.bal and Bob.limit were committed, at "
           f"{p['c0']}): Get must return None, the cell is absent")


@exercise.check("a committed value is read through its write record", params=_p("s0", "c0", "s_r"))
def _committed(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.client_at(p["s_r"])
    _reads(reader, _get(w, reader), p["v0"],
           f"a write record at commit_ts {p['c0']} points at start_ts {p['s0']}: the data to "
           f"return is the version at {p['s0']} ({p['v0']})")


@exercise.check("a write committed after start_ts is invisible",
                params=_p("s0", "c0", "s_r", "s1", "c1"))
def _later(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.client_at(p["s_r"])
    w.committed({("Bob", "bal"): p["v1"]}, p["s1"], p["c1"])
    _reads(reader, _get(w, reader), p["v0"],
           f"your start_ts is {p['s_r']}: the write record at {p['c1']} is above it, not in your "
           f"snapshot; the newest at or below {p['s_r']} is at {p['c0']} and points at "
           f"{p['s0']}, so return {p['v0']}")


@exercise.check("a writer that started before you and committed after you started is invisible",
                params=_p("s0", "c0", "s_w", "s_r", "c_w"))
def _straddle(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.stamp(p["s_w"])                        # the writer begins
    reader = w.client_at(p["s_r"])
    w.committed({("Bob", "bal"): p["v1"]}, p["s_w"], p["c_w"])
    _reads(reader, _get(w, reader), p["v0"],
           f"the data at {p['s_w']} ({p['v1']}) was committed at {p['c_w']}, after your "
           f"start_ts {p['s_r']}: data counts only through a write record at or below "
           f"start_ts, here at {p['c0']} pointing at {p['s0']}: return {p['v0']}")


@exercise.check("among several versions the newest write record at or below start_ts wins",
                params=_p("s0", "c0", "s1", "c1", "s_r", "s2", "c2"))
def _several(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.committed({("Bob", "bal"): p["v1"]}, p["s1"], p["c1"])
    reader = w.client_at(p["s_r"])
    w.committed({("Bob", "bal"): p["v2"]}, p["s2"], p["c2"])
    _reads(reader, _get(w, reader), p["v1"],
           f"write records at {p['c0']}, {p['c1']} and {p['c2']}: with start_ts {p['s_r']} the "
           f"newest at or below it is at {p['c1']}, pointing at {p['s1']}: return {p['v1']}")


# -- 2. deletes ---------------------------------------------------------------------------

@exercise.check("a committed delete reads as absent", params=_p("s0", "c0", "s_d", "c_d", "s_r"))
def _deleted(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.committed({("Bob", "bal"): None}, p["s_d"], p["c_d"])
    reader = w.client_at(p["s_r"])
    _reads(reader, _get(w, reader), None,
           f"the newest write record at or below your start_ts {p['s_r']} is 'delete @ "
           f"{p['s_d']}' at {p['c_d']}: in your snapshot the cell is deleted and Get returns "
           f"None (a delete has no data; {p['v0']} is older)")


@exercise.check("a snapshot from before a delete still sees the value",
                params=_p("s0", "c0", "s_r", "s_d", "c_d"))
def _before_delete(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.client_at(p["s_r"])
    w.committed({("Bob", "bal"): None}, p["s_d"], p["c_d"])
    _reads(reader, _get(w, reader), p["v0"],
           f"the delete committed at {p['c_d']}, after your start_ts {p['s_r']}: it is not in "
           f"your snapshot; the write record at {p['c0']} points at {p['s0']}: return {p['v0']}")


# -- 3. locks -------------------------------------------------------------------------------

@exercise.check("a lock above start_ts is ignored: no wait, no cleanup",
                params=_p("s0", "c0", "s_r", "s_w"))
def _lock_above(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    reader = w.client_at(p["s_r"])
    w.locked({("Bob", "bal"): p["v1"], ("Joe", "bal"): p["v2"]}, p["s_w"], "W")
    rule = (f"the lock on Bob.bal at {p['s_w']} is above your start_ts {p['s_r']}: its "
            f"transaction will commit above {p['s_w']}, outside your snapshot, so Get reads "
            f"past it")
    _reads(reader, _get(w, reader), p["v0"], f"{rule} and returns {p['v0']}")
    waited = w.cluster.clock.now()
    require(waited == 0, f"{rule} without waiting; your reader waited {waited} s for it")
    lock = value_at(w.cells(), "Bob", "bal:lock", p["s_w"])
    require(isinstance(lock, dict) and lock.get("lock") is True,
            f"{rule}, leaving it alone; after your Get the live writer's lock was gone (your "
            f"reader blocked on it until it looked dead and cleaned it up)")


@exercise.check("a lock at or below start_ts blocks until its transaction resolves",
                params=_p("s0", "c0", "s_w", "c_w", "s_r"))
def _lock_below(trial, p):
    w = trial.world()
    values = {("Bob", "bal"): p["v1"]}
    w.committed({("Bob", "bal"): p["v0"]}, p["s0"], p["c0"])
    w.locked(values, p["s_w"], "W")
    w.stamp(p["c_w"])                               # W has its commit_ts, not committed yet
    reader = w.client_at(p["s_r"])
    finish = Once(lambda rt: rt.client == reader.label,
                  lambda rt: w.commit_point(values, p["s_w"], p["c_w"]))
    attach(w.cluster.bigtable, finish)   # W commits right after your first read
    _reads(reader, _get(w, reader), p["v1"],
           f"Bob.bal holds a lock at {p['s_w']}, at or below your start_ts {p['s_r']}: its "
           f"transaction may commit below your snapshot (here at {p['c_w']}), so Get must wait "
           f"for it and read again, then see {p['v1']}")


@exercise.check("a dead client's lock below start_ts is rolled back, then read past",
                params=_p("s0", "c0", "s_w", "s_r", values=("b0", "j0", "b1", "j1")))
def _dead_before(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked({("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}, p["s_w"], "W")
    w.crash("W")
    reader = w.client_at(p["s_r"])
    rule = (f"Joe.bal holds a lock at {p['s_w']} of client W, which crashed before its commit "
            f"point: Get must report that lock (SnapshotRead(lock=...)) so it is cleaned up "
            f"through the primary Bob.bal")
    _reads(reader, _get(w, reader, "Joe"), p["j0"], f"{rule}, then read {p['j0']}")
    left = locks(w.cells())
    require(left == [], f"{rule}; locks left after your Get: {left}")


@exercise.check("a dead client's lock after its commit point is rolled forward, then read",
                params=_p("s0", "c0", "s_w", "c_w", "s_r", values=("b0", "j0", "b1", "j1")))
def _dead_after(trial, p):
    w = trial.world()
    transfer = {("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked(transfer, p["s_w"], "W")
    w.commit_point(transfer, p["s_w"], p["c_w"])
    w.crash("W")
    reader = w.client_at(p["s_r"])
    _reads(reader, _get(w, reader, "Joe"), p["j1"],
           f"W crashed after its commit point: its primary Bob.bal has a write record at "
           f"{p['c_w']}, below your start_ts {p['s_r']}, so Joe.bal's lock at {p['s_w']} is "
           f"rolled forward and your snapshot reads {p['j1']}")


# -- 4. what snapshot_read returns, and scan ------------------------------------------------

@exercise.check("SnapshotRead reports the lock met, or the commit_ts of the version read",
                params=_p("s0", "c0", "s_d", "c_d", "s_l", "s_r"))
def _fields(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["v0"], ("Joe", "bal"): p["v1"]}, p["s0"], p["c0"])
    w.committed({("Joe", "bal"): None}, p["s_d"], p["c_d"])
    w.locked({("Zed", "bal"): p["v2"]}, p["s_l"], "W")
    reader = w.client_at(p["s_r"], "fields", ["Bob", "Joe", "Ann", "Zed"])
    found = reader.answer.get("value") if isinstance(reader.answer, dict) else None
    require(isinstance(found, dict), f"reading four cells with your snapshot_read "
                                     f"{said(reader.answer)}")
    _fields_ok(found, p)


def _fields_ok(obs, p):
    expected = {"Bob": (None, p["c0"], p["v0"], f"the write record at {p['c0']} (-> {p['s0']})"),
                "Joe": (None, p["c_d"], None, f"the delete record at {p['c_d']}"),
                "Ann": (None, None, None, "no write record")}
    for row, (lock, version, value) in ((r, e[:3]) for r, e in expected.items()):
        result = obs.get(row)
        got = result.get("value") if isinstance(result, dict) else None
        require(isinstance(got, dict) and (got.get("lock"), got.get("version"), got.get("value"))
                == (lock, version, value),
                f"snapshot_read of {row}.bal at start_ts {p['s_r']} reads {expected[row][3]}: it "
                f"must return SnapshotRead(version={version}, value={value}), the version being "
                f"the write record's commit_ts; yours {_fields_said(result)}")
    result = obs.get("Zed")
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


@exercise.check("scan applies the same snapshot rule to every row",
                params=_p("s0", "c0", "s_b", "c_b", "s_w", "s_r", "c_w", "s_a", "c_a",
                          values=("a0", "b0", "c0x", "d0", "d1", "a1", "e1")))
def _scan(trial, p):
    w = trial.world()
    w.committed({(r, "x"): p[v] for r, v in (("A", "a0"), ("B", "b0"), ("C", "c0x"), ("D", "d0"))},
                p["s0"], p["c0"])
    w.committed({("B", "x"): None}, p["s_b"], p["c_b"])
    w.stamp(p["s_w"])
    reader = w.client_at(p["s_r"])
    w.committed({("D", "x"): p["d1"]}, p["s_w"], p["c_w"])
    w.committed({("A", "x"): p["a1"], ("E", "x"): p["e1"]}, p["s_a"], p["c_a"])
    result = w.call(reader, "scan")
    expected = [("A", "x", p["a0"]), ("C", "x", p["c0x"]), ("D", "x", p["d0"])]
    got = result.get("value") if isinstance(result, dict) else None
    require(isinstance(got, list) and [tuple(g) if isinstance(g, (list, tuple)) else g
                                       for g in got] == expected,
            f"scan at start_ts {p['s_r']} must return {expected}: B was deleted at {p['c_b']}, "
            f"D's data at {p['s_w']} and A's and E's writes committed after {p['s_r']}; your "
            f"scan {said(result)}")


# -- 5. every small interleaving -------------------------------------------------------------

CELLS = (("Bob", "bal"), ("Joe", "bal"))
FAMILY_TTL = 0.004        # a waiting reader outlives a silent holder within a few backoffs


def _family_p(rng):
    return dict(timeline(rng), **amounts(rng, "b0", "j0", "b1", "j1", "b2", "j2"))


def _judge_reader(w, clients, cells=CELLS) -> None:
    """The reader's answer against the world's record: SI, then the protocol's invariants."""
    reader = clients["R"]
    result = reader.answer
    values = result.get("value") if isinstance(result, dict) else None
    names = " then ".join(f"{r}.{c}" for r, c in cells)
    require(isinstance(values, list) and len(values) == len(cells),
            f"your reader (Get of {names}) {said(result)}")
    for value in values:
        require(reader.saw(value), f"your reader returned {value!r}, a value the store never "
                                   f"handed it")
    judge_history(history_with(w, {reader: list(zip([Cell(TABLE, *c) for c in cells], values))}))
    protocol_invariants(w)


def _transfer(label: str, bob, joe, crashable: bool = True) -> Participant:
    return Participant(label, "writer", ([["Bob", "bal", bob], ["Joe", "bal", joe]],),
                       host="trusted", crashable=crashable)


@exercise.check("every interleaving of your reader with a transfer, and the transfer's crash",
                params=_family_p, limit=60.0)
def _race_transfer(trial, p):
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        return [Participant("R", "reader", (CELLS,)), _transfer("W", p["b1"], p["j1"])]
    trial.explore(family, _judge_reader, ttl=FAMILY_TTL)


@exercise.check("every interleaving of your reader with a rolled-back transfer whose cells "
                "are then reused", params=_family_p, limit=60.0)
def _race_reuse(trial, p):
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        start = w.oracle.peek()
        w.locked({("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}, start, "X")
        w.crash("X")                                      # rolled back by whoever meets it
        return [_transfer("W", p["b2"], p["j2"], crashable=False),
                Participant("R", "reader", (CELLS,))]
    trial.explore(family, _judge_reader, ttl=FAMILY_TTL, crashes=0)


@exercise.check("every interleaving of your reader with a transfer run by the same worker "
                "(one client name, one liveness token)", params=_family_p, limit=60.0)
def _race_same_worker(trial, p):
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        w.cluster.lockservice.register("worker")
        return [Participant("R", "reader", (CELLS, "worker")),
                Participant("W", "writer", ([["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]],
                                            "worker"), host="trusted", crashable=True)]
    trial.explore(family, _judge_reader, ttl=FAMILY_TTL)


@exercise.check("every interleaving of your reader with a transfer that deletes a cell, and its "
                "crash", params=_family_p, limit=60.0)
def _race_delete(trial, p):
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        return [Participant("R", "reader", (CELLS[::-1],)), _transfer("W", p["b1"], None)]
    trial.explore(family, _judge_reader_reversed, ttl=FAMILY_TTL)


def _judge_reader_reversed(w, clients) -> None:
    _judge_reader(w, clients, CELLS[::-1])
