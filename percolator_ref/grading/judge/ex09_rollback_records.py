"""Exercise 9: rollback records (TiKV), checked by the trusted world.

In the paper a rollback erases the lock and the data and leaves no trace
(§2.2). TiKV leaves a *rollback record*: a write record of kind ``Rollback``
at ``commit_ts = start_ts`` of the rolled-back transaction (``make_rollback``
in TiKV's ``src/storage/txn/actions/check_txn_status.rs``), so that a message
of that transaction which arrives late, a prewrite the network delayed or
delivered twice, is refused by the prewrite's own condition (no write record
at or after ``start_ts``; ``check_for_newer_version`` in TiKV's
``src/storage/txn/actions/prewrite.rs``). When the primary holds neither the
lock nor a commit, TiKV's status check writes the record all the same if the
request sets ``rollback_if_not_exist`` (otherwise it answers that the
transaction is not found), since the primary's prewrite may still be on its
way (``check_txn_status_missing_lock`` in ``check_txn_status.rs``); the
exercise's cleanup always writes it.

The student subclasses :class:`~percolator_ref.cleanup.Cleanup` as
``RollbackCleanup`` and writes two steps: ``rollback_writes(column, start_ts)``
(what a rollback writes: the paper's erasures plus the record, as
:class:`~percolator_ref.variants.rollback_records.RollbackCleanup` does) and
``resolve_primary(primary, start_ts, holder)`` (the decision at the primary,
one row transaction, writing the record even when nothing is there). The
paper's ``Cleanup.resolve_primary`` and ``Cleanup.rollback_writes`` and the
variant's step are hidden in the sandbox. The student's class is the cleanup
of reader clients (a reference ``get`` that meets a lock) and of an aborting
writer; the grader's :class:`RecordsWorld` runs TiKV's rollback records and
judges its own cells. The last checks explore every small interleaving of a
reader with a transfer whose primary prewrite arrives last, or twice.
"""
from __future__ import annotations

from percolator_ref import rows
from percolator_ref.bigtable import Condition
from percolator_ref.model import (Cell, Lock, Write, WriteKind, data_col, lock_col, split_column,
                                  write_col)
from percolator_ref.variants.rollback_records import RollbackRecords

from ..client.ex09_rollback_records import exercise
from ..framework import require
from .invariants import history_with, judge_history, no_dangling_write_records
from .participants import Participant
from .protocol_world import (TABLE, amounts, is_write, returned, said, show, timeline,
                             value_at, versions_in)
from .trusted import TrustedWorld


BALANCES = ("b0", "j0", "b1", "j1", "j2", "b2")
BOB, JOE = Cell(TABLE, "Bob", "bal"), Cell(TABLE, "Joe", "bal")
CELLS = (("Joe", "bal"), ("Bob", "bal"))


def _p(*stamps):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *BALANCES))


class RecordsWorld(TrustedWorld):
    """A trusted world whose own cluster runs TiKV's rollback records (its settling reader
    and its reference clients write them too)."""

    def __init__(self, trial, ttl: float = 10.0, register: bool = True):
        super().__init__(trial.hub, trial.p["t0"], trial.deadline, ttl, [RollbackRecords()])
        if register:
            trial.worlds.append(self)

    def plain(self) -> bool:
        """No state of its own: its cluster's store, oracle, clock and lock service are all
        a run depends on (the rollback records are cells), so the explorer may merge and
        reduce its runs as a plain world's (:meth:`TrustedWorld.fingerprint`)."""
        return type(self) is RecordsWorld and tuple(self.cluster.bigtable.interceptors) == self.guards

    def rolled_back(self, values: dict, start: int, cells: int = 1) -> None:
        """The first ``cells`` cells of a locked transaction rolled back, with records."""
        for row, column in list(values)[:cells]:
            with self.row(row) as rt:
                rows.apply(rt, rows.rollback_writes(column, start)
                           + [(write_col(column), start, Write(start, WriteKind.ROLLBACK))])


# -- what the checks build and read ---------------------------------------------------------

def _crashed(trial, p, committed: bool = False):
    """A records world in which W died mid-transfer (:meth:`World.crashed_transfer`)."""
    w = RecordsWorld(trial)
    return w, w.crashed_transfer(p, committed=committed)


def _read(w, start: int, row: str) -> dict:
    """A reader at ``start`` (your cleanup) reads ``row``'s bal: its answer, the cells."""
    w.reach(start)
    result = w.client("reader", [[row, "bal"]]).answer
    got = result.get("value") if isinstance(result, dict) else None
    got = {"value": got[0]} if isinstance(got, list) and len(got) == 1 else result
    return {"get": got, "cells": w.cells()}


def _record_ok(cells, row: str, start: int, rule: str) -> None:
    """``row``.bal was rolled back at ``start``: no lock, no data, a rollback record there."""
    for kind in ("lock", "data"):
        found = value_at(cells, row, f"bal:{kind}", start)
        require(found is None, f"{rule}: rolling {row}.bal back erases its {kind} at {start}; it "
                               f"is still there ({show(found)})")
    record = value_at(cells, row, "bal:write", start)
    require(is_write(record, start, "rollback"),
            f"{rule}: rolling {row}.bal back leaves a rollback record in bal:write at the "
            f"transaction's start_ts {start}, Write({start}, ROLLBACK) (TiKV's make_rollback), so "
            f"that a late prewrite of it is refused; at {start} bal:write holds {show(record)}")


def _kept(cells, p, row: str, old) -> None:
    require(value_at(cells, row, "bal:data", p["s0"]) == old
            and is_write(value_at(cells, row, "bal:write", p["c0"]), p["s0"]),
            f"a rollback touches only the dead transaction's versions (at {p['s_w']}); {row}.bal "
            f"lost its committed version (data {old} at {p['s0']}, write record at {p['c0']})")


# -- 1. rolling back leaves a record -----------------------------------------------------------

LOCKED, REWRITTEN = ("its primary still locked",
                     "its primary rolled back by a cleaner, then written by a later transaction")
BELOW, ABOVE = ("its primary never prewritten, another transaction's lock on it below start_ts",
                "its primary never prewritten, another transaction's lock on it above start_ts")
OLD_RECORD = ("its primary never prewritten, an older transaction's rollback record on it below "
              "start_ts")


def _primary_class(w, p) -> str:
    """What the world's primary Bob.bal holds: W's lock; or W's rollback record and a later
    transaction's write record; or no trace of W and another live transaction's lock."""
    cells = w.cells()
    if value_at(cells, "Bob", "bal:lock", p["s_w"]) is not None:
        return LOCKED
    later = [v for ts, v in versions_in(cells, "Bob", "bal:write") if ts > p["s_w"]]
    if is_write(value_at(cells, "Bob", "bal:write", p["s_w"]), p["s_w"], "rollback"):
        return REWRITTEN if later and not any(is_write(v, p["s_w"]) for v in later) else "other"
    others = [ts for ts, lock in versions_in(cells, "Bob", "bal:lock")
              if isinstance(lock, dict) and lock.get("client") == "X"]
    if not others and not later and is_write(value_at(cells, "Bob", "bal:write", p["s_a"]),
                                              p["s_a"], "rollback"):
        return OLD_RECORD
    return {True: BELOW, False: ABOVE}[others[0] < p["s_w"]] if len(others) == 1 else "other"


def _secondary_only(w, p, other: int, rolled_back: bool = False) -> None:
    """X (alive) locked Bob.bal at ``other``; W prewrote only Joe.bal (primary Bob.bal) at
    ``s_w`` and died before its primary's prewrite landed (it would have met X's lock).
    ``rolled_back``: X was rolled back (a record at ``other``) before W started."""
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    for ts in sorted((other, p["s_w"])):
        if ts == other:
            w.locked({("Bob", "bal"): p["b2"]}, other, "X")
            if rolled_back:
                w.rolled_back({("Bob", "bal"): None}, other)
        else:
            w.stamp(p["s_w"])
            with w.row("Joe") as rt:
                rt.write(data_col("bal"), p["s_w"], p["j1"])
                rt.write(lock_col("bal"), p["s_w"], Lock(p["s_w"], BOB, False, "W", WriteKind.PUT))
    w.crash("W")


@exercise.check("a reader of a dead transaction's secondary rolls both cells back, each with a "
                "rollback record at start_ts",
                params=_p("s0", "c0", "s_a", "s_w", "s_v", "c_v", "s_r"),
                classes=(LOCKED, REWRITTEN, BELOW, ABOVE, OLD_RECORD))
def _secondary(trial, p):
    for value_class in trial.each_class():
        if value_class in (BELOW, ABOVE, OLD_RECORD):
            w = RecordsWorld(trial)
            _secondary_only(w, p, p["s_v"] if value_class == ABOVE else p["s_a"],
                            rolled_back=value_class == OLD_RECORD)
        else:
            w, _ = _crashed(trial, p)
        if value_class == REWRITTEN:
            w.rolled_back({("Bob", "bal"): None}, p["s_w"])     # a cleaner decided W aborted
            w.committed({("Bob", "bal"): p["b2"]}, p["s_v"], p["c_v"])    # then V wrote Bob
        trial.covered(value_class, _primary_class(w, p))
        _secondary_ok(_read(w, p["s_r"], "Joe"), p, value_class)


def _secondary_ok(obs, p, value_class=LOCKED):
    other = p["s_v"] if value_class == ABOVE else p["s_a"]
    if value_class == LOCKED:
        rule = (f"W died before its commit point (its primary Bob.bal is still locked at "
                f"{p['s_w']}): the reader of Joe.bal rolls back the primary, then Joe.bal")
    elif value_class == REWRITTEN:
        rule = (f"a cleaner rolled W back at its primary Bob.bal (rollback record at {p['s_w']}) "
                f"and V then wrote Bob.bal (write record at {p['c_v']} pointing at {p['s_v']}): "
                f"the record that points at W's start_ts {p['s_w']} decides, not the newest, so "
                f"the reader of Joe.bal rolls Joe.bal back")
    elif value_class == OLD_RECORD:
        rule = (f"W prewrote Joe.bal and died before its primary Bob.bal's prewrite landed; Bob.bal "
                f"holds an older transaction's rollback record (at {other}), not W's: resolving W "
                f"writes W's own rollback record at {p['s_w']}, or W's late prewrite of Bob.bal "
                f"(whose condition looks at or after {p['s_w']} only) lands and W commits")
    else:
        rule = (f"W prewrote Joe.bal and died before its primary Bob.bal's prewrite landed; Bob.bal "
                f"holds X's lock at {other}, a live transaction's, not W's (W's would be at "
                f"{p['s_w']}): resolving W writes its rollback record at {p['s_w']}, leaves X's "
                f"lock alone and rolls Joe.bal back")
    cells = obs["cells"]
    for row, old in (("Bob", p["b0"]), ("Joe", p["j0"])):
        _record_ok(cells, row, p["s_w"], rule)
        _kept(cells, p, row, old)
    stray = [f"{show(v)} at {ts}" for ts, v in versions_in(cells, "Joe", "bal:write")
             if ts not in (p["c0"], p["s_w"])]
    require(stray == [], f"{rule}; Joe.bal has other write records: {', '.join(stray)}")
    if value_class in (BELOW, ABOVE):
        lock, data = (value_at(cells, "Bob", f"bal:{kind}", other) for kind in ("lock", "data"))
        require(isinstance(lock, dict) and lock.get("client") == "X" and data == p["b2"],
                f"{rule}; X's lock and data at {other} are gone or changed (lock {show(lock)}, "
                f"data {show(data)})")
    require(returned(obs.get("get"), p["j0"]),
            f"{rule}, and reads {p['j0']}: a rollback record is not a version; the reader "
            f"{said(obs.get('get'))}")


@exercise.check("a reader of a dead transaction's primary rolls it back with a record, and "
                "reads the old value", params=_p("s0", "c0", "s_w", "s_r"))
def _primary(trial, p):
    w, _ = _crashed(trial, p)
    _primary_ok(_read(w, p["s_r"], "Bob"), p)


def _primary_ok(obs, p):
    rule = (f"the reader met W's primary lock on Bob.bal (at {p['s_w']}); W is dead and did not "
            f"commit")
    _record_ok(obs["cells"], "Bob", p["s_w"], rule)
    _kept(obs["cells"], p, "Bob", p["b0"])
    require(returned(obs.get("get"), p["b0"]),
            f"{rule}: roll it back, then read {p['b0']} (readers skip a rollback record); the "
            f"reader {said(obs.get('get'))}")


COMMITTED = "its primary committed"
OVERWRITTEN = "its primary committed, then written by a later transaction"


def _forward_class(w, p) -> str:
    """W's commit record on Bob.bal at c_w; and a later transaction's after it, or none."""
    cells = w.cells()
    if not is_write(value_at(cells, "Bob", "bal:write", p["c_w"]), p["s_w"]):
        return "other"
    later = [ts for ts, v in versions_in(cells, "Bob", "bal:write") if ts > p["c_w"]]
    return {0: COMMITTED, 1: OVERWRITTEN}.get(len(later), "other")


@exercise.check("committed before it died: roll forward, and no rollback record anywhere",
                params=_p("s0", "c0", "s_w", "c_w", "s_v", "c_v", "s_r"),
                classes=(COMMITTED, OVERWRITTEN))
def _forward(trial, p):
    for value_class in trial.each_class():
        w, _ = _crashed(trial, p, committed=True)
        if value_class == OVERWRITTEN:      # V wrote Bob.bal after W's commit: the newest record
            w.committed({("Bob", "bal"): p["b2"]}, p["s_v"], p["c_v"])
        trial.covered(value_class, _forward_class(w, p))
        _forward_ok(_read(w, p["s_r"], "Joe"), p)


def _forward_ok(obs, p):
    rule = (f"W's primary Bob.bal has a write record at {p['c_w']} pointing at {p['s_w']}: W "
            f"committed; resolve_primary returns {p['c_w']} and Joe.bal is rolled forward")
    cells = obs["cells"]
    for row in ("Bob", "Joe"):
        records = [f"{show(v)} at {ts}" for ts, v in versions_in(cells, row, "bal:write")
                   if isinstance(v, dict) and v.get("write") == "rollback"]
        require(records == [], f"{rule}: a committed transaction has no rollback record; "
                               f"{row}.bal has {', '.join(records)}")
    require(is_write(value_at(cells, "Joe", "bal:write", p["c_w"]), p["s_w"]),
            f"{rule} (a write record at {p['c_w']}); Joe.bal's write column at {p['c_w']} holds "
            f"{show(value_at(cells, 'Joe', 'bal:write', p['c_w']))}")
    require(returned(obs.get("get"), p["j1"]), f"{rule}; the reader then reads {p['j1']}; it "
                                               f"{said(obs.get('get'))}")


@exercise.check("an aborting client's own rollback leaves the record too",
                params=_p("s0", "c0", "s_u", "s"))
def _aborting(trial, p):
    w = RecordsWorld(trial)
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked({("Joe", "bal"): p["j2"]}, p["s_u"], "U")           # U, alive, holds Joe.bal
    w.reach(p["s"])
    c = w.client("writer", [["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]])
    require(c.timestamps[:1] == [p["s"]], f"your writer took the timestamps {c.timestamps}")
    _aborting_ok({"commit": c.answer, "cells": w.cells()}, p)


def _aborting_ok(obs, p):
    rule = (f"your transaction at {p['s']} prewrote its primary Bob.bal, then met U's live lock "
            f"on Joe.bal: it aborts and rolls its primary back with Cleanup.rollback_writes")
    require(returned(obs.get("commit"), False), f"{rule}; commit() {said(obs.get('commit'))}")
    _record_ok(obs["cells"], "Bob", p["s"], rule)
    lock = value_at(obs["cells"], "Joe", "bal:lock", p["s_u"])
    require(isinstance(lock, dict) and lock.get("lock") is True,
            f"{rule}; U's lock on Joe.bal (at {p['s_u']}) is not yours to erase, and it is gone")


# -- 2. what the record is for -----------------------------------------------------------------

def late_prewrite(w, row: str, value, start: int) -> bool:
    """W's prewrite of ``row``.bal at ``start`` arriving late: Figure 6's condition (no write
    record at or after start_ts, no lock) and writes, in one row transaction of the world."""
    lock = Lock(start, BOB, row == "Bob", "W", WriteKind.PUT)
    with w.row(row) as rt:
        ok, _ = rt.check_and_write(
            [Condition(write_col("bal"), min_ts=start), Condition(lock_col("bal"))],
            [(data_col("bal"), start, value), (lock_col("bal"), start, lock)])
    return ok


@exercise.check("a late prewrite of a rolled-back transaction is refused by its record",
                params=_p("s0", "c0", "s_w", "s_r"))
def _late(trial, p):
    w, _ = _crashed(trial, p)
    got = _read(w, p["s_r"], "Joe")["get"]
    late = {row: late_prewrite(w, row, p[v], p["s_w"]) for row, v in (("Bob", "b1"), ("Joe", "j1"))}
    _late_ok({"get": got, "late": late, "cells": w.cells()}, p)


def _late_ok(obs, p):
    for row, ok in obs["late"].items():
        require(ok is False,
                f"a reader rolled W (start_ts {p['s_w']}) back; then W's prewrite of {row}.bal, "
                f"delayed in the network, arrived. Figure 6's condition refuses it only if a write "
                f"record sits at or after {p['s_w']}: the rollback record at {p['s_w']}. It was "
                f"accepted: {row}.bal is locked again, and W may still commit")
    require(returned(obs.get("get"), p["j0"]), f"the reader of Joe.bal {said(obs.get('get'))}")


@exercise.check("a cleanup that died half-way: the primary's rollback record means rolled back",
                params=_p("s0", "c0", "s_w", "s_r"))
def _half(trial, p):
    w, transfer = _crashed(trial, p)
    w.rolled_back(transfer, p["s_w"])               # a cleaner rolled Bob.bal back, then died
    _half_ok(_read(w, p["s_r"], "Joe"), p)


def _half_ok(obs, p):
    rule = (f"a cleaner rolled W's primary Bob.bal back (the rollback record at {p['s_w']}) and "
            f"died before Joe.bal: a rollback record is not a commit, so resolve_primary returns "
            f"None and Joe.bal is rolled back too")
    _record_ok(obs["cells"], "Joe", p["s_w"], rule)
    _kept(obs["cells"], p, "Joe", p["j0"])
    require(returned(obs.get("get"), p["j0"]), f"{rule}; the reader then reads {p['j0']}; it "
                                               f"{said(obs.get('get'))}")


@exercise.check("resolving a transaction already resolved changes nothing",
                params=_p("s0", "c0", "s_w", "c_w"))
def _again(trial, p):
    w, transfer = _crashed(trial, p)
    w.rolled_back(transfer, p["s_w"], cells=2)
    before = w.cells()
    back = w.client("resolve", BOB, p["s_w"], "W").answer
    w2, _ = _crashed(trial, p, committed=True)
    after_commit = w2.cells()
    done = w2.client("resolve", BOB, p["s_w"], "W").answer
    _again_ok({"back": back, "same": w.cells() == before, "done": done,
               "same_done": w2.cells() == after_commit}, p)


def _again_ok(obs, p):
    require(returned(obs.get("back"), None) and obs["same"],
            f"W (start_ts {p['s_w']}) was rolled back (rollback records on both cells): "
            f"resolve_primary returns None and writes nothing; yours {said(obs.get('back'))}"
            + ("" if obs["same"] else " and changed the cells"))
    require(returned(obs.get("done"), p["c_w"]) and obs["same_done"],
            f"W's primary was committed at {p['c_w']}: resolve_primary returns {p['c_w']} and "
            f"changes nothing; yours {said(obs.get('done'))}"
            + ("" if obs["same_done"] else " and changed the cells"))


# -- 3. every small interleaving -------------------------------------------------------------

FAMILY_TTL = 0.004


def _family_p(rng):
    return dict(timeline(rng), **amounts(rng, "b0", "j0", "b1", "j1"))


def _family(p, how: str, cells=CELLS):
    """W transfers (Bob.bal primary, Joe.bal secondary) prewriting as ``how`` says; R (your
    cleanup) reads ``cells``."""
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        writer = Participant("W", "tikv_writer", ([["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]],
                                                  how), host="trusted", crashable=True)
        return [writer, Participant("R", "reader", (cells,))]
    return family


def _judge(w, clients, cells=CELLS) -> None:
    result = clients["R"].answer
    values = result.get("value") if isinstance(result, dict) else None
    require(isinstance(values, list) and len(values) == len(cells),
            f"reader R (your cleanup plugged into Get) {said(result)}")
    writer = clients["W"]
    records = history_with(w, {clients["R"]: list(zip([Cell(TABLE, *c) for c in cells], values))})
    settled_invariants(w, records)
    writer_answered(w, writer)
    judge_history(records)


def writer_answered(w, writer, when: str = "") -> None:
    """The grader's writer W, unless it crashed, took a start timestamp and answered
    commit() with what its primary says (an answer that is missing or raised fails: a run
    in which W did nothing judges nothing)."""
    if writer.crashed:
        return
    require(writer.timestamps, f"W never took a start timestamp; it {said(writer.answer)}")
    committed = commit_of(w, BOB, writer.timestamps[0]) is not None
    require(writer.answer == {"value": committed},
            f"W (start_ts {writer.timestamps[0]}) answered {said(writer.answer)}{when} but "
            f"{'committed' if committed else 'did not commit'} in the store")


def commit_of(w, cell: Cell, start: int):
    """The commit_ts of the commit record (not a rollback record) pointing at ``start``."""
    return next((ts for ts, v in w.cluster.bigtable.versions(cell.table, cell.row, write_col(cell.column))
                 if isinstance(v, Write) and v.start_ts == start and v.kind is not WriteKind.ROLLBACK),
                None)


def settled_invariants(w, records) -> None:
    """On the settled store: no lock left, no write record pointing at erased data, no commit
    beside a rollback record, every transaction all or nothing."""
    no_dangling_write_records(w)
    for row, columns in w.cluster.bigtable.dump(TABLE).get(TABLE, {}).items():
        for physical, versions in columns.items():
            column, kind = split_column(physical)
            require(kind != "lock", f"a lock was left behind on {row}.{column} at "
                                    f"{versions[0][0]} after every client finished")
            if kind == "write":
                _no_commit_after_rollback(row, column, versions)
    for record in records:
        visible = [commit_of(w, cell, record.start_ts) is not None for cell, _, _ in record.writes]
        if record.committed:
            require(all(visible), f"{record.client} committed at {record.commit_ts} but only "
                                  f"part of its writes have write records (a half-visible "
                                  f"transaction)")
        else:
            require(not any(visible), f"{record.client} (start_ts {record.start_ts}) did not "
                                      f"commit, yet a write record points at its start_ts")


def _no_commit_after_rollback(row, column, versions) -> None:
    starts = {v.start_ts for _, v in versions if isinstance(v, Write) and v.kind is WriteKind.ROLLBACK}
    for ts, v in versions:
        require(not (isinstance(v, Write) and v.kind is not WriteKind.ROLLBACK
                     and v.start_ts in starts),
                f"{row}.{column} has a rollback record at {v.start_ts} and a commit record at {ts} "
                f"for the same transaction: it committed after it was rolled back")


@exercise.check("every interleaving of a reader (your cleanup) with a transfer whose primary "
                "prewrite lands last, and the transfer's crash", params=_family_p, limit=60.0)
def _race_late(trial, p):
    trial.explore(_family(p, "late-primary"), _judge, ttl=FAMILY_TTL,
                  world=lambda: RecordsWorld(trial, FAMILY_TTL, register=False))


@exercise.check("every interleaving of a reader (your cleanup) with a transfer whose primary "
                "prewrite the network delivers twice", params=_family_p, limit=60.0)
def _race_twice(trial, p):
    trial.explore(_family(p, "twice-primary"), _judge, ttl=FAMILY_TTL, crashes=0,
                  world=lambda: RecordsWorld(trial, FAMILY_TTL, register=False))


@exercise.check("every interleaving of a reader (your cleanup) with a transfer whose holder "
                "stalls past its TTL and comes back before its primary prewrite lands",
                params=_family_p, limit=30.0)
def _race_back(trial, p):
    trial.explore(_family(p, "coming-back"), _judge, ttl=FAMILY_TTL, crashes=0,
                  preemptions=3,
                  world=lambda: RecordsWorld(trial, FAMILY_TTL, register=False))


SECONDARY = (("Joe", "bal"),)


@exercise.check("every interleaving of a reader (your cleanup) of the secondary with a transfer "
                "whose holder stalls past its TTL after every prewrite landed and comes back "
                "before its commit", params=_family_p, limit=30.0)
def _race_back_commit(trial, p):
    trial.explore(_family(p, "back-before-commit", SECONDARY),
                  lambda w, clients: _judge(w, clients, SECONDARY), ttl=FAMILY_TTL, crashes=0,
                  preemptions=3, world=lambda: RecordsWorld(trial, FAMILY_TTL, register=False))
