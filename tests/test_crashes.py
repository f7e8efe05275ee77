"""Crashes: every crash point of a multi-cell commit, and an exhaustive search over
interleavings of two small transactions' row transactions with crash points.

The search drives both commits in threads through a ``Gate`` interceptor with a
turn-taking scheduler: exactly one row transaction runs at a time, and at each
point where both clients are waiting, every choice is explored (depth-first,
replaying the prefix of choices on a fresh cluster). Each transaction is also
given every ``crash_after`` in 1..N (or none); runs where a requested crash
did not fire duplicate a crash-free run and are not counted.
"""
import itertools
import threading
from math import comb

import pytest

from percolator_ref import ClientCrash
from percolator_ref.interceptors import Gate, attach
from percolator_ref.workloads.bank import check_invariants

from helpers import all_locks, cell_state, fresh_view

# ---------------------------------------------------------------------------
# Every crash point of a three-cell commit
# ---------------------------------------------------------------------------

CELLS = ["a", "b", "c"]          # rows; column "v"; "a" is the primary
STEPS = ["prewrite-primary", "prewrite-secondary", "prewrite-secondary",
         "commit-primary", "commit-secondary", "commit-secondary"]


def three_cell_cluster(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    for row in CELLS:
        t.set(row, "v", "old")
    assert t.commit() is True                 # start 1, commit 2
    return cluster


@pytest.mark.parametrize("crash_after", range(1, len(STEPS) + 1))
def test_crash_after_each_row_transaction_of_a_three_cell_commit(make_cluster, crash_after):
    cluster = three_cell_cluster(make_cluster)
    t = cluster.begin()                       # start 3
    for row in CELLS:
        t.set(row, "v", "new")
    with cluster.tracer.record() as events:
        with pytest.raises(ClientCrash) as crash:
            t.commit(crash_after=crash_after)
    assert crash.value.row_transactions == crash_after
    assert [e.step for e in events] == STEPS[:crash_after]
    committed = crash_after >= 4              # the commit point is the 4th row transaction
    assert (t.commit_ts is not None) == committed
    # the store is exactly as the crashed client left it
    locked = [row for row in CELLS if cell_state(cluster, row, "v")["lock"]]
    assert locked == (CELLS[:crash_after] if not committed else CELLS[crash_after - 3:])
    # the next reader sees all or nothing, and leaves no lock behind
    expected = "new" if committed else "old"
    assert fresh_view(cluster) == {(row, "v"): expected for row in CELLS}
    assert all_locks(cluster) == []
    for row in CELLS:
        state = cell_state(cluster, row, "v")
        if committed:
            assert state == {"data": [(3, "new"), (1, "old")], "lock": [],
                             "write": [(t.commit_ts, "data @ 3"), (2, "data @ 1")]}
        else:
            assert state == {"data": [(1, "old")], "lock": [], "write": [(2, "data @ 1")]}
    assert cluster.check_history().ok
    assert check_invariants(cluster) == []


@pytest.mark.parametrize("crash_after", range(1, len(STEPS) + 1))
@pytest.mark.parametrize("reader_reads", CELLS)
def test_a_reader_of_any_single_cell_sees_the_committed_outcome(make_cluster, crash_after,
                                                                reader_reads):
    cluster = three_cell_cluster(make_cluster)
    t = cluster.begin()
    for row in CELLS:
        t.set(row, "v", "new")
    with pytest.raises(ClientCrash):
        t.commit(crash_after=crash_after)
    was_locked = bool(cell_state(cluster, reader_reads, "v")["lock"])
    r = cluster.begin()
    assert r.get(reader_reads, "v") == ("new" if crash_after >= 4 else "old")
    assert not cell_state(cluster, reader_reads, "v")["lock"]
    if was_locked:   # meeting the lock settled the transaction's fate at the primary
        assert not cell_state(cluster, "a", "v")["lock"]


# ---------------------------------------------------------------------------
# Exhaustive interleavings of two transactions' row transactions, with crashes
# ---------------------------------------------------------------------------

class TurnScheduler:
    """Grant one row transaction at a time; choose among waiting clients by ``prefix``.

    ``decisions`` records ``(choice, options)`` at each point where more than
    one client was waiting; ``trace`` the clients granted, in order.
    """

    def __init__(self, clients, prefix):
        self.clients, self.prefix = set(clients), list(prefix)
        self.cond = threading.Condition()
        self.waiting, self.running = set(), set(clients)
        self.granted = None
        self.decisions, self.trace = [], []

    def gate(self, client, table, row, step):
        if client not in self.clients:
            return
        with self.cond:
            self.running.discard(client)
            self.waiting.add(client)
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.granted == client, timeout=10):
                raise AssertionError(f"{client} never got a turn")
            self.granted = None

    def finished(self, client):
        with self.cond:
            self.running.discard(client)
            self.cond.notify_all()

    def drive(self):
        while True:
            with self.cond:
                if not self.cond.wait_for(lambda: not self.running and self.granted is None,
                                          timeout=10):
                    raise AssertionError("scheduler stalled")
                if not self.waiting:
                    return
                ready = sorted(self.waiting)
                pick = 0
                if len(ready) > 1:
                    depth = len(self.decisions)
                    pick = self.prefix[depth] if depth < len(self.prefix) else 0
                    self.decisions.append((pick, len(ready)))
                client = ready[pick]
                self.trace.append(client)
                self.waiting.discard(client)
                self.running.add(client)
                self.granted = client
                self.cond.notify_all()


def next_prefix(decisions):
    """The next unexplored branch, depth first; None when all are done."""
    for depth in range(len(decisions) - 1, -1, -1):
        pick, options = decisions[depth]
        if pick + 1 < options:
            return [p for p, _ in decisions[:depth]] + [pick + 1]
    return None


def run_schedule(make_cluster, writes, crashes, prefix):
    """One schedule on a fresh cluster; returns (scheduler, transactions, outcomes, cluster)."""
    cluster = make_cluster(first_timestamp=1)
    init = cluster.begin()
    for row in sorted({r for rows in writes for r in rows}):
        init.set(row, "v", "init")
    assert init.commit() is True
    txns = []
    for i, rows in enumerate(writes):
        t = cluster.begin()
        for row in rows:
            t.set(row, "v", f"T{i + 1}")
        txns.append(t)
    sched = TurnScheduler([t.client for t in txns], prefix)
    outcomes = [None] * len(txns)

    def body(i, t):
        try:
            outcomes[i] = t.commit(crash_after=crashes[i])
        except ClientCrash:
            outcomes[i] = "crashed"
        finally:
            sched.finished(t.client)

    gate = attach(cluster.bigtable, Gate(sched.gate))
    threads = [threading.Thread(target=body, args=(i, t), daemon=True) for i, t in enumerate(txns)]
    for th in threads:
        th.start()
    sched.drive()
    for th in threads:
        th.join(10)
    gate.detach()
    return sched, txns, outcomes, cluster


def check_schedule(cluster, writes, txns, outcomes):
    """Invariants after one schedule: locks, all-or-nothing, overlap, checker."""
    for table, row, column, _ in all_locks(cluster):
        assert len(cluster.bigtable.versions(table, row, column)) == 1   # one lock per cell
    report = cluster.check_history()           # settles crashed transactions by their primary
    assert report.ok, report
    status = {r.client: r for r in cluster.history.records}
    committed = [status[t.client].committed for t in txns]
    if set(writes[0]) & set(writes[1]):
        assert not all(committed), "two concurrent writers of one cell both committed"
    expected = {}
    for (rows, ok, t) in sorted(zip(writes, committed, txns),
                                key=lambda x: status[x[2].client].commit_ts or 0):
        for row in rows:
            expected.setdefault((row, "v"), "init")
            if ok:
                expected[(row, "v")] = f"T{txns.index(t) + 1}"
    assert fresh_view(cluster) == expected      # all or nothing, per transaction
    assert all_locks(cluster) == []             # no lock survives the next reader
    assert check_invariants(cluster) == []
    for t, outcome, ok in zip(txns, outcomes, committed):
        if outcome is True:
            assert ok
        if outcome is False:
            assert not ok


def explore(make_cluster, writes, max_crash):
    """Every crash configuration x every interleaving; returns (schedules, distinct traces)."""
    count, seen = 0, set()
    options = [None] + list(range(1, max_crash + 1))
    for crashes in itertools.product(options, repeat=len(writes)):
        prefix = []
        while prefix is not None:
            sched, txns, outcomes, cluster = run_schedule(make_cluster, writes, crashes, prefix)
            prefix = next_prefix(sched.decisions)
            fired = all(c is None or o == "crashed" for c, o in zip(crashes, outcomes))
            if not fired:
                continue                        # same as a run without that crash
            check_schedule(cluster, writes, txns, outcomes)
            count += 1
            seen.add((tuple(sched.trace), tuple(outcomes)))
    return count, seen


def disjoint_count(steps, max_crash):
    """Closed form for two writers of disjoint cells: no conflicts, fixed step counts.

    A transaction crashing after k row transactions runs k of them; a crash-free
    one runs all ``steps``; two threads of a and b steps interleave in C(a+b, a) ways.
    """
    lengths = list(range(1, max_crash + 1)) + [steps]
    return sum(comb(a + b, a) for a in lengths for b in lengths)


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_exhaustive_interleavings_of_disjoint_writers(make_cluster):
    writes = (["a", "b"], ["c", "d"])          # 4 row transactions each
    count, seen = explore(make_cluster, writes, max_crash=4)
    print(f"\nexhaustive, disjoint writers: {count} schedules explored")
    assert count == disjoint_count(steps=4, max_crash=4) == len(seen)


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
@pytest.mark.parametrize("writes", [(["x", "y"], ["y", "x"]), (["x", "y"], ["y", "z"]),
                                    (["x", "y"], ["z", "x"])],
                         ids=["crossed-primaries", "shared-secondary-primary", "shared-primary"])
def test_exhaustive_interleavings_of_conflicting_writers(make_cluster, writes):
    count, seen = explore(make_cluster, writes, max_crash=5)
    print(f"\nexhaustive, writers {writes}: {count} schedules explored")
    assert count == len(seen)                   # every counted schedule is a distinct run
    outcomes = {o for _, o in seen}
    assert (True, False) in outcomes and (False, True) in outcomes
    assert any("crashed" in o for o in outcomes)
