"""Exercise 3: commit (Figure 6's Commit), checked by the trusted world.

The student subclasses :class:`~percolator_ref.Transaction` as
``CommitTransaction`` and overrides ``two_phase_commit(self) -> bool`` (the
whole commit: prewrites, commit_ts, notifications, the commit point, the
secondaries) and ``commit_primary(self, m) -> bool`` (the commit point). The
public steps ``prewrite``, ``write_notifications``, ``commit_secondary`` and
``roll_back_own`` are the reference's.

Both graded methods are hidden in the sandbox, where the student's
transactions run as clients of the grader's :class:`~.trusted.TrustedWorld`:
it writes each world's past cell by cell, serves every row transaction,
reads with reference readers, and judges ``commit()``'s answers against its
own cells. Crashes (a client never answered again) and store failures are
injected by the world's interceptors. The last checks explore every small
interleaving of student transactions with each other and with readers.
"""
from __future__ import annotations

from percolator_ref import Transaction
from percolator_ref.faults import StoreFailsAt
from percolator_ref.interceptors import Attachment, attach
from percolator_ref.step import PREWRITE_STEPS, Step

from ..client.ex03_commit import exercise
from ..framework import outcome, plain, require
from .invariants import answered_truly, judge_history, protocol_invariants, writer_record
from .participants import Participant
from .protocol_world import (Once, TTL, amounts, is_write, locks, returned, said, show, timeline,
                             value_at, versions_in)


BALANCES = ("b0", "j0", "b1", "j1")


def _p(*stamps):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *BALANCES))


def _transfer(trial, p, *more):
    """Bob and Joe committed at (s0, c0); a transfer of ``Answer`` begun at ``s``, not committed."""
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    for setup in more:
        setup(w)
    t = w.client_at(p["s"])
    w.call(t, "set", "Bob", "bal", p["b1"])
    w.call(t, "set", "Joe", "bal", p["j1"])
    return w, t


def _commit_ts_of(t):
    """The commit_ts the oracle handed to ``t`` (its second timestamp), or None."""
    return t.timestamps[1] if len(t.timestamps) > 1 else None


def _attribute(w, t, name: str = "commit_ts"):
    """What the student's transaction answers for its attribute ``name`` (an answer, judged)."""
    found = w.call(t, "__getattribute__", name)
    return found.get("value") if isinstance(found, dict) else found


def _writes_record(rt) -> bool:
    return any(column.endswith(":write") and value is not None for column, _, value in rt.mutations)


def _crash_after_first_write_record(w, t, row=None) -> Attachment:
    """The client dies right after its first row transaction that writes a write record."""
    hook = Once(lambda rt: rt.client == t.label and _writes_record(rt)
                and (row is None or rt.row == row), lambda rt: w.doom(t))
    return attach(w.cluster.bigtable, hook)


def _commit_ts(obs, p) -> int:
    c = obs.get("commit_ts") if isinstance(obs, dict) else None
    require(type(c) is int and c > p["s"],
            f"a committing transaction takes its commit_ts from the oracle, above its start_ts "
            f"{p['s']}; yours is {c!r}")
    return c


def _pointing_at(cells, start: int) -> list:
    """Cells with a write record that points at ``start``."""
    return [row for row in ("Bob", "Joe")
            if any(is_write(v, start) for _, v in versions_in(cells, row, "bal:write"))]


# -- 1. the normal case ---------------------------------------------------------------

@exercise.check("a transfer commits: write records at commit_ts point at start_ts, no lock remains",
                   params=_p("s0", "c0", "s"))
def _commits(trial, p):
    w, t = _transfer(trial, p)
    commit = w.call(t, "commit")
    _commits_ok({"commit": commit, "commit_ts": _commit_ts_of(t), "cells": w.cells()}, p)


def _commits_ok(obs, p):
    require(returned(obs.get("commit"), True),
            f"nothing conflicts with the transfer (begun at {p['s']}): commit() must return "
            f"True; it {said(obs.get('commit'))}")
    c, cells = _commit_ts(obs, p), obs.get("cells")
    for row in ("Bob", "Joe"):
        record = value_at(cells, row, "bal:write", c)
        require(is_write(record, p["s"]),
                f"committing makes {row}.bal's write visible: a write record at commit_ts {c} "
                f"pointing at the data at start_ts {p['s']} ('data @ {p['s']}', Figure 4); "
                f"{row}.bal has {show(record)} at {c}")
    require(locks(cells) == [], f"a committed transaction leaves no lock: each write record "
                                f"replaces its cell's lock; left: {locks(cells)}")


@exercise.check("commit_ts is taken only after every lock is written", params=_p("s0", "c0", "s"))
def _ts_after_locks(trial, p):
    w, t = _transfer(trial, p)
    seen = {}

    def reader_reads_joe(rt):         # R begins and reads Joe.bal just before Joe's prewrite
        r = Transaction(w.cluster)
        seen.update(r_start=plain(r.start_ts), r_get=outcome(r.get, "Joe", "bal"))
        r.abandon()
    hook = Once(lambda rt: rt.client == t.label and rt.step in PREWRITE_STEPS and rt.row == "Joe",
                reader_reads_joe, at="before")
    attach(w.cluster.bigtable, hook)
    _ts_after_locks_ok(dict(seen, commit=w.call(t, "commit"), commit_ts=_commit_ts_of(t), fired=hook.fired), p)


def _ts_after_locks_ok(obs, p):
    require(returned(obs.get("commit"), True), f"nothing conflicts with the transfer: commit() "
                                               f"must return True; it {said(obs.get('commit'))}")
    require(obs.get("fired") is True, "your commit never prewrote Joe.bal: every written cell is "
                                      "prewritten (Transaction.prewrite) before the commit point")
    c, r = _commit_ts(obs, p), obs.get("r_start")
    require(type(r) is int, "malformed observations (r_start)")
    require(c > r, f"reader R began at {r} and read Joe.bal before its lock was written (so "
                   f"{p['j0']}), yet your commit_ts is {c} < {r}: R missed a write committed "
                   f"below its snapshot, a stale read. Take commit_ts only after every lock is "
                   f"written (§2.3)")


# -- 2. the commit point ---------------------------------------------------------------

@exercise.check("the primary commits first: a crash after the first write record leaves all or nothing",
                   params=_p("s0", "c0", "s"))
def _primary_first(trial, p):
    w, t = _transfer(trial, p)
    first = []
    hook = _crash_after_first_write_record(w, t)
    attach(w.cluster.bigtable, Once(
        lambda rt: rt.client == t.label and _writes_record(rt), lambda rt: first.append(rt.row)),
        first=True)
    commit = w.call(t, "commit")
    hook.detach()
    _primary_first_ok({"commit": commit, "first": first, "bob": w.read("Bob", "bal"),
            "joe": w.read("Joe", "bal")}, p)


def _primary_first_ok(obs, p):
    first = obs.get("first")
    require(first in ([], ["Bob"], ["Joe"]), "malformed observations (first)")
    bob, joe = obs.get("bob"), obs.get("joe")
    if first == ["Joe"]:
        require(False, f"your first write record went to Joe.bal, a secondary; the client died "
                       f"right after it: Joe.bal {said(joe)} and Bob.bal, still locked, is rolled "
                       f"back: {said(bob)}. The primary's write record is the commit point: "
                       f"write it before any secondary's")
    require(returned(bob, p["b1"]) and returned(joe, p["j1"]),
            f"the client died right after its commit point (Bob.bal's write record): the transfer "
            f"is committed, readers must see Bob.bal={p['b1']} and Joe.bal={p['j1']} (rolled "
            f"forward); " + (f"both reads {said(bob)}" if bob == joe else
                             f"Bob.bal {said(bob)}, Joe.bal {said(joe)}"))


@exercise.check("the primary lock gone at the commit point: abort, roll back, no commit_ts",
                   params=_p("s0", "c0", "s"))
def _lock_gone(trial, p):
    w, t = _transfer(trial, p)

    def cleaner(rt):                   # T looks dead to others: a reader rolls its primary back
        w.cluster.clock.advance(TTL + 1)
        w.read("Bob", "bal")
    hook = Once(lambda rt: rt.client == t.label and rt.step == Step.COMMIT_PRIMARY, cleaner,
                at="before")
    attach(w.cluster.bigtable, hook)
    commit = w.call(t, "commit")
    _lock_gone_ok({"fired": hook.fired, "commit": commit, "commit_ts": _attribute(w, t),
            "cells": w.cells()}, p)


def _lock_gone_ok(obs, p):
    require(obs.get("fired") is True,
            "no row transaction labelled Step.COMMIT_PRIMARY ran: the commit point is one row "
            "transaction of the primary's row with that step (crash points key on it)")
    rule = (f"a cleaner judged you dead and rolled back your primary lock at {p['s']} just "
            f"before your commit point: commit_primary must find its lock gone and the commit "
            f"abort")
    require(returned(obs.get("commit"), False), f"{rule}; your commit() {said(obs.get('commit'))}")
    cells = obs.get("cells")
    wrote = _pointing_at(cells, p["s"])
    require(wrote == [], f"{rule}; yet {', '.join(wrote)} got a write record pointing at "
                         f"{p['s']}, whose data was rolled back")
    require(obs.get("commit_ts") is None, f"{rule}: an aborted transaction has no commit_ts; "
                                          f"yours is {obs.get('commit_ts')!r}")
    require(locks(cells) == [], f"{rule}, and roll back its own secondary locks; left: "
                                f"{locks(cells)}")


@exercise.check("a conflict at a secondary's prewrite aborts and rolls back the locks written",
                   params=_p("s0", "c0", "s_w", "s"))
def _secondary_conflict(trial, p):
    w, t = _transfer(trial, p, lambda w: w.locked({("Joe", "bal"): p["j0"] + 1}, p["s_w"], "W"))
    commit = w.call(t, "commit")
    _secondary_conflict_ok({"commit": commit, "commit_ts": _attribute(w, t), "cells": w.cells()},
                           p)


def _secondary_conflict_ok(obs, p):
    rule = (f"Joe.bal is locked by a live client W (at {p['s_w']}), so its prewrite fails: the "
            f"commit aborts before its commit point")
    require(returned(obs.get("commit"), False), f"{rule}; your commit() {said(obs.get('commit'))}")
    cells = obs.get("cells")
    wrote = _pointing_at(cells, p["s"])
    require(wrote == [], f"{rule}; yet {', '.join(wrote)} got a write record pointing at {p['s']}")
    mine = [lock for lock in locks(cells) if lock[2] == p["s"]]
    require(mine == [], f"{rule}, erasing the locks it already wrote (the primary's at {p['s']}), "
                        f"else they block others until a cleaner comes; left: {mine}")
    require(obs.get("commit_ts") is None, f"{rule}: an aborted transaction has no commit_ts; "
                                          f"yours is {obs.get('commit_ts')!r}")


# -- 3. read-only transactions, notifications, store failures ----------------------------------

@exercise.check("a read-only transaction commits without a commit_ts", params=_p("s0", "c0", "s"))
def _read_only(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    t = w.client_at(p["s"])
    got = w.call(t, "get", "Bob", "bal")
    before = w.oracle.peek()
    commit = w.call(t, "commit")
    _read_only_ok({"get": got, "commit": commit, "commit_ts": _attribute(w, t),
            "taken": w.oracle.peek() - before}, p)


def _read_only_ok(obs, p):
    rule = "a transaction that wrote nothing has nothing to make visible: commit() returns True"
    require(returned(obs.get("commit"), True), f"{rule}; yours {said(obs.get('commit'))}")
    require(obs.get("commit_ts") is None and obs.get("taken") == 0,
            f"{rule} without asking the oracle for a commit_ts; yours took {obs.get('taken')} "
            f"timestamp(s), commit_ts {obs.get('commit_ts')!r}")


@exercise.check("notifications are written at commit_ts before the commit point",
                   params=_p("s0", "c0", "s"))
def _notifications(trial, p):
    w, t = _transfer(trial, p)
    w.cluster.observe("default", "bal", name="audit")(lambda txn, row, column: None)
    w.call(t, "notify", "Ann", "mail", table="inbox")
    hook = _crash_after_first_write_record(w, t, row="Bob")
    commit = w.call(t, "commit")
    hook.detach()
    _notifications_ok({"commit": commit, "commit_ts": _commit_ts_of(t), "cells": w.cells()}, p)


def _notifications_ok(obs, p):
    c, cells = _commit_ts(obs, p), obs.get("cells")
    missing = [name for row, physical, table, name in (
        ("Bob", "bal:notify", "default", "Bob.bal (observed, the primary)"),
        ("Joe", "bal:notify", "default", "Joe.bal (observed)"),
        ("Ann", "mail:notify", "inbox", "inbox/Ann.mail (t.notify)"))
        if value_at(cells, row, physical, c, table) is not True]
    require(missing == [], f"the client died right after its commit point (Bob.bal's write "
                           f"record at {c}): the notifications of the commit must already be "
                           f"set at commit_ts {c}, else observers never run for it (§2.4); "
                           f"missing: {'; '.join(missing)}")


@exercise.check("a store failure at or after the commit point is never reported as an abort",
                   params=_p("s0", "c0", "s"))
def _store_fails(trial, p):
    out = {}
    for key, step, applied in (("after", Step.COMMIT_SECONDARY, False),
                               ("during", Step.COMMIT_PRIMARY, True)):
        w, t = _transfer(trial, p)
        attach(w.cluster.bigtable, StoreFailsAt(step, applied=applied, client=t.label))
        out[key] = w.call(t, "commit")
        out[key + "_cells"] = w.cells()
        out[key + "_joe"] = w.read("Joe", "bal")
    _store_fails_ok(out, p)


def _store_fails_ok(obs, p):
    require(returned(obs.get("after"), True),
            f"the store failed at a secondary, after your commit point (Bob.bal's write record "
            f"is written): the transfer is committed and commit() must return True (commit() "
            f"decides by self.phase: 'secondaries' once the commit point is written); yours "
            f"{said(obs.get('after'))}")
    require(returned(obs.get("after_joe"), p["j1"]),
            f"after that failure a reader rolls Joe.bal forward and reads {p['j1']}; it "
            f"{said(obs.get('after_joe'))}")
    during = obs.get("during")
    require(isinstance(during, dict) and str(during.get("raised", "")).startswith(
        "CommitOutcomeUnknown"),
            f"the store failed while writing your commit point, after it applied (the reply was "
            f"lost): commit() cannot know the outcome and must raise CommitOutcomeUnknown (set "
            f"self.phase = 'commit-point' before writing it); yours {said(during)}")


# -- 4. every small interleaving -------------------------------------------------------------

FAMILY_TTL = 0.004
CELLS = (("Bob", "bal"), ("Joe", "bal"))


def _family_p(rng):
    return dict(timeline(rng), **amounts(rng, "b0", "j0", "b1", "j1", "b2", "j2"))


def _yours(p):
    return [["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]]


def _judge(p, label="T"):
    def judge(w, clients):
        record = writer_record(w, clients[label], _yours(p))
        answered_truly(clients[label], record)
        records = [record] if record is not None else []
        judge_history(list(w.cluster.history.records) + records)
        protocol_invariants(w, records)
    return judge


def _start(w, p):
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                w.oracle.peek() + 1)


@exercise.check("every interleaving of your transfer with a reader, and your transfer's crash",
                params=_family_p, limit=60.0)
def _race_reader(trial, p):
    def family(w):
        _start(w, p)
        return [Participant("T", "writer", (_yours(p),), crashable=True),
                Participant("R", "reader", (CELLS,), host="trusted")]
    trial.explore(family, _judge(p), ttl=FAMILY_TTL)


@exercise.check("every interleaving of your transfer with a reader that may roll it back and a "
                "later transfer reusing the cells", params=_family_p, limit=120.0)
def _race_reuse(trial, p):
    def family(w):
        _start(w, p)
        later = [["Bob", "bal", p["b2"]], ["Joe", "bal", p["j2"]]]
        return [Participant("T", "writer", (_yours(p),)),
                Participant("R", "reader", (CELLS,), host="trusted"),
                Participant("W", "writer", (later,), host="trusted")]
    trial.explore(family, _judge(p), ttl=FAMILY_TTL, crashes=0)
