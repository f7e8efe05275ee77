"""Exercise 6: observers, acknowledgements and message collapsing (section 2.4), as scenarios.

The student writes ``pending_notification(txn, observer, row)`` (the newest
notification at or below ``start_ts`` that ``observer`` has not acknowledged,
else None) and ``run_observer(cluster, observer, row, client=None,
crash_after=None) -> bool`` (run the observer in a transaction that also
writes its acknowledgement; True once a run committed). The answer cell hands
both over as ``answer = SimpleNamespace(...)``.

The paper's rules (notes in /work/shared/seeds/): each observed column has an
acknowledgement column per observer holding the start timestamp of the
observer's last run; a notification written after the last acknowledgement
runs the observer, which sets the acknowledgement to its own start_ts in the
same transaction; two runs of one notification conflict on the
acknowledgement, so at most one commits; several writes before a run
collapse into one run (message collapsing); a transaction whose commit
returns False has conflicted and is retried after a backoff. The kit adds:
``registered_ts`` (a write committed before the observer existed does not
trigger it) and the acknowledgement as the run's first write (its primary).

The reference ``observers.pending_notification`` and ``observers.run_observer``
are hidden during grading, so the reference runners (``run_observers``,
``process_notification``) cannot be used: the scenarios drive the student's
``run_observer`` themselves (:func:`_sweep`) and clear notifications with the
public ``observers.clear_notification``. Timestamps, rows and texts come from
the per-run secret.
"""
from __future__ import annotations

from percolator_ref import ClientCrash
from percolator_ref.model import ack_col, lock_col, notify_col
from percolator_ref.observers import clear_notification

from .framework import Exercise, outcome, require
from .framework import observed as _get, said as _said
from .worlds import new_cluster, versions

exercise = Exercise(
    6, "observers: acknowledgement and message collapsing", answer="answer",
    graded={"pending_notification": (), "run_observer": ()},
    hidden=("percolator_ref.observers:pending_notification",
            "percolator_ref.observers:run_observer"))

TABLE, COLUMN = "docs", "contents"
WORDS = ("apple", "brick", "cloud", "delta", "ember", "fjord", "grain", "haven", "ivory", "joker")


def _params(rng) -> dict:
    texts = [f"{rng.choice(WORDS)}{n}" for n in rng.sample(range(100, 1000), 4)]    # distinct
    return {"t0": rng.randrange(10, 10 ** 6), "row": f"d{rng.randrange(10, 100)}", "texts": texts,
            "client": f"worker-{rng.randrange(1, 10)}", "k": rng.randrange(2, 5)}


# -- the world (sandbox side) ----------------------------------------------------------

class World:
    """docs/<row>.contents watched by observers that each write docs/<row>.<name> = upper(value)."""

    def __init__(self, p, names=("upper",), hook=None):
        self.c, self.row, self.calls, self.hook = new_cluster(p["t0"]), p["row"], [], hook
        for name in names:
            self.c.observe(TABLE, COLUMN, name=name)(self.observer_fn(name))

    def observer_fn(self, name):
        def fn(txn, row, column):
            value = txn.get(row, column, table=TABLE)
            self.calls.append({"observer": name, "start_ts": txn.start_ts, "client": txn.client,
                               "saw": value if isinstance(value, str) else repr(value)})
            if self.hook is not None:
                self.hook(self, len(self.calls))
            txn.set(row, name, str(value).upper(), table=TABLE)
        return fn

    def observer(self, name="upper"):
        return next(o for o in self.c.observers.for_column(TABLE, COLUMN) if o.name == name)

    def write(self, value, row=None) -> int:
        """Commit docs/<row>.contents = value; its commit_ts (the notification's timestamp)."""
        t = self.c.begin()
        t.set(row or self.row, COLUMN, value, table=TABLE)
        return t.commit_ts if t.commit() else None

    def read(self, column):
        return outcome(lambda: self.c.begin().get(self.row, column, table=TABLE))

    def ack(self, name="upper") -> dict:
        column = ack_col(COLUMN, name)
        return {kind: versions(self.c, TABLE, self.row, f"{column}:{kind}")
                for kind in ("data", "lock", "write")}

    def locks(self) -> list:
        """Every lock left in the row: ``[[column, start_ts, primary], ...]``."""
        found = []
        for name in ("upper", ack_col(COLUMN, "upper")):
            for ts, lock in versions(self.c, TABLE, self.row, lock_col(name)):
                found.append([name, ts, lock.get("primary") if isinstance(lock, dict) else None])
        return found


def _sweep(world, answer, sweeps: int = 5) -> list:
    """What ``run_observers`` does, with the student's ``run_observer``: the outcomes of the runs."""
    runs = []
    for _ in range(sweeps):
        pending = list(world.c.bigtable.notifications())
        if not pending:
            break
        for table, row, column in pending:
            for observer in world.c.observers.for_column(table, column):
                runs.append(outcome(answer.run_observer, world.c, observer, row))
            clear_notification(world.c, table, row, column)
    return runs



# -- verdict helpers (grader side) -------------------------------------------------------



def _calls(obs) -> list:
    calls = _get(obs, "calls")[0]
    require(isinstance(calls, list) and all(isinstance(c, dict) for c in calls),
            "malformed observations (calls)")
    return calls


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _committed_acks(ack) -> list:
    """The start_ts each committed acknowledgement points at, newest first."""
    require(isinstance(ack, dict) and isinstance(ack.get("write"), list) and
            isinstance(ack.get("lock"), list), "malformed observations (ack)")
    return [w[1].get("write") if isinstance(w, list) and len(w) == 2 and isinstance(w[1], dict)
            else None for w in ack["write"]]


def _was_crash(out) -> bool:
    return isinstance(out, dict) and str(out.get("raised", "")).startswith("ClientCrash")


def _output(obs, p, text, what: str) -> None:
    out = _get(obs, "out")[0]
    require(out == {"value": text.upper()},
            f"{what}, {TABLE}/{p['row']}.upper must read the observer's output "
            f"{text.upper()!r}; reading it {_said(out)}")


# -- 1. one write, one run ---------------------------------------------------------------

@exercise.scenario("a committed write triggers one run, acknowledged with its start_ts",
                   params=_params)
def _once(answer, p, ctx):
    w = World(p)
    w.c.lockservice.register(p["client"])             # the worker's liveness token
    notify = w.write(p["texts"][0])
    first = outcome(answer.run_observer, w.c, w.observer(), w.row, client=p["client"])
    second = outcome(answer.run_observer, w.c, w.observer(), w.row, client=p["client"])
    return {"notify": notify, "first": first, "second": second, "calls": w.calls,
            "ack": w.ack(), "out": w.read("upper")}


@exercise.verdict("a committed write triggers one run, acknowledged with its start_ts")
def _once_ok(obs, p):
    notify, first, second, ack = _get(obs, "notify", "first", "second", "ack")
    calls = _calls(obs)
    require(first == {"value": True} and len(calls) >= 1,
            f"a write committed at {notify} set its notification: run_observer must run the "
            f"observer and return True once the run committed; it {_said(first)}")
    start, client = calls[0].get("start_ts"), calls[0].get("client")
    require(client == p["client"],
            f"run_observer(..., client={p['client']!r}) must run its transaction as that client "
            f"(it shares the worker's liveness token); the run's client was {client!r}")
    require(second == {"value": False} and len(calls) == 1,
            f"called again with nothing new, run_observer must find the notification at {notify} "
            f"acknowledged (the run that started at {start} saw it) and return False without "
            f"running the observer; it {_said(second)}, the observer ran {_times(len(calls))}")
    require(_committed_acks(ack) == [start],
            f"the run that started at {start} must commit, in its own transaction, the "
            f"acknowledgement {COLUMN}:ack_upper = {start} (the start_ts of the observer's last "
            f"run); committed acknowledgements point at {_committed_acks(ack)}")
    _output(obs, p, p["texts"][0], "after the run")


# -- 2. message collapsing ----------------------------------------------------------------

@exercise.scenario("several writes before a run collapse into one run", params=_params)
def _collapse(answer, p, ctx):
    w = World(p)
    notifies = [w.write(text) for text in p["texts"][:p["k"]]]
    return {"notifies": notifies, "runs": _sweep(w, answer), "calls": w.calls, "out": w.read("upper")}


@exercise.verdict("several writes before a run collapse into one run")
def _collapse_ok(obs, p):
    notifies, = _get(obs, "notifies")
    calls, last = _calls(obs), p["texts"][p["k"] - 1]
    saw = [c.get("saw") for c in calls]
    require(saw == [last],
            f"{p['k']} writes (notifications at {notifies}) before any run collapse into ONE run "
            f"(message collapsing), which sees the newest value {last!r}; the observer ran "
            f"{_times(len(calls))}, seeing {saw}")
    _output(obs, p, last, "after the run")


# -- 3. an acknowledged notification --------------------------------------------------

@exercise.scenario("an acknowledged notification does not run again", params=_params)
def _acked(answer, p, ctx):
    w = World(p)
    notify = w.write(p["texts"][0])
    runs = _sweep(w, answer)
    # the worker died between the run's commit and the clearing: the notification is back
    w.c.bigtable.write(TABLE, w.row, notify_col(COLUMN), True, notify)
    pending = outcome(answer.pending_notification, w.c.begin(), w.observer(), w.row)
    again = outcome(answer.run_observer, w.c, w.observer(), w.row)
    return {"notify": notify, "runs": runs, "pending": pending, "again": again, "calls": w.calls}


@exercise.verdict("an acknowledged notification does not run again")
def _acked_ok(obs, p):
    notify, pending, again = _get(obs, "notify", "pending", "again")
    calls = _calls(obs)
    require(len(calls) >= 1, f"the write committed at {notify} never ran the observer")
    start = calls[0].get("start_ts")
    why = (f"the notification at {notify} was left in the table, but the run that started at "
           f"{start} committed the acknowledgement {start} > {notify}: it is acknowledged")
    require(pending == {"value": None}, f"{why}, so pending_notification must return None; "
                                        f"it {_said(pending)}")
    require(again == {"value": False} and len(calls) == 1,
            f"{why}, so run_observer must return False without running the observer; it "
            f"{_said(again)}, the observer ran {_times(len(calls))}")


# -- 4. the snapshot bounds the notification ---------------------------------------------

@exercise.scenario("pending_notification reads the newest notification at or below start_ts",
                   params=_params)
def _bounded(answer, p, ctx):
    w = World(p)
    other = p["row"] + "x"
    below = [w.write(p["texts"][0]), w.write(p["texts"][1])]
    txn = w.c.begin()
    above = [w.write(p["texts"][2]), w.write(p["texts"][3], row=other)]
    return {"start_ts": txn.start_ts, "below": below, "above": above,
            "row": outcome(answer.pending_notification, txn, w.observer(), w.row),
            "other": outcome(answer.pending_notification, txn, w.observer(), other)}


@exercise.verdict("pending_notification reads the newest notification at or below start_ts")
def _bounded_ok(obs, p):
    start, below, above, row, other = _get(obs, "start_ts", "below", "above", "row", "other")
    require(isinstance(below, list) and len(below) == 2 and isinstance(above, list)
            and len(above) == 2, "malformed observations")
    require(row == {"value": below[1]},
            f"{TABLE}/{p['row']} has notifications at {below[0]}, {below[1]} and {above[0]}; the "
            f"transaction's start_ts is {start}: pending_notification must return the newest at "
            f"or below start_ts, {below[1]}; it {_said(row)}")
    require(other == {"value": None},
            f"{TABLE}/{p['row']}x has one notification, at {above[1]}, above the transaction's "
            f"start_ts {start}: that write is not in its snapshot, so pending_notification must "
            f"return None; it {_said(other)}")


# -- 5. a write during a run ------------------------------------------------------------------

def _write_during_first_call(world, n):
    if n == 1:
        world.during = world.write(world.later_text)


@exercise.scenario("a write committed during a run triggers a new run", params=_params)
def _during(answer, p, ctx):
    w = World(p, hook=_write_during_first_call)
    w.later_text, w.during = p["texts"][1], None
    notify = w.write(p["texts"][0])
    first = outcome(answer.run_observer, w.c, w.observer(), w.row)
    pending = outcome(answer.pending_notification, w.c.begin(), w.observer(), w.row)
    second = outcome(answer.run_observer, w.c, w.observer(), w.row)
    return {"notify": notify, "during": w.during, "first": first, "pending": pending,
            "second": second, "calls": w.calls}


@exercise.verdict("a write committed during a run triggers a new run")
def _during_ok(obs, p):
    during, first, pending, second = _get(obs, "during", "first", "pending", "second")
    calls = _calls(obs)
    require(first == {"value": True} and len(calls) >= 1,
            f"the first run must commit and return True; it {_said(first)}")
    start = calls[0].get("start_ts")
    require(pending == {"value": during},
            f"the run that started at {start} did not see the write committed at {during}, "
            f"during it: that notification is newer than the acknowledgement {start} (the run's "
            f"start_ts, not its commit_ts) and must stay pending; pending_notification {_said(pending)}")
    saw = [c.get("saw") for c in calls[1:]]
    require(second == {"value": True} and saw == [p["texts"][1]],
            f"the notification at {during} must run the observer once more, seeing "
            f"{p['texts'][1]!r}; run_observer {_said(second)}, the observer then saw {saw}")


# -- 6. later writes, weak notifications ---------------------------------------------------

@exercise.scenario("a later write and a weak notification each trigger a new run", params=_params)
def _again(answer, p, ctx):
    w = World(p)
    w.write(p["texts"][0])
    _sweep(w, answer)
    counts = [len(w.calls)]
    notify = w.write(p["texts"][1])
    _sweep(w, answer)
    counts.append(len(w.calls))
    weak = w.c.begin()
    weak.notify(w.row, COLUMN, table=TABLE)
    weak.commit()
    _sweep(w, answer)
    counts.append(len(w.calls))
    return {"counts": counts, "notify": notify, "weak": weak.commit_ts, "calls": w.calls}


@exercise.verdict("a later write and a weak notification each trigger a new run")
def _again_ok(obs, p):
    counts, notify, weak = _get(obs, "counts", "notify", "weak")
    require(isinstance(counts, list) and len(counts) == 3 and all(type(n) is int for n in counts),
            "malformed observations (counts)")
    saw = [c.get("saw") for c in _calls(obs)]
    require(counts[0] == 1, f"the first write must run the observer once; it ran {_times(counts[0])}")
    require(counts[1] == 2 and saw[1] == p["texts"][1],
            f"a write committed at {notify}, after the first run, is newer than its "
            f"acknowledgement: it must run the observer once more, seeing {p['texts'][1]!r}; it "
            f"ran {_times(counts[1] - counts[0])} more")
    require(counts[2] == 3,
            f"a weak notification (txn.notify) committed at {weak} sets the notification without "
            f"a write: it is newer than the last acknowledgement, so the observer must run once "
            f"more; it ran {_times(counts[2] - counts[1])} more")


# -- 7. several observers of one column ---------------------------------------------------

@exercise.scenario("each observer of a column runs once, with its own acknowledgement",
                   params=_params)
def _two(answer, p, ctx):
    w = World(p, names=("upper", "shout"))
    notify = w.write(p["texts"][0])
    runs = _sweep(w, answer)
    return {"notify": notify, "runs": runs, "calls": w.calls,
            "acks": [w.ack("upper"), w.ack("shout")]}


@exercise.verdict("each observer of a column runs once, with its own acknowledgement")
def _two_ok(obs, p):
    notify, = _get(obs, "notify")
    ran = sorted(str(c.get("observer")) for c in _calls(obs))
    require(ran == ["shout", "upper"],
            f"two observers, upper and shout, watch {TABLE}/{COLUMN}: the write committed at "
            f"{notify} to {TABLE}/{p['row']} must run each of them once (each has its own "
            f"acknowledgement column); they ran {ran}")
    acks = _get(obs, "acks")[0]
    require(isinstance(acks, list) and len(acks) == 2, "malformed observations (acks)")
    for name, ack in zip(("upper", "shout"), acks):
        require(len(_committed_acks(ack)) == 1,
                f"observer {name}'s run must commit its own acknowledgement {COLUMN}:ack_{name}; "
                f"committed: {_committed_acks(ack)}")


# -- 8. registered_ts ------------------------------------------------------------------------

def _before_registration(answer, p) -> dict:
    w = World(p, names=("early",))
    notify = w.write(p["texts"][0])
    w.c.observe(TABLE, COLUMN, name="late")(w.observer_fn("late"))
    late, txn = w.observer("late"), w.c.begin()
    return {"notify": notify, "registered_ts": late.registered_ts,
            "late": outcome(answer.pending_notification, txn, late, w.row),
            "early": outcome(answer.pending_notification, txn, w.observer("early"), w.row),
            "run": outcome(answer.run_observer, w.c, late, w.row), "calls": w.calls}


def _across_registration(answer, p) -> dict:
    w = World(p, names=())
    writer = w.c.begin()                                  # began before the observer existed
    writer.set(w.row, COLUMN, p["texts"][1], table=TABLE)
    w.c.observe(TABLE, COLUMN, name="late")(w.observer_fn("late"))
    late = w.observer("late")
    writer.commit()                                       # ... and commits after
    return {"notify": writer.commit_ts, "registered_ts": late.registered_ts,
            "late": outcome(answer.pending_notification, w.c.begin(), late, w.row),
            "run": outcome(answer.run_observer, w.c, late, w.row), "calls": w.calls}


@exercise.scenario("a write committed before the observer was registered does not trigger it",
                   params=_params)
def _registered(answer, p, ctx):
    return {"old": _before_registration(answer, p), "new": _across_registration(answer, p)}


@exercise.verdict("a write committed before the observer was registered does not trigger it")
def _registered_ok(obs, p):
    old, new = _get(obs, "old", "new")
    notify, registered, late, early, run = _get(old, "notify", "registered_ts", "late", "early", "run")
    require(early == {"value": notify},
            f"observer early existed when the write committed at {notify}: pending_notification "
            f"must return {notify} for it; it {_said(early)}")
    why = (f"observer late was registered at {registered} (registered_ts), after the write "
           f"committed at {notify}: a write from before an observer existed does not trigger it")
    require(late == {"value": None}, f"{why}; pending_notification must return None, it {_said(late)}")
    require(run == {"value": False} and not _calls(old),
            f"{why}; run_observer must return False without running it, it {_said(run)}")
    notify, registered, late, run = _get(new, "notify", "registered_ts", "late", "run")
    require(notify == registered, "malformed observations (registered_ts)")
    why = (f"a write committed at {notify} = late's registered_ts: it committed after the "
           f"observer was registered (only a notification below registered_ts is older), so it "
           f"triggers late")
    require(late == {"value": notify}, f"{why}; pending_notification must return {notify}, it "
                                       f"{_said(late)}")
    require(run == {"value": True} and len(_calls(new)) == 1,
            f"{why}; run_observer must run it and return True, it {_said(run)}")


# -- 9. two runs of one notification ------------------------------------------------------

def _run_b_during_first_call(world, n):
    if n == 1:
        world.run_b = outcome(world.answer.run_observer, world.c, world.observer(), world.row)


@exercise.scenario("of two runs of one notification, at most one commits", params=_params)
def _two_runs(answer, p, ctx):
    w = World(p, hook=_run_b_during_first_call)
    w.answer, w.run_b = answer, None
    notify = w.write(p["texts"][0])
    run_a = outcome(answer.run_observer, w.c, w.observer(), w.row)
    return {"notify": notify, "a": run_a, "b": w.run_b, "calls": w.calls, "ack": w.ack()}


@exercise.verdict("of two runs of one notification, at most one commits")
def _two_runs_ok(obs, p):
    notify, run_a, run_b, ack = _get(obs, "notify", "a", "b", "ack")
    calls, acks = _calls(obs), _committed_acks(ack)
    require(len(calls) >= 1, f"run A never ran the observer; it {_said(run_a)}")
    a = calls[0].get("start_ts")
    require(run_b == {"value": True} and len(calls) >= 2,
            f"run B of the notification at {notify} began while run A (started at {a}) was still "
            f"in its observer, with nothing committed (A's acknowledgement commits with its run): "
            f"B must run the observer and commit; B {_said(run_b)}")
    b = calls[1].get("start_ts")
    require(len(acks) == 1,
            f"runs A ({a}) and B ({b}) of the notification at {notify}: at most one may commit "
            f"(both write the acknowledgement, so the later committer aborts); committed "
            f"acknowledgements point at {acks}")
    require(run_a == {"value": False} and len(calls) == 2,
            f"run A lost the conflict on the acknowledgement to run B; its retry must find the "
            f"notification acknowledged (by {b}) and return False without running the observer; "
            f"A {_said(run_a)}, the observer ran {_times(len(calls))} in all")


# -- 10. retry on conflict ---------------------------------------------------------------

def _conflict_during_first_call(world, n):
    if n == 1:
        t = world.c.begin()
        t.set(world.row, "upper", "SET BY ANOTHER CLIENT", table=TABLE)
        world.conflict = t.commit_ts if t.commit() else None


@exercise.scenario("a run that loses a conflict is retried with a new transaction", params=_params)
def _retry(answer, p, ctx):
    w = World(p, hook=_conflict_during_first_call)
    w.conflict = None
    w.write(p["texts"][0])
    run = outcome(answer.run_observer, w.c, w.observer(), w.row)
    return {"conflict": w.conflict, "run": run, "calls": w.calls, "ack": w.ack(),
            "out": w.read("upper")}


@exercise.verdict("a run that loses a conflict is retried with a new transaction")
def _retry_ok(obs, p):
    conflict, run, ack = _get(obs, "conflict", "run", "ack")
    calls = _calls(obs)
    require(len(calls) >= 1, f"run_observer never ran the observer; it {_said(run)}")
    first = calls[0].get("start_ts")
    require(run == {"value": True} and len(calls) == 2,
            f"the run that started at {first} lost a write-write conflict on {TABLE}/{p['row']}."
            f"upper (committed by another client at {conflict}): a conflicted transaction is "
            f"retried after a backoff, as a new transaction, until a run commits; run_observer "
            f"{_said(run)}, the observer ran {_times(len(calls))}")
    second = calls[1].get("start_ts")
    require(isinstance(second, int) and isinstance(conflict, int) and second > conflict,
            f"the retry must be a new transaction, with a start_ts above the conflicting commit "
            f"{conflict}; it ran at {second}")
    require(_committed_acks(ack) == [second],
            f"the retry that started at {second} committed: the acknowledgement must hold "
            f"{second}; committed acknowledgements point at {_committed_acks(ack)}")
    _output(obs, p, p["texts"][0], "after the retry")


# -- 11. a crashed run ---------------------------------------------------------------------

def _dead_run(p) -> dict:
    """A run whose client crashed after its prewrite (built with the public API)."""
    w = World(p)
    notify = w.write(p["texts"][0])
    t = w.c.begin()
    t.acknowledge(w.observer().ack_cell(w.row))
    t.set(w.row, "upper", "NEVER COMMITTED", table=TABLE)
    try:
        t.commit(crash_after="prewrite")
    except ClientCrash:
        pass
    return w, {"notify": notify, "crashed": t.start_ts}


@exercise.scenario("a run that crashed before its commit point is redone", params=_params)
def _crashed(answer, p, ctx):
    dead, left = _dead_run(p)
    left.update(runs=_sweep(dead, answer), ack=dead.ack(), out=dead.read("upper"))
    mine = World(p)                                       # the student's own run crashes
    mine.write(p["texts"][0])
    crash = outcome(answer.run_observer, mine.c, mine.observer(), mine.row, crash_after="prewrite")
    own = {"crash": crash, "runs": _sweep(mine, answer), "ack": mine.ack(), "out": mine.read("upper")}
    return {"left": left, "own": own}


@exercise.verdict("a run that crashed before its commit point is redone")
def _crashed_ok(obs, p):
    left, own = _get(obs, "left", "own")
    notify, crashed, ack = _get(left, "notify", "crashed", "ack")
    require(len(_committed_acks(ack)) == 1 and not ack.get("lock"),
            f"a run that started at {crashed} crashed after its prewrite: a lock on the "
            f"acknowledgement, no write record, so the notification at {notify} is not "
            f"acknowledged; clean up the dead lock and run again. Committed acknowledgements: "
            f"{_committed_acks(ack)}, locks left: {len(ack.get('lock'))}")
    _output(left, p, p["texts"][0], "after the crashed run was redone")
    crash, ack = _get(own, "crash", "ack")
    require(_was_crash(crash),
            f"run_observer(..., crash_after='prewrite') must pass crash_after to the run's commit, "
            f"so its client dies after the prewrite (fault injection); it {_said(crash)}")
    require(len(_committed_acks(ack)) == 1,
            f"your run crashed after its prewrite, before its commit point: nothing of it is "
            f"committed, so the notification stays pending and one later run must commit; "
            f"committed acknowledgements: {_committed_acks(ack)}")
    _output(own, p, p["texts"][0], "after your crashed run was redone")


# -- 12. the acknowledgement is the primary -------------------------------------------------

@exercise.scenario("the acknowledgement is the run's primary", params=_params)
def _primary(answer, p, ctx):
    w = World(p)
    w.write(p["texts"][0])
    crash = outcome(answer.run_observer, w.c, w.observer(), w.row, crash_after="commit-primary")
    locks = w.locks()
    return {"crash": crash, "locks": locks, "runs": _sweep(w, answer), "calls": w.calls,
            "out": w.read("upper")}


@exercise.verdict("the acknowledgement is the run's primary")
def _primary_ok(obs, p):
    crash, locks = _get(obs, "crash", "locks")
    require(_was_crash(crash),
            f"run_observer(..., crash_after='commit-primary') must pass crash_after to the run's "
            f"commit (fault injection); it {_said(crash)}")
    ack = f"{TABLE}/{p['row']}.{COLUMN}:ack_upper"
    require(isinstance(locks, list) and len(locks) == 1 and isinstance(locks[0], list)
            and len(locks[0]) == 3, f"the run crashed right after its commit point: its one "
                                    f"secondary must still be locked; locks left: {locks}")
    column, _, primary = locks[0]
    require(primary == ack,
            f"the run's first write must be its acknowledgement (Transaction.acknowledge before "
            f"the observer runs): it is the primary, so two runs of one notification conflict on "
            f"their first prewrite. The run's primary was {primary}, its ack a secondary")
    require(len(_calls(obs)) == 1,
            f"the run crashed after its commit point: it committed, so its notification is "
            f"acknowledged and must not run again; the observer ran {_times(len(_calls(obs)))}")
    _output(obs, p, p["texts"][0], "after the crash past the commit point (rolled forward)")


# -- 13. an observer that fails ------------------------------------------------------------------

def _fail_first_call(world, n):
    if n == 1:
        raise RuntimeError("the observer failed (disk full)")


@exercise.scenario("an observer that raises leaves its notification pending", params=_params)
def _raises(answer, p, ctx):
    w = World(p, hook=_fail_first_call)
    notify = w.write(p["texts"][0])
    failed = outcome(answer.run_observer, w.c, w.observer(), w.row)
    state = {"ack": w.ack(), "locks": w.locks()}
    return {"notify": notify, "failed": failed, "state": state, "runs": _sweep(w, answer),
            "calls": w.calls, "out": w.read("upper")}


@exercise.verdict("an observer that raises leaves its notification pending")
def _raises_ok(obs, p):
    notify, failed, state = _get(obs, "notify", "failed", "state")
    calls = _calls(obs)
    require(len(calls) >= 1, f"run_observer never called the observer; it {_said(failed)}")
    start = calls[0].get("start_ts")
    require(isinstance(failed, dict) and str(failed.get("raised", "")).startswith("RuntimeError"),
            f"the observer raised RuntimeError in the run that started at {start}: run_observer "
            f"must let it propagate (a failed run is not a conflict to retry); it {_said(failed)}")
    acks, locks = _committed_acks(_get(state, "ack")[0]), _get(state, "locks")[0]
    require(not acks and not locks,
            f"the run that started at {start} failed: nothing of it may be written (abandon its "
            f"transaction), so the notification at {notify} stays unacknowledged; found committed "
            f"acknowledgements {acks} and locks {locks}")
    require(len(calls) == 2,
            f"the notification at {notify} stayed pending after the failed run: a later run must "
            f"run the observer; it ran {_times(len(calls) - 1)} after")
    _output(obs, p, p["texts"][0], "after the later run")
