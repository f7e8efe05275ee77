"""Exercise 2: prewrite (Figure 6's Prewrite), checked by the trusted world.

The student subclasses :class:`~percolator_ref.Transaction` as
``PrewriteTransaction`` and overrides ``prewrite(self, m, primary) -> bool``:
lock one buffered mutation ``m`` for the commit, or report a conflict. The
reference ``commit`` calls it for every written cell, primary first, and
rolls back the locks already written when one returns False.

The reference ``prewrite`` and ``prewrite_writes`` (what a prewrite writes)
are hidden in the sandbox, where the student's transactions run as clients of
the grader's :class:`~.trusted.TrustedWorld`: it writes each world's past
cell by cell, serves every row transaction and judges ``commit()``'s answers,
direct calls of ``prewrite`` and its own cells. The last checks explore every
small interleaving of two student transactions (crashes included). Timestamps
and balances come from the per-run secret; which schedules run does not.
"""
from __future__ import annotations

from percolator_ref.interceptors import attach
from percolator_ref.model import lock_col

from ..client.ex02_prewrite import exercise
from ..framework import require
from .invariants import answered_truly, judge_history, protocol_invariants, writer_record
from .participants import Participant
from .protocol_world import (Once, TABLE, amounts, is_write, kind_of, locks, returned, said, show,
                             timeline, value_at)


PRIMARY = [TABLE, "Bob", "bal"]


def _p(*stamps, values=("b0", "j0", "b1", "j1", "b2", "j2")):
    return lambda rng: dict(timeline(rng, *stamps), **amounts(rng, *values))


def _observe(w, t, **more) -> dict:
    """The world's record after ``t``'s commit: its commit_ts (the oracle's answer) and the cells."""
    commit_ts = t.timestamps[1] if len(t.timestamps) > 1 else None
    return dict(more, commit_ts=commit_ts, cells=w.cells())


def _prewrite_all(w, s: int, writes) -> dict:
    """A transaction at ``s`` prewriting ``writes`` one by one; the world's cells after."""
    t = w.client_at(s, "prewrite_all", [list(x) for x in writes])
    result = t.answer
    return {"prewrites": result.get("value") if isinstance(result, dict) else result,
            "cells": w.cells()}


def _nothing_left(obs, start: int, rule: str, rows=("Bob", "Joe")) -> None:
    """After an abort, no lock and no data of the transaction that started at ``start``."""
    cells = obs.get("cells") if isinstance(obs, dict) else None
    for row in rows:
        for kind in ("lock", "data"):
            found = value_at(cells, row, f"bal:{kind}", start)
            require(found is None, f"{rule}; your {kind} at {start} is left on {row}.bal: a "
                                   f"prewrite that finds a conflict writes nothing")


# -- 1. what a prewrite writes ----------------------------------------------------------

@exercise.check("a transfer over older versions commits: data, then write records, no lock",
                params=_p("s0", "c0", "s1", "c1", "s"))
def _transfer(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.committed({("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}, p["s1"], p["c1"])
    t = w.client_at(p["s"])
    w.call(t, "set", "Bob", "bal", p["b2"])
    w.call(t, "set", "Joe", "bal", p["j2"])
    _transfer_ok(_observe(w, t, commit=w.call(t, "commit")), p)


def _transfer_ok(obs, p):
    require(returned(obs.get("commit"), True),
            f"Bob.bal and Joe.bal were last committed at {p['c1']}, before your start_ts {p['s']}, "
            f"and are not locked: no conflict, so every prewrite succeeds and commit() returns "
            f"True; it {said(obs.get('commit'))}")
    c, cells = obs.get("commit_ts"), obs.get("cells")
    require(type(c) is int and c > p["s"], f"malformed observations (commit_ts {c!r})")
    for row, value in (("Bob", p["b2"]), ("Joe", p["j2"])):
        data = value_at(cells, row, "bal:data", p["s"])
        require(data == value,
                f"prewrite writes the data at start_ts {p['s']} (Figure 4: '7: $3'): {row}.bal "
                f"must hold {value} at {p['s']}, it holds {show(data)}")
        require(is_write(value_at(cells, row, "bal:write", c), p["s"]),
                f"after the commit {row}.bal has a write record at {c} pointing at {p['s']}; it "
                f"has {show(value_at(cells, row, 'bal:write', c))}: write the lock at start_ts "
                f"{p['s']} so the commit can find it")
    require(locks(cells) == [], f"after the commit no lock may remain; left: {locks(cells)} "
                                f"(the lock belongs at start_ts {p['s']})")


@exercise.check("prewrite writes data and a lock at start_ts, every lock naming the primary",
                params=_p("s"))
def _locks(trial, p):
    w = trial.world()
    _locks_ok(_prewrite_all(w, p["s"], [("Bob", "bal", p["b1"], TABLE), ("Joe", "bal", p["j1"], TABLE),
                                        ("Ann", "bal", p["b2"], "log")]), p)


def _locks_ok(obs, p):
    s, cells = p["s"], obs.get("cells")
    results = obs.get("prewrites")
    require(isinstance(results, list) and len(results) == 3, "malformed observations")
    targets = (("Bob", TABLE, p["b1"]), ("Joe", TABLE, p["j1"]), ("Ann", "log", p["b2"]))
    for result, (row, table, value) in zip(results, targets):
        require(returned(result, True), f"nothing conflicts with {row}.bal (an empty table): "
                                        f"prewrite must return True; it {said(result)}")
        data = value_at(cells, row, "bal:data", s, table)
        require(data == value, f"prewrite writes the data at start_ts {s}: {row}.bal must hold "
                               f"{value} at {s}, it holds {show(data)}")
        _lock_ok(value_at(cells, row, "bal:lock", s, table), row, s, row == "Bob")


def _lock_ok(lock, row: str, s: int, is_primary: bool, kind: str = "data") -> None:
    require(isinstance(lock, dict) and lock.get("lock") is True,
            f"prewrite locks the cell at start_ts {s}: {row}.bal has no lock at {s} "
            f"({show(lock)})")
    require(lock.get("primary") == PRIMARY,
            f"every lock names the primary cell, Bob.bal (Figure 4: 'primary @ Bob.bal'), so a "
            f"cleaner of a stranded lock knows where the transaction is decided; the lock on "
            f"{row}.bal names {lock.get('primary')}")
    require(lock.get("is_primary") is is_primary,
            f"only the primary's lock says 'I am primary': on {row}.bal is_primary must be "
            f"{is_primary}, it is {lock.get('is_primary')!r}")
    require((lock.get("start_ts"), lock.get("client")) == (s, f"T{s}"),
            f"the lock records the transaction's start_ts {s} and its client T{s} (whose "
            f"liveness decides a cleanup); on {row}.bal they are {lock.get('start_ts')!r} and "
            f"{lock.get('client')!r}")
    require(lock.get("kind") == kind,
            f"the lock on {row}.bal must carry the mutation's kind ({kind}): a cleaner rolls a "
            f"committed transaction forward from the lock alone; it says {lock.get('kind')!r}")


@exercise.check("a delete is prewritten as a lock of kind DELETE, without data",
                params=_p("s0", "c0", "s"))
def _delete(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    _delete_ok(_prewrite_all(w, p["s"], [("Bob", "bal", None, TABLE),
                                         ("Joe", "bal", p["j1"], TABLE)]), p)


def _delete_ok(obs, p):
    s, cells = p["s"], obs.get("cells")
    results = obs.get("prewrites")
    require(isinstance(results, list) and len(results) == 2, "malformed observations")
    require(returned(results[0], True),
            f"prewriting the delete of Bob.bal (last committed at {p['c0']}, before your start_ts "
            f"{s}) must succeed and return True, writing only its lock: a delete has no data; "
            f"your prewrite {said(results[0])}")
    data = value_at(cells, "Bob", "bal:data", s)
    require(data is None, f"a delete writes no data: Bob.bal holds {show(data)} at {s}")
    _lock_ok(value_at(cells, "Bob", "bal:lock", s), "Bob", s, True, kind="delete")
    require(returned(results[1], True), f"the secondary Joe.bal does not conflict: prewrite must "
                                        f"return True; it {said(results[1])}")


# -- 2. conflicts -----------------------------------------------------------------------------

@exercise.check("a write committed after start_ts is a write-write conflict",
                params=_p("s0", "c0", "s_w", "s", "c_w"), classes=("put", "delete"))
def _ww(trial, p):
    for kind in trial.each_class():
        w = trial.world()
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
        w.stamp(p["s_w"])                              # another writer begins before you
        t = w.client_at(p["s"])
        newer = p["b1"] if kind == "put" else None     # ... and commits after you began
        w.committed({("Bob", "bal"): newer}, p["s_w"], p["c_w"])
        trial.covered(kind, kind_of(newer).name.lower())
        w.call(t, "set", "Bob", "bal", p["b2"])
        w.call(t, "set", "Joe", "bal", p["j2"])
        _ww_ok(_observe(w, t, commit=w.call(t, "commit")), p, kind)


def _ww_ok(obs, p, kind="put"):
    what = "write record" if kind == "put" else "delete's write record (a delete is a write too)"
    rule = (f"Bob.bal has a {what} at {p['c_w']}, after your start_ts {p['s']} (its writer "
            f"began at {p['s_w']}): a write-write conflict, so prewrite returns False and the "
            f"commit aborts")
    require(returned(obs.get("commit"), False), f"{rule}; your commit() {said(obs.get('commit'))}")
    _nothing_left(obs, p["s"], rule)


@exercise.check("a lock above start_ts is a conflict, and is left alone",
                params=_p("s0", "c0", "s", "s_w"))
def _lock_above(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    t = w.client_at(p["s"])
    w.locked({("Bob", "bal"): p["b1"]}, p["s_w"], "W")
    w.call(t, "set", "Bob", "bal", p["b2"])
    _lock_above_ok(_observe(w, t, commit=w.call(t, "commit")), p)


def _lock_above_ok(obs, p):
    _lock_conflict(obs, p, "above")


def _lock_conflict(obs, p, where: str, row: str = "Bob") -> None:
    rule = (f"{row}.bal holds a live client's lock at {p['s_w']}, {where} your start_ts "
            f"{p['s']}: a lock at any timestamp means another transaction is committing the cell, "
            f"so prewrite returns False")
    require(returned(obs.get("commit"), False), f"{rule}; your commit() {said(obs.get('commit'))}")
    _nothing_left(obs, p["s"], rule)
    lock = value_at(obs.get("cells"), row, "bal:lock", p["s_w"])
    require(isinstance(lock, dict) and lock.get("lock") is True,
            f"{rule}, and leaves W's lock alone (W lives); it is gone after your commit()")


@exercise.check("a lock below start_ts is a conflict, and is left alone",
                params=_p("s0", "c0", "s_w", "s"))
def _lock_below(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked({("Joe", "bal"): p["j1"]}, p["s_w"], "W")
    t = w.client_at(p["s"])
    w.call(t, "set", "Bob", "bal", p["b2"])                    # the primary prewrites fine ...
    w.call(t, "set", "Joe", "bal", p["j2"])                    # ... the secondary meets W's lock
    _lock_below_ok(_observe(w, t, commit=w.call(t, "commit")), p)


def _lock_below_ok(obs, p):
    _lock_conflict(obs, p, "below", row="Joe")


@exercise.check("a dead client's lock is cleaned up through its primary, and still conflicts",
                params=_p("s0", "c0", "s_w", "s", "c_w"))
def _dead(trial, p):
    w = trial.world()
    transfer = {("Bob", "bal"): p["b1"], ("Joe", "bal"): p["j1"]}
    w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
    w.locked(transfer, p["s_w"], "W")
    t = w.client_at(p["s"])
    w.commit_point(transfer, p["s_w"], p["c_w"])   # W passes its commit point, then dies
    w.crash("W")
    w.call(t, "set", "Joe", "bal", p["j2"])
    first = w.call(t, "commit")
    cells = w.cells()
    retry = w.client("txn")
    w.call(retry, "set", "Joe", "bal", p["j2"])
    _dead_ok({"commit": first, "cells": cells, "retry": w.call(retry, "commit")}, p)


def _dead_ok(obs, p):
    s_w, c_w = p["s_w"], p["c_w"]
    require(returned(obs.get("commit"), False),
            f"Joe.bal is locked by W, dead after its commit point at {c_w} (after your start_ts "
            f"{p['s']}): cleaning its lock up rolls Joe.bal forward at {c_w}, a write-write "
            f"conflict; the prewrite must abort; your commit() {said(obs.get('commit'))}")
    left, cells = locks(obs.get("cells")), obs.get("cells")
    require(left == [] and is_write(value_at(cells, "Joe", "bal:write", c_w), s_w),
            f"a prewrite that meets a dead client's lock cleans it up through the primary Bob.bal "
            f"(which committed at {c_w}: roll Joe.bal forward) before it aborts, else the cell "
            f"stays locked for ever; locks left: {left}")
    require(returned(obs.get("retry"), True),
            f"once W's lock is cleaned up, a retry that begins after {c_w} conflicts with nothing "
            f"and must commit; it {said(obs.get('retry'))}")


# -- 3. atomicity ---------------------------------------------------------------------------

@exercise.check("the checks and the writes are one row transaction",
                params=_p("s0", "c0", "s", "s_w"))
def _atomic(trial, p):
    w = trial.world()
    w.committed({("Bob", "bal"): p["b0"]}, p["s0"], p["c0"])
    t = w.client_at(p["s"])
    w.call(t, "set", "Bob", "bal", p["b2"])

    def squeeze_in(rt):       # W locks Bob.bal right after your first row transaction on it
        if not w.cluster.bigtable.versions(TABLE, "Bob", lock_col("bal")):
            w.locked({("Bob", "bal"): p["b1"]}, p["s_w"], "W")
    hook = Once(lambda rt: rt.client == t.label and rt.row == "Bob", squeeze_in)
    with attach(w.cluster.bigtable, hook):
        commit = w.call(t, "commit")
    _atomic_ok(_observe(w, t, commit=commit), p)


def _atomic_ok(obs, p):
    w_lock = value_at(obs.get("cells"), "Bob", "bal:lock", p["s_w"])
    squeezed = isinstance(w_lock, dict) and w_lock.get("lock") is True
    require(not (squeezed and returned(obs.get("commit"), True)),
            f"your first row transaction on Bob.bal wrote no lock, so W locked it at {p['s_w']} "
            f"before your write: both now hold locks and both can commit, a lost update. Check "
            f"and write in ONE row transaction (Bigtable's single-row atomicity)")
    if not squeezed:
        require(returned(obs.get("commit"), True),
                f"nothing conflicts with Bob.bal (last committed at {p['c0']}, before your "
                f"start_ts {p['s']}): commit() must return True; it {said(obs.get('commit'))}")


# -- 4. every small interleaving -------------------------------------------------------------

FAMILY_TTL = 0.004


def _family_p(rng):
    return dict(timeline(rng), **amounts(rng, "b0", "j0", "b1", "j1", "b2", "j2"))


def _transfers(p, client=None) -> dict:
    return {"T1": [["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]],
            "T2": [["Joe", "bal", p["j2"]], ["Bob", "bal", p["b2"]]]}


def _deposit(p, client=None) -> dict:
    """A transfer and a deposit to its secondary only: the conflict is on a secondary."""
    return {"T1": [["Bob", "bal", p["b1"]], ["Joe", "bal", p["j1"]]],
            "T2": [["Joe", "bal", p["j2"]]]}


def _judge_writers(p, writes=_transfers):
    def judge(w, clients):
        records = []
        for label, values in writes(p).items():
            record = writer_record(w, clients[label], values)
            answered_truly(clients[label], record)
            records += [record] if record is not None else []
        judge_history(list(w.cluster.history.records) + records)
        protocol_invariants(w, records)
    return judge


def _family(p, client=None, writes=_transfers):
    def family(w):
        w.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, w.oracle.peek(),
                    w.oracle.peek() + 1)
        if client is not None:
            w.cluster.lockservice.register(client)
        return [Participant(label, "writer", (values, client), crashable=True)
                for label, values in writes(p).items()]
    return family


@exercise.check("every interleaving of two of your transfers over the same cells, and a crash "
                "of either", params=_family_p, limit=60.0)
def _race_two(trial, p):
    trial.explore(_family(p), _judge_writers(p), ttl=FAMILY_TTL)


@exercise.check("every interleaving of two of your transfers run by one worker (one client "
                "name, one liveness token)", params=_family_p, limit=60.0)
def _race_same_worker(trial, p):
    trial.explore(_family(p, "worker"), _judge_writers(p), ttl=FAMILY_TTL, crashes=0)


@exercise.check("every interleaving of your transfer with your deposit to its secondary only, "
                "and a crash of either", params=_family_p, limit=60.0)
def _race_deposit(trial, p):
    trial.explore(_family(p, writes=_deposit), _judge_writers(p, _deposit), ttl=FAMILY_TTL)
