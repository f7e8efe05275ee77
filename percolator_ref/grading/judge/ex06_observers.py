"""Exercise 6: observers, acknowledgements and message collapsing (section 2.4), checked by the
trusted world.

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

The student's functions run in the sandbox as clients
(:class:`~percolator_ref.grading.client.ex06_observers.Runner`) of the
grader's :class:`~.trusted.TrustedWorld`, which holds the documents, commits
the writes that set notifications, and clears notifications itself between
runs (as the reference runner does). The observer's function runs in the
client too: it reads ``docs/<row>.contents`` and writes ``docs/<row>.<name>``
= upper(value). Verdicts read the world's record: the committed
acknowledgements, the observer's committed output, the row transactions each
client ran (an observer run reads the document with a ``get``), and the
clients' answers. The families enumerate every schedule of two runs of one
notification, of a run and a new write to the same cell, of a run and a
conflicting writer, and every crash point of a run. Timestamps, rows and texts
come from the secret; which schedules run does not.
"""
from __future__ import annotations

from percolator_ref import Transaction
from percolator_ref.model import Lock, ack_col, lock_col, notify_col, split_column, write_col
from percolator_ref.observers import clear_notification
from percolator_ref.step import PREWRITE_STEPS, Step

from ..client.ex06_observers import COLUMN, TABLE, exercise
from ..framework import require, said
from .participants import Participant


WORDS = ("apple", "brick", "cloud", "delta", "ember", "fjord", "grain", "haven", "ivory", "joker")
FAMILY_TTL = 0.004        # a waiting run outlives a silent holder within a few backoffs


def _params(rng) -> dict:
    texts = [f"{rng.choice(WORDS)}{n}" for n in rng.sample(range(100, 1000), 4)]    # distinct
    return {"t0": rng.randrange(10, 10 ** 6), "row": f"d{rng.randrange(10, 100)}", "texts": texts,
            "client": f"worker-{rng.randrange(1, 10)}", "k": rng.randrange(2, 5)}


# -- the world (the grader's own record) ---------------------------------------------------

class Docs:
    """The trusted world with its observers, and what a verdict reads from it."""

    def __init__(self, w, p, names=("upper",)):
        self.w, self.p, self.row = w, p, p["row"]
        self.observers = []
        for name in names:
            self.register(name)

    def register(self, name) -> list:
        """Register ``name`` on the world (its registered_ts is the oracle's next timestamp)."""
        self.w.cluster.observe(TABLE, COLUMN, name=name)(lambda txn, row, column: None)
        self.observers.append([name, self.w.oracle.peek()])
        return self.observers[-1]

    def write(self, value, row=None):
        """Commit docs/<row>.contents = value (a reference writer); its commit_ts."""
        t = Transaction(self.w.cluster, "writer")
        t.set(row or self.row, COLUMN, value, table=TABLE)
        return t.commit_ts if t.commit() else None

    def runner(self, label="W", **kwargs):
        return self.w.client("runner", self.observers, kwargs.get("fail_first", False), label=label)

    def sweep(self, runner, sweeps: int = 5) -> list:
        """The reference runner's loop with the student's run_observer: the outcomes."""
        outs = []
        for _ in range(sweeps):
            pending = list(self.w.cluster.bigtable.notifications())
            if not pending:
                break
            for table, row, column in pending:
                for name, _ in self.observers:
                    outs.append(self.w.call(runner, "run", name, row))
                clear_notification(self.w.cluster, table, row, column)
        return outs

    def acks(self, name="upper") -> list:
        """The start_ts each committed acknowledgement points at, newest first."""
        found = self.w.cluster.bigtable.versions(TABLE, self.row, write_col(ack_col(COLUMN, name)))
        return [v.start_ts for _, v in found]

    def locks(self) -> list:
        """Every lock left in the row: ``[column, ...]``."""
        return [split_column(physical)[0] for physical in self.w.cluster.bigtable.columns(TABLE, self.row)
                if split_column(physical)[1] == "lock"]

    def output(self, name="upper"):
        """What a reference reader reads in docs/<row>.<name> now."""
        reader = Transaction(self.w.cluster, "auditor")
        try:
            return reader.get(self.row, name, table=TABLE)
        finally:
            reader.abandon()

    def clean(self) -> None:
        """A reference reader scans the document's row: dead clients' locks are cleaned up."""
        reader = Transaction(self.w.cluster, "auditor")
        reader.scan_row(TABLE, self.row)
        reader.abandon()

    def calls(self, c) -> int:
        """How often client ``c`` ran an observer (each run reads the document with a get)."""
        return sum(1 for e in self.w.log if e.client == c.label and e.step == Step.GET
                   and (e.table, e.row) == (TABLE, self.row))


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _was_crash(out) -> bool:
    return isinstance(out, dict) and str(out.get("raised", "")).startswith("ClientCrash")


def _output(d, text, what: str) -> None:
    out = d.output()
    require(out == text.upper(),
            f"{what}, {TABLE}/{d.row}.upper must read the observer's output {text.upper()!r}; "
            f"a reader finds {out!r}")


# -- 1. one write, one run ---------------------------------------------------------------

@exercise.check("a committed write triggers one run, acknowledged with its start_ts",
                params=_params)
def _once(trial, p):
    w = trial.world()
    d = Docs(w, p)
    w.cluster.lockservice.register(p["client"])          # the worker's liveness token
    notify = d.write(p["texts"][0])
    r = d.runner()
    first = w.call(r, "run", "upper", d.row, p["client"])
    require(first == {"value": True} and d.acks(),
            f"a write committed at {notify} set its notification: run_observer must run the "
            f"observer and return True once the run committed; it {said(first)}")
    start = d.acks()[0]
    holders = {change.new.client for e in w.log if e.client == r.label
               for change in e.changes if isinstance(change.new, Lock)}
    require(holders == {p["client"]},
            f"run_observer(..., client={p['client']!r}) must run its transaction as that client "
            f"(it shares the worker's liveness token); its locks were held by {sorted(holders)}")
    second = w.call(r, "run", "upper", d.row, p["client"])
    require(second == {"value": False} and d.calls(r) == 1,
            f"called again with nothing new, run_observer must find the notification at {notify} "
            f"acknowledged (the run that started at {start} saw it) and return False without "
            f"running the observer; it {said(second)}, the observer ran {_times(d.calls(r))}")
    require(d.acks() == [start] and start in r.timestamps,
            f"the run must commit, in its own transaction, the acknowledgement "
            f"{COLUMN}:ack_upper = its start_ts (the start_ts of the observer's last run); "
            f"committed acknowledgements point at {d.acks()}, your client's timestamps were "
            f"{r.timestamps}")
    _output(d, p["texts"][0], "after the run")


# -- 2. message collapsing ----------------------------------------------------------------

@exercise.check("several writes before a run collapse into one run", params=_params)
def _collapse(trial, p):
    w = trial.world()
    d = Docs(w, p)
    notifies = [d.write(text) for text in p["texts"][:p["k"]]]
    r = d.runner()
    d.sweep(r)
    last = p["texts"][p["k"] - 1]
    require(d.calls(r) == 1 and len(d.acks()) == 1,
            f"{p['k']} writes (notifications at {notifies}) before any run collapse into ONE run "
            f"(message collapsing), which sees the newest value {last!r}; the observer ran "
            f"{_times(d.calls(r))}, {len(d.acks())} runs committed")
    _output(d, last, "after the run")


# -- 3. an acknowledged notification --------------------------------------------------

@exercise.check("an acknowledged notification does not run again", params=_params)
def _acked(trial, p):
    w = trial.world()
    d = Docs(w, p)
    notify = d.write(p["texts"][0])
    r = d.runner()
    d.sweep(r)
    require(d.calls(r) >= 1 and d.acks(), f"the write committed at {notify} never ran the observer")
    start = d.acks()[0]
    # the worker died between the run's commit and the clearing: the notification is back
    w.cluster.bigtable.write(TABLE, d.row, notify_col(COLUMN), True, notify)
    why = (f"the notification at {notify} was left in the table, but the run that started at "
           f"{start} committed the acknowledgement {start} > {notify}: it is acknowledged")
    pending = w.call(r, "pending", "upper", d.row)
    require(pending == {"value": None}, f"{why}, so pending_notification must return None; "
                                        f"it {said(pending)}")
    again = w.call(r, "run", "upper", d.row)
    require(again == {"value": False} and d.calls(r) == 1,
            f"{why}, so run_observer must return False without running the observer; it "
            f"{said(again)}, the observer ran {_times(d.calls(r))}")


# -- 4. the snapshot bounds the notification ---------------------------------------------

@exercise.check("pending_notification reads the newest notification at or below start_ts",
                params=_params)
def _bounded(trial, p):
    w = trial.world()
    d = Docs(w, p)
    other = p["row"] + "x"
    below = [d.write(p["texts"][0]), d.write(p["texts"][1])]
    looker = w.client("looker", d.observers, label="L")
    start = looker.timestamps[0] if looker.timestamps else None
    above = [d.write(p["texts"][2]), d.write(p["texts"][3], row=other)]
    row = w.call(looker, "pending", "upper", d.row)
    require(row == {"value": below[1]},
            f"{TABLE}/{p['row']} has notifications at {below[0]}, {below[1]} and {above[0]}; the "
            f"transaction's start_ts is {start}: pending_notification must return the newest at "
            f"or below start_ts, {below[1]}; it {said(row)}")
    theirs = w.call(looker, "pending", "upper", other)
    require(theirs == {"value": None},
            f"{TABLE}/{other} has one notification, at {above[1]}, above the transaction's "
            f"start_ts {start}: that write is not in its snapshot, so pending_notification must "
            f"return None; it {said(theirs)}")


# -- 5. later writes, weak notifications ---------------------------------------------------

@exercise.check("a later write and a weak notification each trigger a new run", params=_params)
def _again(trial, p):
    w = trial.world()
    d = Docs(w, p)
    r = d.runner()
    d.write(p["texts"][0])
    d.sweep(r)
    counts = [d.calls(r)]
    notify = d.write(p["texts"][1])
    d.sweep(r)
    counts.append(d.calls(r))
    weak = Transaction(w.cluster, "writer")
    weak.notify(d.row, COLUMN, table=TABLE)
    weak.commit()
    d.sweep(r)
    counts.append(d.calls(r))
    require(counts[0] == 1, f"the first write must run the observer once; it ran {_times(counts[0])}")
    require(counts[1] == 2,
            f"a write committed at {notify}, after the first run, is newer than its "
            f"acknowledgement: it must run the observer once more; it ran "
            f"{_times(counts[1] - counts[0])} more")
    _output(d, p["texts"][1], "after the second run")
    require(counts[2] == 3,
            f"a weak notification (txn.notify) committed at {weak.commit_ts} sets the notification "
            f"without a write: it is newer than the last acknowledgement, so the observer must "
            f"run once more; it ran {_times(counts[2] - counts[1])} more")


# -- 6. several observers of one column ---------------------------------------------------

@exercise.check("each observer of a column runs once, with its own acknowledgement",
                params=_params)
def _two(trial, p):
    w = trial.world()
    d = Docs(w, p, names=("upper", "shout"))
    notify = d.write(p["texts"][0])
    r = d.runner()
    d.sweep(r)
    acks = {name: d.acks(name) for name in ("upper", "shout")}
    require(all(len(a) == 1 for a in acks.values()) and d.calls(r) == 2,
            f"two observers, upper and shout, watch {TABLE}/{COLUMN}: the write committed at "
            f"{notify} to {TABLE}/{p['row']} must run each of them once, each committing its own "
            f"acknowledgement column; the observers ran {_times(d.calls(r))} in all, committed "
            f"acknowledgements: {acks}")
    require(d.output("shout") == p["texts"][0].upper(),
            f"observer shout must have written {p['texts'][0].upper()!r}; a reader finds "
            f"{d.output('shout')!r}")


# -- 7. registered_ts ------------------------------------------------------------------------

@exercise.check("a write committed before the observer was registered does not trigger it",
                params=_params)
def _registered(trial, p):
    w = trial.world()
    d = Docs(w, p, names=("early",))
    notify = d.write(p["texts"][0])
    _, registered = d.register("late")
    looker = w.client("looker", d.observers, label="L")
    early = w.call(looker, "pending", "early", d.row)
    require(early == {"value": notify},
            f"observer early existed when the write committed at {notify}: pending_notification "
            f"must return {notify} for it; it {said(early)}")
    why = (f"observer late was registered at {registered} (registered_ts), after the write "
           f"committed at {notify}: a write from before an observer existed does not trigger it")
    late = w.call(looker, "pending", "late", d.row)
    require(late == {"value": None}, f"{why}; pending_notification must return None, it {said(late)}")
    r = d.runner()
    run = w.call(r, "run", "late", d.row)
    require(run == {"value": False} and d.calls(r) == 0,
            f"{why}; run_observer must return False without running it, it {said(run)}")
    _across_registration(trial, p)


def _across_registration(trial, p) -> None:
    w = trial.world()
    d = Docs(w, p, names=())
    writer = Transaction(w.cluster, "writer")                # began before the observer existed
    writer.set(d.row, COLUMN, p["texts"][1], table=TABLE)
    _, registered = d.register("late")
    writer.commit()                                          # ... and commits after
    notify = writer.commit_ts
    why = (f"a write committed at {notify}, at or after late's registered_ts {registered}: it "
           f"committed after the observer was registered (only a notification below "
           f"registered_ts is older), so it triggers late")
    looker = w.client("looker", d.observers, label="L")
    late = w.call(looker, "pending", "late", d.row)
    require(late == {"value": notify}, f"{why}; pending_notification must return {notify}, it "
                                       f"{said(late)}")
    r = d.runner()
    run = w.call(r, "run", "late", d.row)
    require(run == {"value": True} and d.calls(r) == 1,
            f"{why}; run_observer must run it and return True, it {said(run)}")


# -- 8. the acknowledgement is the primary; crash_after reaches the commit ------------------

@exercise.check("the acknowledgement is the run's primary", params=_params)
def _primary(trial, p):
    w = trial.world()
    d = Docs(w, p)
    d.write(p["texts"][0])
    r = d.runner()
    crash = w.call(r, "run", "upper", d.row, None, "commit-primary")
    require(_was_crash(crash),
            f"run_observer(..., crash_after='commit-primary') must pass crash_after to the run's "
            f"commit (fault injection), so its client dies right after the commit point; it "
            f"{said(crash)}")
    ack = ack_col(COLUMN, "upper")
    first = next((e for e in w.log if e.client == r.label and e.step in PREWRITE_STEPS), None)
    wrote = [change.column for change in first.changes] if first else []
    require(first is not None and first.step == Step.PREWRITE_PRIMARY
            and lock_col(ack) in wrote,
            f"the run's first write must be its acknowledgement (Transaction.acknowledge before "
            f"the observer runs): it is the primary, so two runs of one notification conflict on "
            f"their first prewrite. The run that started at {r.timestamps[:1]} locked {wrote} "
            f"in its first prewrite")
    fresh = d.runner(label="W2")
    d.sweep(fresh)
    require(d.calls(r) + d.calls(fresh) == 1 and len(d.acks()) == 1,
            f"the run crashed after its commit point: it committed, so its notification is "
            f"acknowledged and must not run again; the observer ran "
            f"{_times(d.calls(r) + d.calls(fresh))}")
    _output(d, p["texts"][0], "after the crash past the commit point (rolled forward)")


# -- 9. an observer that fails ------------------------------------------------------------------

@exercise.check("an observer that raises leaves its notification pending", params=_params)
def _raises(trial, p):
    w = trial.world()
    d = Docs(w, p)
    notify = d.write(p["texts"][0])
    r = d.runner(fail_first=True)
    failed = w.call(r, "run", "upper", d.row)
    require(isinstance(failed, dict) and str(failed.get("raised", "")).startswith("RuntimeError"),
            f"the observer raised RuntimeError in the run of the notification at {notify}: "
            f"run_observer must let it propagate (a failed run is not a conflict to retry); it "
            f"{said(failed)}")
    require(not d.acks() and not d.locks(),
            f"the run failed: nothing of it may be written (abandon its transaction), so the "
            f"notification at {notify} stays unacknowledged; found committed acknowledgements "
            f"{d.acks()} and locks on {d.locks()}")
    d.sweep(r)
    require(d.calls(r) == 2 and len(d.acks()) == 1,
            f"the notification at {notify} stayed pending after the failed run: a later run must "
            f"run the observer and commit; it ran {_times(d.calls(r) - 1)} after")
    _output(d, p["texts"][0], "after the later run")


# -- 10. every small interleaving, every crash point ---------------------------------------------

def _settled(d, p, w, clients, text, what: str) -> None:
    """After a family: a fresh worker sweeps; one committed run per notification, output right."""
    answers = ", ".join(f"{label} {said(c.answer) if c.answer else 'crashed'}"
                        for label, c in clients.items())
    fresh = d.runner(label="S")
    d.sweep(fresh)
    left = list(w.cluster.bigtable.notifications())
    require(not left, f"{what} ({answers}), a sweep left notifications pending: {left}")
    _output(d, text, f"{what} ({answers}) and a sweep")
    d.clean()
    require(not d.locks(), f"{what} ({answers}), then a sweep and a reader that cleans up: locks "
                           f"were left on {d.locks()}")


def _one_run_per_notification(d, notifies: list, what: str, answers: str) -> None:
    """Committed runs: never two for the same notifications (each run covers those below it)."""
    acks = sorted(d.acks())
    for a, b in zip(acks, acks[1:]):
        require(any(a <= n < b for n in notifies),
                f"{what}: the runs that started at {a} and {b} both committed, with no new "
                f"notification between them (notifications at {notifies}; {answers}): of two "
                f"runs of one notification at most one may commit")


@exercise.check("every interleaving of two runs of one notification commits exactly one",
                params=_params, limit=60.0)
def _race_runs(trial, p):
    def family(w):
        d = Docs(w, p)
        w.docs, w.notifies = d, [d.write(p["texts"][0])]
        return [Participant("A", "run", (d.observers, "upper", d.row)),
                Participant("B", "run", (d.observers, "upper", d.row))]

    def judge(w, clients):
        d = w.docs
        answers = ", ".join(f"{label} {said(c.answer)}" for label, c in clients.items())
        _one_run_per_notification(d, w.notifies, "two runs of one notification", answers)
        require(len(d.acks()) == 1 and sorted(str(c.answer) for c in clients.values())
                == sorted([str({"value": False}), str({"value": True})]),
                f"runs A and B of the notification at {w.notifies[0]}: exactly one must commit "
                f"and return True, the other find it acknowledged and return False ({answers}; "
                f"committed acknowledgements {d.acks()})")
        _settled(d, p, w, clients, p["texts"][0], "after two runs of one notification")
    trial.explore(family, judge, ttl=FAMILY_TTL, crashes=0)


@exercise.check("every interleaving of a run with a new write to the document runs the observer "
                "on the newest value", params=_params, limit=60.0)
def _race_write(trial, p):
    def family(w):
        d = Docs(w, p)
        w.docs, w.notifies = d, [d.write(p["texts"][0])]
        return [Participant("R", "run", (d.observers, "upper", d.row)),
                Participant("X", "writer", (d.row, COLUMN, p["texts"][1]), host="trusted")]

    def judge(w, clients):
        d = w.docs
        require(clients["R"].answer == {"value": True},
                f"the notification at {w.notifies[0]} was pending: run_observer must run it and "
                f"return True; it {said(clients['R'].answer)}")
        text = p["texts"][1] if clients["X"].answer == {"value": True} else p["texts"][0]
        _settled(d, p, w, clients, text, "a run raced a new write of the document")
    trial.explore(family, judge, ttl=FAMILY_TTL, crashes=0)


@exercise.check("every interleaving of a run with a conflicting writer: the run is retried",
                params=_params, limit=60.0)
def _race_conflict(trial, p):
    def family(w):
        d = Docs(w, p)
        w.docs, w.notifies = d, [d.write(p["texts"][0])]
        return [Participant("R", "run", (d.observers, "upper", d.row)),
                Participant("X", "writer", (d.row, "upper", "SET BY ANOTHER CLIENT"),
                            host="trusted")]

    def judge(w, clients):
        d = w.docs
        answers = ", ".join(f"{label} {said(c.answer)}" for label, c in clients.items())
        require(clients["R"].answer == {"value": True} and len(d.acks()) == 1,
                f"a run of the notification at {w.notifies[0]} raced a writer of {TABLE}/{d.row}"
                f".upper ({answers}): a run that loses the write-write conflict is retried after a "
                f"backoff, as a new transaction, until one commits; committed acknowledgements "
                f"{d.acks()}")
        require(d.acks()[0] in clients["R"].timestamps and not d.locks(),
                f"the committed acknowledgement {d.acks()[0]} must be the start_ts of your run's "
                f"committed transaction; locks left: {d.locks()}")
    trial.explore(family, judge, ttl=FAMILY_TTL, crashes=0)


@exercise.check("every crash point of a run: the run is redone, or rolled forward",
                params=_params, limit=60.0)
def _race_crash(trial, p):
    def family(w):
        d = Docs(w, p)
        w.docs, w.notifies = d, [d.write(p["texts"][0])]
        return [Participant("R", "run", (d.observers, "upper", d.row), crashable=True)]

    def judge(w, clients):
        d = w.docs
        _settled(d, p, w, clients, p["texts"][0], "a run crashed at one of its steps")
        require(len(d.acks()) == 1,
                f"a run crashed at one of its steps, then a fresh worker swept: exactly one run "
                f"of the notification at {w.notifies[0]} may commit; committed acknowledgements "
                f"{d.acks()}")
    trial.explore(family, judge, ttl=FAMILY_TTL, preemptions=0, crashes=1)
