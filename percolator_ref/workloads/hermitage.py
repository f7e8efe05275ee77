"""The Hermitage isolation tests, run against Percolator's snapshot isolation.

Martin Kleppmann's Hermitage suite describes each isolation anomaly as a short
schedule of two or three transactions over a table ``test`` holding rows
``1 -> 10`` and ``2 -> 20``. Here every schedule is run step by step, with an
explicit interleaving, on a fresh :class:`~percolator_ref.Cluster`; a
predicate read (``select ... where value % 3 = 0``) is a ``scan`` of the
table filtered in Python.

Snapshot isolation prevents G0, G1a, G1b, G1c, OTV, PMP, P4 and G-single (its
read and write variants) and allows G2-item (write skew) and G2 (anti-dependency
cycles). Each scenario is data (a :class:`Scenario`: its moves and how to tell
whether the anomaly showed), played by one interpreter; calling it returns a :class:`HermitageResult`: what was expected,
what was observed, whether the recorded history passed the checker, the
schedule as it ran (a list of :class:`Move`, each with what it read or how the
commit ended) and a one-line reason filled in with the run's timestamps;
:func:`run_all` runs the whole set and returns a :class:`HermitageTable`.
:func:`percolator_ref.viz.frames.hermitage_frame` and
:func:`percolator_ref.viz.frames.schedule_frame` tabulate them with pandas.

>>> r = p4()
>>> (r.name, r.expected, r.observed, r.ok)
('P4', 'prevented', 'prevented', True)
>>> [str(m) for m in r.schedule if m.action == "commit"]
['commit -> committed @ 5', 'commit -> aborted: prewrite test/1.value: write record @ 5 >= start 4']
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Optional

from ..services.clock import ManualClock
from ..cluster import Cluster
from ..errors import ClientCrash

TABLE = "test"
COLUMN = "value"
PREVENTED, ALLOWED = "prevented", "allowed"

ANOMALIES = {
    "G0": "write cycles (dirty write)",
    "G1a": "aborted read (dirty read)",
    "G1b": "intermediate read (dirty read)",
    "G1c": "circular information flow (dirty read)",
    "OTV": "observed transaction vanishes",
    "PMP": "predicate-many-preceders",
    "PMP-write": "predicate-many-preceders, write predicate",
    "P4": "lost update",
    "G-single": "single anti-dependency cycle (read skew)",
    "G-single-dependencies": "read skew, predicate dependencies",
    "G-single-write-1": "read skew, write predicate",
    "G-single-write-2": "read skew, interleaved write predicate",
    "G2-item": "item anti-dependency cycle (write skew)",
    "G2": "anti-dependency cycle over a predicate",
    "G2-two-edges": "anti-dependency cycle with a read-only transaction",
}
"""Each scenario's anomaly, as Hermitage names it."""


@dataclass(frozen=True)
class Move:
    """One move of a schedule: transaction ``txn`` ("T1") did ``action``; ``result`` is
    what came of it (the value read, ``start 3`` for a begin, how a commit ended)."""
    txn: str
    action: str
    result: str = ""

    def __str__(self):
        return f"{self.action} -> {self.result}" if self.result else self.action


@dataclass
class HermitageResult:
    """One scenario's outcome.

    ``observed`` is ``"allowed"`` if the anomaly happened in this run, else
    ``"prevented"``; ``ok`` is True when that matches ``expected`` and the
    history passed the snapshot-isolation checker. ``details`` holds what the
    transactions read (by step label), whether each committed, and the final
    table as a fresh reader sees it. ``schedule``: the moves in the order they
    ran; ``anomaly``: Hermitage's name for it (:data:`ANOMALIES`); ``reason``:
    why snapshot isolation prevents or allows it, with this run's timestamps.
    """
    name: str
    description: str
    expected: str
    observed: str
    history_ok: bool
    details: dict = field(default_factory=dict)
    schedule: tuple = ()
    reason: str = ""
    ok: bool = field(init=False)

    def __post_init__(self):
        self.ok = self.expected == self.observed and self.history_ok

    @property
    def anomaly(self) -> str:
        return ANOMALIES.get(self.name, "")

    @property
    def transactions(self) -> list:
        """The scenario's transaction names in the order they began (``["T1", "T2"]``)."""
        return list(dict.fromkeys(m.txn for m in self.schedule))

    def __str__(self):
        mark = "ok" if self.ok else "FAIL"
        return f"{self.name:<22} expected {self.expected:<9} observed {self.observed:<9} {mark}"


class HermitageTable(list):
    """A list of :class:`HermitageResult` that renders as a text or HTML table."""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self)

    def __repr__(self):
        return "\n".join(str(r) for r in self)

    def _repr_html_(self):
        rows = "".join(
            f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.description)}</td>"
            f"<td>{r.expected}</td><td>{r.observed}</td>"
            f"<td>{'yes' if r.history_ok else 'NO'}</td><td>{'ok' if r.ok else 'FAIL'}</td></tr>"
            for r in self)
        return ("<table><thead><tr><th>anomaly</th><th>schedule</th><th>expected under SI</th>"
                "<th>observed</th><th>checker</th><th>verdict</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>")


CONFLICT = " -> conflict, abort"
CLEANUP_STEPS = {"cleanup-primary": "rolled back", "roll-back": "rolled back",
                 "roll-forward": "rolled forward"}


def shown(found: dict) -> str:
    """A predicate read's rows as ``1=10, 2=20`` (``none`` if empty)."""
    return ", ".join(f"{row}={value}" for row, value in found.items()) or "none"


class _Run:
    """One scenario on one cluster: the Hermitage table, the moves, labelled reads, commits."""

    def __init__(self, cluster):
        if cluster is None:
            cluster = Cluster(clock=ManualClock())
        self.cluster = cluster
        self.reads: dict = {}
        self.commits: dict = {}
        self.moves: list = []
        self.names: dict = {}             # transaction -> "T1"
        self.txns: dict = {}              # "T1" -> transaction
        setup = cluster.begin()
        setup.set("1", COLUMN, 10, table=TABLE)
        setup.set("2", COLUMN, 20, table=TABLE)
        assert setup.commit()

    def move(self, txn, action: str, result: str = "") -> None:
        self.moves.append(Move(self.names[txn], action, result))

    def begin(self, name: str):
        txn = self.cluster.begin()
        self.names[txn] = name
        self.move(txn, "begin", f"start {txn.start_ts}")
        return txn

    def get(self, txn, row: str):
        """``select value from test where id = row``"""
        with self.cluster.tracer.record() as events:
            value = txn.get(row, COLUMN, table=TABLE)
        self.reads[f"{self.names[txn]} get {row}"] = value
        self.move(txn, f"get {row}", str(value) + self.cleanups(events))
        return value

    def where(self, txn, label: str, predicate: Callable) -> dict:
        """``select * from test where <predicate>``: a scan filtered by ``predicate(value)``."""
        with self.cluster.tracer.record() as events:
            found = {row: value for row, column, value in txn.scan(TABLE)
                     if column == COLUMN and predicate(value)}
        self.reads[f"{self.names[txn]} where {label}"] = found
        self.move(txn, f"where {label.split(' (')[0]}", shown(found) + self.cleanups(events))
        return found

    def cleanups(self, events) -> str:
        """`` (rolled back T1's locks)`` if a read cleaned up after a dead client, else ``""``.

        The holder is named by the start_ts of the lock the cleanup erased.
        """
        by_start = {t.start_ts: n for t, n in self.names.items()}
        done = {}
        for e in events:
            for change in e.changes:
                if e.step in CLEANUP_STEPS and change.erased and change.column.endswith(":lock"):
                    done[(CLEANUP_STEPS[e.step], by_start.get(change.ts, "a dead client"))] = None
        return "".join(f" ({what} {holder}'s locks)" for what, holder in done)

    def set(self, txn, row: str, value) -> None:
        txn.set(row, COLUMN, value, table=TABLE)
        self.move(txn, f"set {row} = {value}")

    def delete(self, txn, row: str) -> None:
        txn.delete(row, COLUMN, table=TABLE)
        self.move(txn, f"delete {row}")

    def commit(self, txn) -> bool:
        """Commit ``txn``; the move says how it ended (an abort with the prewrite that failed)."""
        with self.cluster.tracer.record() as events:
            ok = txn.commit()
        self.commits[self.names[txn]] = ok
        if ok:
            self.move(txn, "commit", f"committed @ {txn.commit_ts}" if txn.commit_ts
                      else "committed (read-only)")
        else:
            why = next((e.note for e in events if e.note.endswith(CONFLICT)), "")
            self.move(txn, "commit", f"aborted: {why[:-len(CONFLICT)]}" if why else "aborted")
        return ok

    def crash_after(self, txn, point: str) -> None:
        """Commit ``txn`` with its client dying after ``point`` (before the commit point)."""
        try:
            txn.commit(crash_after=point)
        except ClientCrash:
            self.commits[self.names[txn]] = "crashed before commit point"
        self.move(txn, f"commit, client dies after {point}", "crashed, locks left")

    def final(self) -> dict:
        reader = self.cluster.begin()
        view = {row: value for row, column, value in reader.scan(TABLE) if column == COLUMN}
        reader.commit()
        return view

    def result(self, name: str, description: str, expected: str, happened: bool,
               final: dict, reason: str) -> HermitageResult:
        """The scenario's result; ``reason`` may name ``{T1.start}``, ``{T2.commit}``, ..."""
        report = self.cluster.check_history()
        details = {"reads": self.reads, "commits": self.commits, "final": final}
        facts = {n: SimpleNamespace(start=t.start_ts, commit=t.commit_ts)
                 for t, n in self.names.items()}
        return HermitageResult(name, description, expected, ALLOWED if happened else PREVENTED,
                               report.ok, details, tuple(self.moves), reason.format(**facts))


# -- the schedules, as data ---------------------------------------------------------
# A move is ``(txn, action, *arguments)``: "begin"; "get" row; "set" row value (a
# callable value is computed from the reads so far); "delete" row; "where" label
# predicate (a predicate read); "update where" label predicate new (set each row found
# to ``new(value)``); "delete where" label predicate; "commit"; "crash after" point.
# ``happened(reads, commits, final)`` says whether the anomaly showed; ``reads`` is keyed
# as the moves label them ("T1 get 2", "T1 where value % 3 = 0").

def _everything(v) -> bool:
    return True


def _seen(reads: dict, final: dict) -> list:
    """Every value any read returned, and the final table's."""
    values = []
    for read in reads.values():
        values += list(read.values()) if isinstance(read, dict) else [read]
    return values + list(final.values())


@dataclass(frozen=True)
class Scenario:
    """One Hermitage schedule; calling it runs it on ``cluster`` (default: a fresh one)."""
    name: str
    description: str
    expected: str
    moves: tuple
    happened: Callable
    reason: str                # may name {T1.start}, {T2.commit}, ...

    @property
    def __name__(self) -> str:
        return self.name.lower().replace("-", "_")

    def __call__(self, cluster=None) -> HermitageResult:
        run = _Run(cluster)
        for move in self.moves:
            play(run, *move)
        final = run.final()
        return run.result(self.name, self.description, self.expected,
                          bool(self.happened(run.reads, run.commits, final)), final, self.reason)


def play(run, who: str, action: str, *args) -> None:
    """One move of a schedule (see the table above)."""
    if action == "begin":
        run.txns[who] = run.begin(who)
        return
    txn = run.txns[who]
    if action in ("update where", "delete where"):
        for row, value in run.where(txn, args[0], args[1]).items():
            if action == "delete where":
                run.delete(txn, row)
            else:
                run.set(txn, row, args[2](value))
    elif action == "set":
        row, value = args
        run.set(txn, row, value(run.reads) if callable(value) else value)
    else:
        getattr(run, action.replace(" ", "_"))(txn, *args)


T1_T2 = (("T1", "begin"), ("T2", "begin"))

g0 = Scenario(
    "G0", "T1,T2 write rows 1 and 2 interleaved", PREVENTED,
    T1_T2 + (("T1", "set", "1", 11), ("T2", "set", "1", 12), ("T1", "set", "2", 21),
             ("T1", "commit"), ("T2", "set", "2", 22), ("T2", "commit")),
    lambda reads, commits, final: all(commits.values())
    or final not in ({"1": 11, "2": 21}, {"1": 12, "2": 22}),
    "T2's prewrite meets T1's write record @{T1.commit}, newer than its start "
    "{T2.start}, and aborts (a prewrite aborts on a newer write record or on any "
    "lock): T1's pair survives whole")

g1a = Scenario(
    "G1a", "T2 reads while T1's writes are prewritten, then T1 aborts", PREVENTED,
    T1_T2 + (("T1", "set", "1", 101), ("T1", "set", "2", 102),
             ("T2", "where", "true (before T1 aborts)", _everything),
             ("T1", "crash after", "prewrite"),     # locks and data written, then the client dies
             ("T2", "where", "true (after T1 aborts)", _everything), ("T2", "commit")),
    lambda reads, commits, final: {101, 102} & set(_seen(reads, final)),
    "a read needs a write record: T1's data @ {T1.start} has only a lock, "
    "and T2 rolls back the dead client's locks through the primary")

g1b = Scenario(
    "G1b", "T1 writes 101 then 11; T2 reads around T1's commit", PREVENTED,
    T1_T2 + (("T1", "set", "1", 101),
             ("T2", "where", "value % 5 = 0 (before T1 commits)", lambda v: v % 5 == 0),
             ("T1", "set", "1", 11), ("T1", "commit"),
             ("T2", "where", "value % 3 = 0 (after T1 commits)", lambda v: v % 3 == 0),
             ("T2", "commit")),
    lambda reads, commits, final: 101 in _seen(reads, final),
    "writes are buffered until commit: 101 never reached the store, and "
    "T1's 11 committed at {T1.commit}, after T2's snapshot at {T2.start}")

g1c = Scenario(
    "G1c", "T1 writes 1, T2 writes 2, each reads the other's row", PREVENTED,
    T1_T2 + (("T1", "set", "1", 11), ("T2", "set", "2", 22), ("T1", "get", "2"),
             ("T2", "get", "1"), ("T1", "commit"), ("T2", "commit")),
    lambda reads, commits, final: reads["T1 get 2"] == 22 and reads["T2 get 1"] == 11,
    "each reads its own snapshot (starts {T1.start} and {T2.start}), taken "
    "before either committed: neither sees the other's write")

otv = Scenario(
    "OTV", "T3 reads row 1 before and row 2 after T2's commit", PREVENTED,
    T1_T2 + (("T1", "set", "1", 11), ("T1", "set", "2", 19), ("T2", "set", "1", 12),
             ("T1", "commit"), ("T2", "set", "2", 18), ("T3", "begin"), ("T3", "get", "1"),
             ("T2", "commit"), ("T3", "get", "2"), ("T3", "commit")),
    lambda reads, commits, final: (reads["T3 get 1"], reads["T3 get 2"]) not in
    ((11, 19), (12, 18)),
    "both of T3's reads use its snapshot at {T3.start}, which holds T1's pair "
    "(committed at {T1.commit}); T2 conflicts with T1 on row 1 and aborts")

pmp = Scenario(
    "PMP", "T2 inserts 30 between T1's two predicate reads", PREVENTED,
    T1_T2 + (("T1", "where", "value = 30", lambda v: v == 30), ("T2", "set", "3", 30),
             ("T2", "commit"), ("T1", "where", "value % 3 = 0", lambda v: v % 3 == 0),
             ("T1", "commit")),
    lambda reads, commits, final: reads["T1 where value % 3 = 0"],
    "a predicate read scans T1's snapshot at {T1.start}: T2's row 3, "
    "committed at {T2.commit}, is not in it")

pmp_write = Scenario(
    "PMP-write", "T1 adds 10 to every row while T2 deletes value = 20", PREVENTED,
    T1_T2 + (("T1", "update where", "true", _everything, lambda v: v + 10),
             ("T2", "delete where", "value = 20", lambda v: v == 20),
             ("T1", "commit"), ("T2", "commit")),
    lambda reads, commits, final: commits["T2"] or final != {"1": 20, "2": 30},
    "both write row 2: T2's prewrite meets T1's write record @{T1.commit}, newer "
    "than its start {T2.start}, so T2's delete aborts")

p4 = Scenario(
    "P4", "T1 and T2 both increment row 1", PREVENTED,
    T1_T2 + (("T1", "get", "1"), ("T2", "get", "1"),
             ("T1", "set", "1", lambda reads: reads["T1 get 1"] + 1),
             ("T2", "set", "1", lambda reads: reads["T2 get 1"] + 1),
             ("T1", "commit"), ("T2", "commit")),
    lambda reads, commits, final: all(commits.values()),
    "both write row 1: T2's prewrite meets T1's write record @{T1.commit}, newer "
    "than its start {T2.start}, and aborts")

g_single = Scenario(
    "G-single", "T1 reads row 1, T2 updates both, T1 reads row 2", PREVENTED,
    T1_T2 + (("T1", "get", "1"), ("T2", "get", "1"), ("T2", "get", "2"),
             ("T2", "set", "1", 12), ("T2", "set", "2", 18), ("T2", "commit"),
             ("T1", "get", "2"), ("T1", "commit")),
    lambda reads, commits, final: reads["T1 get 1"] + reads["T1 get 2"] != 30,
    "T1 reads row 2 in its snapshot at {T1.start}, from before T2's commit "
    "at {T2.commit}: 10 + 20, a consistent total")

g_single_dependencies = Scenario(
    "G-single-dependencies", "T2 sets 10 to 12 between T1's predicate reads", PREVENTED,
    T1_T2 + (("T1", "where", "value % 5 = 0", lambda v: v % 5 == 0),
             ("T2", "update where", "value = 10", lambda v: v == 10, lambda v: 12),
             ("T2", "commit"), ("T1", "where", "value % 3 = 0", lambda v: v % 3 == 0),
             ("T1", "commit")),
    lambda reads, commits, final: reads["T1 where value % 3 = 0"],
    "T1's second predicate read uses the same snapshot at {T1.start}: "
    "T2's 12, committed at {T2.commit}, is not in it")

g_single_write_1 = Scenario(
    "G-single-write-1", "T2 commits 12/18, then T1 deletes where value = 20", PREVENTED,
    T1_T2 + (("T1", "get", "1"), ("T2", "where", "true", _everything),
             ("T2", "set", "1", 12), ("T2", "set", "2", 18), ("T2", "commit"),
             ("T1", "delete where", "value = 20", lambda v: v == 20), ("T1", "commit")),
    lambda reads, commits, final: commits["T1"] or final != {"1": 12, "2": 18},
    "T1 deletes row 2 as its snapshot shows it, but T2 wrote row 2 at "
    "{T2.commit}, after T1's start {T1.start}: T1's prewrite aborts")

g_single_write_2 = Scenario(
    "G-single-write-2", "T1 deletes value = 20 while T2 updates both rows", PREVENTED,
    T1_T2 + (("T1", "get", "1"), ("T2", "where", "true", _everything),
             ("T2", "set", "1", 12), ("T1", "delete where", "value = 20", lambda v: v == 20),
             ("T2", "set", "2", 18), ("T1", "commit"), ("T2", "commit")),
    lambda reads, commits, final: all(commits.values()) or final != {"1": 10},
    "T1's delete of row 2 committed at {T1.commit}, after T2's start "
    "{T2.start}: T2's prewrite of row 2 aborts and T2 erases its lock on row 1")

g2_item = Scenario(
    "G2-item", "T1 and T2 read both rows, update different ones", ALLOWED,
    T1_T2 + (("T1", "get", "1"), ("T1", "get", "2"), ("T2", "get", "1"), ("T2", "get", "2"),
             ("T1", "set", "1", 11), ("T2", "set", "2", 21), ("T1", "commit"),
             ("T2", "commit")),
    lambda reads, commits, final: all(commits.values()) and final == {"1": 11, "2": 21},
    "T1 writes only row 1 and T2 only row 2: no write-write conflict, so both "
    "commit although each read the row the other wrote (write skew)")

g2 = Scenario(
    "G2", "T1, T2 see no multiple of 3, then each inserts one", ALLOWED,
    T1_T2 + (("T1", "where", "value % 3 = 0", lambda v: v % 3 == 0),
             ("T2", "where", "value % 3 = 0", lambda v: v % 3 == 0),
             ("T1", "set", "3", 30), ("T2", "set", "4", 42), ("T1", "commit"), ("T2", "commit")),
    lambda reads, commits, final: all(commits.values()),
    "each predicate read finds no multiple of 3 and the inserts are different "
    "rows (3 and 4): no write-write conflict, so both commit")

g2_two_edges = Scenario(
    "G2-two-edges", "T2 commits, read-only T3 sees it, then T1 commits", ALLOWED,
    T1_T2 + (("T1", "where", "true", _everything), ("T2", "set", "2", 25), ("T2", "commit"),
             ("T3", "begin"), ("T3", "where", "true", _everything), ("T3", "commit"),
             ("T1", "set", "1", 0), ("T1", "commit")),
    lambda reads, commits, final: commits["T1"] and reads["T3 where true"] == {"1": 10, "2": 25},
    "T1 writes row 1 and T2 row 2: no conflict; read-only T3 (start "
    "{T3.start}) saw T2 (committed at {T2.commit}) without T1, which read "
    "before T2: no serial order fits")


SCENARIOS = (g0, g1a, g1b, g1c, otv, pmp, pmp_write, p4, g_single, g_single_dependencies,
             g_single_write_1, g_single_write_2, g2_item, g2, g2_two_edges)


def run_all(make_cluster: Optional[Callable] = None) -> HermitageTable:
    """Run every scenario, each on a fresh cluster from ``make_cluster()`` (default: in memory)."""
    return HermitageTable(s(make_cluster() if make_cluster else None) for s in SCENARIOS)
