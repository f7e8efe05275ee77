"""The Hermitage isolation tests, run against Percolator's snapshot isolation.

Martin Kleppmann's Hermitage suite describes each isolation anomaly as a short
schedule of two or three transactions over a table ``test`` holding rows
``1 -> 10`` and ``2 -> 20``. Here every schedule is run step by step, with an
explicit interleaving, on a fresh :class:`~percolator_ref.Cluster`; a
predicate read (``select ... where value % 3 = 0``) is a ``scan`` of the
table filtered in Python.

Snapshot isolation prevents G0, G1a, G1b, G1c, OTV, PMP, P4 and G-single (its
read and write variants) and allows G2-item (write skew) and G2 (anti-dependency
cycles). Each function returns a :class:`HermitageResult`: what was expected,
what was observed, and whether the recorded history passed the checker;
:func:`run_all` runs the whole set and returns a :class:`HermitageTable`.

>>> r = p4()
>>> (r.name, r.expected, r.observed, r.ok)
('P4', 'prevented', 'prevented', True)
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..clock import ManualClock
from ..cluster import Cluster
from ..errors import ClientCrash

TABLE = "test"
COLUMN = "value"
PREVENTED, ALLOWED = "prevented", "allowed"


@dataclass
class HermitageResult:
    """One scenario's outcome.

    ``observed`` is ``"allowed"`` if the anomaly happened in this run, else
    ``"prevented"``; ``ok`` is True when that matches ``expected`` and the
    history passed the snapshot-isolation checker. ``details`` holds what the
    transactions read (by step label), whether each committed, and the final
    table as a fresh reader sees it.
    """
    name: str
    description: str
    expected: str
    observed: str
    history_ok: bool
    details: dict = field(default_factory=dict)
    ok: bool = field(init=False)

    def __post_init__(self):
        self.ok = self.expected == self.observed and self.history_ok

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


class _Run:
    """One scenario on one cluster: the Hermitage table, labelled reads, commits."""

    def __init__(self, cluster):
        if cluster is None:
            cluster = Cluster(clock=ManualClock())
        self.cluster = cluster
        self.reads: dict = {}
        self.commits: dict = {}
        setup = cluster.begin()
        setup.set("1", COLUMN, 10, table=TABLE)
        setup.set("2", COLUMN, 20, table=TABLE)
        assert setup.commit()

    def begin(self):
        return self.cluster.begin()

    def get(self, name: str, txn, row: str):
        """``select value from test where id = row``"""
        value = txn.get(row, COLUMN, table=TABLE)
        self.reads[f"{name} get {row}"] = value
        return value

    def where(self, name: str, txn, label: str, predicate: Callable) -> dict:
        """``select * from test where <predicate>``: a scan filtered by ``predicate(value)``."""
        found = {row: value for row, column, value in txn.scan(TABLE)
                 if column == COLUMN and predicate(value)}
        self.reads[f"{name} where {label}"] = found
        return found

    def commit(self, name: str, txn) -> bool:
        self.commits[name] = txn.commit()
        return self.commits[name]

    def final(self) -> dict:
        reader = self.cluster.begin()
        view = {row: value for row, column, value in reader.scan(TABLE) if column == COLUMN}
        reader.commit()
        return view

    def result(self, name: str, description: str, expected: str, happened: bool,
               final: dict) -> HermitageResult:
        report = self.cluster.check_history()
        details = {"reads": self.reads, "commits": self.commits, "final": final}
        return HermitageResult(name, description, expected, ALLOWED if happened else PREVENTED,
                               report.ok, details)


# -- the schedules ---------------------------------------------------------------

def g0(cluster=None) -> HermitageResult:
    """G0 write cycles: two writers interleave updates of both rows; the result must be one
    writer's pair, never a mix (first committer wins)."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    t1.set("1", COLUMN, 11, table=TABLE)
    t2.set("1", COLUMN, 12, table=TABLE)
    t1.set("2", COLUMN, 21, table=TABLE)
    run.commit("T1", t1)
    t2.set("2", COLUMN, 22, table=TABLE)
    run.commit("T2", t2)
    final = run.final()
    happened = all(run.commits.values()) or final not in ({"1": 11, "2": 21}, {"1": 12, "2": 22})
    return run.result("G0", "T1,T2 write rows 1 and 2 interleaved", PREVENTED, happened, final)


def g1a(cluster=None) -> HermitageResult:
    """G1a aborted read: T1 writes 101 and dies before its commit point; T2 never reads 101."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    t1.set("1", COLUMN, 101, table=TABLE)
    t1.set("2", COLUMN, 102, table=TABLE)
    run.where("T2", t2, "true (before T1 aborts)", lambda v: True)
    try:
        t1.commit(crash_after="prewrite")      # locks and data written, then the client dies
    except ClientCrash:
        run.commits["T1"] = "crashed before commit point"
    run.where("T2", t2, "true (after T1 aborts)", lambda v: True)
    run.commit("T2", t2)
    final = run.final()
    seen = [v for r in run.reads.values() for v in r.values()] + list(final.values())
    return run.result("G1a", "T2 reads while T1's writes are prewritten, then T1 aborts",
                      PREVENTED, 101 in seen or 102 in seen, final)


def g1b(cluster=None) -> HermitageResult:
    """G1b intermediate read: T1 writes 101 then 11 and commits; nobody ever reads 101."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    t1.set("1", COLUMN, 101, table=TABLE)
    run.where("T2", t2, "value % 5 = 0 (before T1 commits)", lambda v: v % 5 == 0)
    t1.set("1", COLUMN, 11, table=TABLE)
    run.commit("T1", t1)
    run.where("T2", t2, "value % 3 = 0 (after T1 commits)", lambda v: v % 3 == 0)
    run.commit("T2", t2)
    final = run.final()
    seen = [v for r in run.reads.values() for v in r.values()] + list(final.values())
    return run.result("G1b", "T1 writes 101 then 11; T2 reads around T1's commit",
                      PREVENTED, 101 in seen, final)


def g1c(cluster=None) -> HermitageResult:
    """G1c circular information flow: T1 and T2 each write one row and read the other's."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    t1.set("1", COLUMN, 11, table=TABLE)
    t2.set("2", COLUMN, 22, table=TABLE)
    a = run.get("T1", t1, "2")
    b = run.get("T2", t2, "1")
    run.commit("T1", t1)
    run.commit("T2", t2)
    final = run.final()
    return run.result("G1c", "T1 writes 1, T2 writes 2, each reads the other's row",
                      PREVENTED, a == 22 and b == 11, final)


def otv(cluster=None) -> HermitageResult:
    """OTV observed transaction vanishes: T3 must not see T1's row 1 and T2's row 2."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    t1.set("1", COLUMN, 11, table=TABLE)
    t1.set("2", COLUMN, 19, table=TABLE)
    t2.set("1", COLUMN, 12, table=TABLE)
    run.commit("T1", t1)
    t2.set("2", COLUMN, 18, table=TABLE)
    t3 = run.begin()
    a = run.get("T3", t3, "1")
    run.commit("T2", t2)
    b = run.get("T3", t3, "2")
    run.commit("T3", t3)
    final = run.final()
    return run.result("OTV", "T3 reads row 1 before and row 2 after T2's commit",
                      PREVENTED, (a, b) not in ((11, 19), (12, 18)), final)


def pmp(cluster=None) -> HermitageResult:
    """PMP predicate-many-preceders (read): an insert does not appear in T1's predicate read."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    run.where("T1", t1, "value = 30", lambda v: v == 30)
    t2.set("3", COLUMN, 30, table=TABLE)
    run.commit("T2", t2)
    later = run.where("T1", t1, "value % 3 = 0", lambda v: v % 3 == 0)
    run.commit("T1", t1)
    final = run.final()
    return run.result("PMP", "T2 inserts 30 between T1's two predicate reads",
                      PREVENTED, bool(later), final)


def pmp_write(cluster=None) -> HermitageResult:
    """PMP with a write predicate: T2's ``delete where value = 20`` must not survive T1's update."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    for row, value in run.where("T1", t1, "true", lambda v: True).items():
        t1.set(row, COLUMN, value + 10, table=TABLE)          # update test set value = value + 10
    for row in run.where("T2", t2, "value = 20", lambda v: v == 20):
        t2.delete(row, COLUMN, table=TABLE)                   # delete from test where value = 20
    run.commit("T1", t1)
    run.commit("T2", t2)
    final = run.final()
    return run.result("PMP-write", "T1 adds 10 to every row while T2 deletes value = 20",
                      PREVENTED, run.commits["T2"] or final != {"1": 20, "2": 30}, final)


def p4(cluster=None) -> HermitageResult:
    """P4 lost update: two read-modify-writes of row 1; at most one commits."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    a = run.get("T1", t1, "1")
    b = run.get("T2", t2, "1")
    t1.set("1", COLUMN, a + 1, table=TABLE)
    t2.set("1", COLUMN, b + 1, table=TABLE)
    run.commit("T1", t1)
    run.commit("T2", t2)
    final = run.final()
    return run.result("P4", "T1 and T2 both increment row 1", PREVENTED,
                      all(run.commits.values()), final)


def g_single(cluster=None) -> HermitageResult:
    """G-single read skew: T1 reads row 1 before and row 2 after T2 moves 2 from row 2 to 1."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    a = run.get("T1", t1, "1")
    run.get("T2", t2, "1")
    run.get("T2", t2, "2")
    t2.set("1", COLUMN, 12, table=TABLE)
    t2.set("2", COLUMN, 18, table=TABLE)
    run.commit("T2", t2)
    b = run.get("T1", t1, "2")
    run.commit("T1", t1)
    final = run.final()
    return run.result("G-single", "T1 reads row 1, T2 updates both, T1 reads row 2",
                      PREVENTED, a + b != 30, final)


def g_single_dependencies(cluster=None) -> HermitageResult:
    """G-single with predicate reads: T1's second predicate read must not see T2's update."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    run.where("T1", t1, "value % 5 = 0", lambda v: v % 5 == 0)
    for row in run.where("T2", t2, "value = 10", lambda v: v == 10):
        t2.set(row, COLUMN, 12, table=TABLE)
    run.commit("T2", t2)
    later = run.where("T1", t1, "value % 3 = 0", lambda v: v % 3 == 0)
    run.commit("T1", t1)
    final = run.final()
    return run.result("G-single-dependencies", "T2 sets 10 to 12 between T1's predicate reads",
                      PREVENTED, bool(later), final)


def g_single_write_1(cluster=None) -> HermitageResult:
    """G-single, write variant 1: T1 deletes on a stale predicate after T2 committed; T1 aborts."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    run.get("T1", t1, "1")
    run.where("T2", t2, "true", lambda v: True)
    t2.set("1", COLUMN, 12, table=TABLE)
    t2.set("2", COLUMN, 18, table=TABLE)
    run.commit("T2", t2)
    for row in run.where("T1", t1, "value = 20", lambda v: v == 20):
        t1.delete(row, COLUMN, table=TABLE)
    run.commit("T1", t1)
    final = run.final()
    return run.result("G-single-write-1", "T2 commits 12/18, then T1 deletes where value = 20",
                      PREVENTED, run.commits["T1"] or final != {"1": 12, "2": 18}, final)


def g_single_write_2(cluster=None) -> HermitageResult:
    """G-single, write variant 2: T1 deletes row 2 while T2 moves value into it; one aborts."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    run.get("T1", t1, "1")
    run.where("T2", t2, "true", lambda v: True)
    t2.set("1", COLUMN, 12, table=TABLE)
    for row in run.where("T1", t1, "value = 20", lambda v: v == 20):
        t1.delete(row, COLUMN, table=TABLE)
    t2.set("2", COLUMN, 18, table=TABLE)
    run.commit("T1", t1)
    run.commit("T2", t2)
    final = run.final()
    return run.result("G-single-write-2", "T1 deletes value = 20 while T2 updates both rows",
                      PREVENTED, all(run.commits.values()) or final != {"1": 10}, final)


def g2_item(cluster=None) -> HermitageResult:
    """G2-item write skew: T1 and T2 read both rows and each update a different one."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    for name, txn in (("T1", t1), ("T2", t2)):
        run.get(name, txn, "1")
        run.get(name, txn, "2")
    t1.set("1", COLUMN, 11, table=TABLE)
    t2.set("2", COLUMN, 21, table=TABLE)
    run.commit("T1", t1)
    run.commit("T2", t2)
    final = run.final()
    return run.result("G2-item", "T1 and T2 read both rows, update different ones",
                      ALLOWED, all(run.commits.values()) and final == {"1": 11, "2": 21}, final)


def g2(cluster=None) -> HermitageResult:
    """G2 anti-dependency cycle over a predicate: both insert after an empty predicate read."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    run.where("T1", t1, "value % 3 = 0", lambda v: v % 3 == 0)
    run.where("T2", t2, "value % 3 = 0", lambda v: v % 3 == 0)
    t1.set("3", COLUMN, 30, table=TABLE)
    t2.set("4", COLUMN, 42, table=TABLE)
    run.commit("T1", t1)
    run.commit("T2", t2)
    final = run.final()
    return run.result("G2", "T1, T2 see no multiple of 3, then each inserts one",
                      ALLOWED, all(run.commits.values()), final)


def g2_two_edges(cluster=None) -> HermitageResult:
    """G2 with two anti-dependency edges and a read-only T3 (Fekete et al.'s example)."""
    run = _Run(cluster)
    t1, t2 = run.begin(), run.begin()
    run.where("T1", t1, "true", lambda v: True)
    t2.set("2", COLUMN, 25, table=TABLE)
    run.commit("T2", t2)
    t3 = run.begin()
    seen = run.where("T3", t3, "true", lambda v: True)
    run.commit("T3", t3)
    t1.set("1", COLUMN, 0, table=TABLE)
    run.commit("T1", t1)
    final = run.final()
    return run.result("G2-two-edges", "T2 commits, read-only T3 sees it, then T1 commits",
                      ALLOWED, run.commits["T1"] and seen == {"1": 10, "2": 25}, final)


SCENARIOS = (g0, g1a, g1b, g1c, otv, pmp, pmp_write, p4, g_single, g_single_dependencies,
             g_single_write_1, g_single_write_2, g2_item, g2, g2_two_edges)


def run_all(make_cluster: Optional[Callable] = None) -> HermitageTable:
    """Run every scenario, each on a fresh cluster from ``make_cluster()`` (default: in memory)."""
    return HermitageTable(s(make_cluster() if make_cluster else None) for s in SCENARIOS)
