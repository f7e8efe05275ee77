"""What TiKV changed, measured and stepped (notebook 09): scripts, steppers, cost tables.

Every function here runs the reference implementation with some protocol
variants (:mod:`percolator_ref.variants`) and reports what happened; none
knows how a variant works inside.

- :func:`commit_cost`: the row transactions and oracle timestamps of one
  commit, and how many of them come before the outcome is decided (when the
  client may answer its user);
- :func:`cost_table`: that for several configurations, as a DataFrame;
- :func:`contention` / :func:`contention_table`: notebook 01's six concurrent
  transfers among three accounts under a seeded scheduler: commits, aborts,
  waits;
- stepper scenarios: :func:`late_prewrite_stepper` (rollback records),
  :func:`hung_worker_stepper` (lock TTL), :func:`one_row_stepper` (1PC).
"""
from __future__ import annotations

import random
from functools import partial
from typing import Callable, Optional

import pandas as pd

from ..cluster import Cluster
from ..errors import ClientCrash, CommitOutcomeUnknown
from ..faults import StoreFailsAt
from ..interceptors import attach
from ..model import CommitPhase, TxStatus, lock_col
from ..services.clock import ManualClock
from ..session import Session
from ..step import Step
from ..variants import Variant
from ..viz.scenarios import figure4_setup, transfer
from ..viz.stepper import Stepper

COST_COLUMNS = ["configuration", "cells", "rows", "row transactions", "timestamps",
                "round trips", "decided after (round trips)",
                "locks left by a crash before the decision"]


class CountingTimestamps(Variant):
    """A variant that only counts the timestamps the cluster's source hands out."""

    name = "counting-timestamps"

    class Source:
        def __init__(self, inner):
            self.inner, self.handed_out = inner, 0

        def get_timestamp(self) -> int:
            self.handed_out += 1
            return self.inner.get_timestamp()

        def peek(self) -> int:
            return self.inner.peek()

        def __getattr__(self, name):            # anything else the source offers
            return getattr(self.inner, name)

    def timestamps(self, cluster, oracle):
        return self.Source(oracle)


class CommitPath:
    """Interceptor on a committing transaction's session: its row transactions in order,
    and how many (and how many timestamps) came before its outcome was decided."""

    def __init__(self, txn, source):
        self.txn, self.source = txn, source
        self.steps: list = []
        self.at_start = source.handed_out
        self.decided: Optional[tuple] = None

    def before(self, rt) -> None:
        if self.decided is None and self.txn.phase == CommitPhase.SECONDARIES:
            self.decided = (len(self.steps), self.source.handed_out - self.at_start)

    def after(self, rt) -> None:
        self.steps.append(str(rt.step))

    def decision(self) -> tuple:
        """(row transactions, timestamps) before the outcome was decided."""
        return self.decided or (len(self.steps), self.source.handed_out - self.at_start)


def make(variants: Callable = list, first_timestamp: int = 1, lock_ttl: float = 1.0) -> Cluster:
    """A deterministic cluster with ``variants()`` and a timestamp counter (last)."""
    return Cluster(first_timestamp=first_timestamp, clock=ManualClock(), lock_ttl=lock_ttl,
                   variants=[*variants(), CountingTimestamps()])


def write_cells(cluster, cells, crash_after=None):
    """One transaction writing 1 to each ``(row, column)``; returns (txn, outcome, path)."""
    t = cluster.begin()
    for row, column in cells:
        t.set(row, column, 1)
    path = CommitPath(t, cluster.oracle)
    with attach(t.session, path):
        try:
            outcome = t.commit(crash_after=crash_after)
        except Exception as crash:               # ClientCrash: the client died there
            outcome = type(crash).__name__
    return t, outcome, path


def commit_cost(variants: Callable, cells) -> dict:
    """The cost of committing writes to ``cells`` (``[(row, column), ...]``) with ``variants()``.

    Row transactions and timestamps of the commit (the start timestamp not
    counted), how many round trips (both kinds) came before the outcome was
    decided, and how many locks a crash right before that point leaves.
    """
    cluster = make(variants)
    t, outcome, path = write_cells(cluster, cells)
    if outcome is not True:
        raise RuntimeError(f"the measured commit did not commit: {outcome}")
    rts, stamps = path.decision()
    locks = 0
    if rts > 1:
        crashed = make(variants)
        write_cells(crashed, cells, crash_after=rts - 1)
        locks = sum(1 for rows in crashed.bigtable.dump().values() for cols in rows.values()
                    for column, versions in cols.items() if column.endswith(":lock")
                    for _ in versions)
    stamps_total = cluster.oracle.handed_out - path.at_start
    return {"cells": len(cells), "rows": len({row for row, _ in cells}),
            "row transactions": len(path.steps), "timestamps": stamps_total,
            "round trips": len(path.steps) + stamps_total,
            "decided after (round trips)": rts + stamps,
            "locks left by a crash before the decision": locks}


def cost_table(configurations: dict, cells) -> pd.DataFrame:
    """:func:`commit_cost` of each ``{name: variants factory}`` for the same ``cells``."""
    rows = [{"configuration": name, **commit_cost(variants, cells)}
            for name, variants in configurations.items()]
    return pd.DataFrame(rows, columns=COST_COLUMNS)


# -- contention: notebook 01's six transfers -----------------------------------------------
def three_accounts(cluster) -> None:
    t = cluster.begin()
    for who in ("A", "B", "C"):
        t.set(who, "bal", 100)
    assert t.commit()


def six_transfers(seed: int = 7, transfer_fn: Callable = transfer) -> dict:
    """Notebook 01's scripts: six transfers among A, B, C (amounts drawn from ``seed``)."""
    rng = random.Random(seed)
    return {f"t{i}": partial(transfer_fn, src=s, dst=d, amount=rng.randint(1, 20))
            for i, (s, d) in enumerate(rng.sample("ABC", 2) for _ in range(6))}


def contention(variants: Callable = list, seed: int = 7, transfer_fn: Callable = transfer,
               max_moves: int = 5000) -> dict:
    """Run :func:`six_transfers` under a scheduler seeded by ``seed`` (as notebook 01 does).

    Returns the stepper and counts: committed, aborted, the row transactions
    that were a wait (a read that met a lock), and all row transactions.
    """
    rng = random.Random(seed)
    scripts = six_transfers(seed, transfer_fn)
    s = Stepper(scripts, setup=three_accounts, cleaner=None,
                make_cluster=lambda: make(variants, lock_ttl=10.0))
    for _ in range(max_moves):
        if s.finished:
            break
        s.step(rng.choice(s.runnable))
    else:
        raise RuntimeError(f"six transfers did not finish in {max_moves} moves")
    results = [r.result for r in s.runners]
    events = [e for f in s.frames for e in f.events]
    return {"stepper": s, "committed": results.count(True),
            "aborted": len(results) - results.count(True), "deadlocks": results.count("deadlock"),
            "waits": sum(1 for e in events if "wait" in e.note),
            "row transactions": len(events)}


def contention_table(configurations: dict, seed: int = 7) -> pd.DataFrame:
    """:func:`contention` for each ``{name: (variants factory, transfer function)}``."""
    rows = []
    for name, (variants, transfer_fn) in configurations.items():
        found = contention(variants, seed, transfer_fn)
        rows.append({"configuration": name, "committed": found["committed"],
                     "aborted": found["aborted"], "of them deadlocks": found["deadlocks"],
                     "abort rate": found["aborted"] / (found["committed"] + found["aborted"]),
                     "row transactions that waited": found["waits"],
                     "row transactions": found["row transactions"]})
    return pd.DataFrame(rows)


# -- stepper scenarios --------------------------------------------------------------------
def late_prewrite(cluster) -> str:
    """A writer whose retried prewrite of its primary arrives after a cleaner rolled it back.

    Prewrites Bob (primary) and Joe; then (paused past its TTL meanwhile) its
    duplicate prewrite of Bob arrives, and it goes on to its commit point and its
    secondary if it still can. Each line is one named step of Figure 6 (one row
    transaction); a crash (the stepper's) closes it as crashed. A refused prewrite
    aborts it as Figure 6's client aborts: it erases the locks it still holds
    (``roll_back_own``), so no run ends with its locks left and nobody to clean them (as
    when the reader crashed and the duplicate met the writer's own lock). Where a
    cleaner already erased them, nothing is left to erase and no step is added."""
    t = cluster.begin()
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    bob, joe = t.writes.values()
    try:
        if not t.prewrite(bob, bob.cell):
            return finish(t, "aborted")
        if not t.prewrite(joe, bob.cell):
            t.roll_back_own([bob])
            return finish(t, "aborted")
        if not t.prewrite(bob, bob.cell):            # the duplicate, delivered late
            held = [m for m in (bob, joe) if _holds_lock(cluster, t, m)]
            if held:
                t.roll_back_own(held)
            return finish(t, "late prewrite refused")
        t.commit_ts = t.commit_timestamp()
        if not t.commit_primary(bob):
            return finish(t, "commit refused")
        t.commit_secondary(joe)
    except ClientCrash:
        t.close(TxStatus.CRASHED)
        raise
    return finish(t, "committed")


def _holds_lock(cluster, t, m) -> bool:
    """Whether ``t``'s lock on ``m``'s cell is still there (what the refusal of a prewrite
    tells its client: the lock it met; read here off the table, not a row transaction)."""
    return any(ts == t.start_ts for ts, _ in
               cluster.bigtable.versions(m.cell.table, m.cell.row, lock_col(m.cell.column)))


def finish(t, outcome: str) -> str:
    """Close a transaction driven step by step (its history record gets the outcome)."""
    t.close(TxStatus.COMMITTED if outcome == "committed" else TxStatus.ABORTED)
    return outcome


def read_both(cluster) -> tuple:
    """A reader: Joe's balance, then Bob's (it meets the writer's locks)."""
    t = cluster.begin()
    joe = t.get("Joe", "bal")
    bob = t.get("Bob", "bal")
    t.commit()
    return bob, joe


def late_prewrite_stepper(variants: Callable = list) -> Stepper:
    """Rollback records' scenario: the late writer and a reader, Figure 4's accounts."""
    return Stepper({"writer": late_prewrite, "reader": read_both}, setup=figure4_setup,
                   cleaner=None, make_cluster=lambda: make(variants, first_timestamp=5))


def drive_late_prewrite(s: Stepper) -> Stepper:
    """The schedule that shows it: the writer prewrites both cells; the reader runs to its
    end (waiting, then cleaning up); the writer's late prewrite and, if it can, its commit
    point; then the writer crashes before committing its secondary."""
    writer, reader = s.runners[0], s.runners[1]
    s.step(writer.name)
    s.step(writer.name)
    while reader.runnable:
        s.step(reader.name)
    for _ in range(2):                           # the late prewrite, the commit point
        if writer.runnable:
            s.step(writer.name)
    if writer.runnable:
        s.crash(writer.name)
    return s


class HeartbeatsOf:
    """Interceptor: before each row transaction, ``client``'s token heartbeats (its worker's
    other threads are busy), and the reader gives up past ``deadline`` on the clock."""

    def __init__(self, cluster, client: str, deadline: float):
        self.cluster, self.client, self.deadline = cluster, client, deadline

    def before(self, rt) -> None:
        self.cluster.lockservice.heartbeat(self.client)
        if self.cluster.clock.now() > self.deadline:
            raise TimeoutError(f"still blocked at clock {self.cluster.clock.now():g} s")


def prewritten(cluster, client: str = "W"):
    """Worker ``client``'s transaction (Bob -> Joe, $7) after prewriting both cells."""
    cluster.lockservice.register(client)
    t = cluster.begin(client=client)
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    bob, joe = t.writes.values()
    if not (t.prewrite(bob, bob.cell) and t.prewrite(joe, bob.cell)):
        raise RuntimeError(f"{client}'s prewrites met a conflict")
    return t


def hung_worker(cluster) -> str:
    """Worker W's transaction prewrites Bob and Joe, then hangs: it never commits."""
    prewritten(cluster)
    return "hung after prewrite"


def patient_reader(cluster, deadline: float = 8.0):
    """Reads Joe while worker W keeps working; gives up at ``deadline`` seconds."""
    t = cluster.begin()
    with attach(t.session, HeartbeatsOf(cluster, "W", deadline)):
        try:
            joe = t.get("Joe", "bal")
        except TimeoutError as blocked:
            t.abandon()
            return str(blocked)
    t.commit()
    return joe


def hung_worker_stepper(variants: Callable = list) -> Stepper:
    """Lock TTL's scenario: a hung transaction of a live worker, and a reader."""
    return Stepper({"worker": hung_worker, "reader": patient_reader}, setup=figure4_setup,
                   cleaner=None, make_cluster=lambda: make(variants, first_timestamp=5))


def one_row_transfer(cluster, amount: int = 7) -> bool:
    """Move ``amount`` from column Bob to column Joe of the one row ``acct``."""
    t = cluster.begin()
    bob, joe = t.get("acct", "Bob"), t.get("acct", "Joe")
    t.set("acct", "Bob", bob - amount)
    t.set("acct", "Joe", joe + amount)
    return t.commit()


def one_row_setup(cluster) -> None:
    t = cluster.begin()
    t.set("acct", "Bob", 10)
    t.set("acct", "Joe", 2)
    assert t.commit()


def one_row_stepper(variants: Callable = list) -> Stepper:
    """1PC's scenario: a transfer between two cells of one row."""
    return Stepper({"transfer": one_row_transfer}, setup=one_row_setup, cleaner=None,
                   make_cluster=lambda: make(variants, first_timestamp=5))



def heartbeat_demo(variants: Callable, beats: int = 4, every: float = 0.8,
                   silence: float = 1.5) -> pd.DataFrame:
    """A transaction prewrites Bob and Joe, then heartbeats ``beats`` times, ``every``
    seconds apart, then falls silent for ``silence`` seconds; after each heartbeat (and
    after the silence) a reader checks its status at the primary (``check_txn_status``).
    One row per check: the clock, the primary lock's ttl and expiry before the check, and
    the verdict."""
    cluster = make(variants)
    figure4_setup(cluster)
    t = prewritten(cluster)
    reader = Session(cluster, "reader")
    rows = []
    for event in [f"heartbeat {i + 1}" for i in range(beats)] + ["silent"]:
        cluster.clock.advance(every if event != "silent" else silence)
        if event != "silent":
            assert t.heart_beat()
        lock = primary_lock(cluster)
        status = reader.cleanup.check_txn_status(next(iter(t.writes)), t.start_ts, t.client)
        rows.append({"clock (s)": cluster.clock.now(), "event": event,
                     "primary lock ttl (s)": lock.ttl, "alive until (s)": lock.wall + lock.ttl,
                     "reader's check": "alive: wait" if status.alive else "expired: rolled back",
                     "primary lock after": primary_lock(cluster) is not None})
    return pd.DataFrame(rows)


def primary_lock(cluster, row: str = "Bob", column: str = "bal"):
    """The lock on ``row.column`` (None if there is none)."""
    versions = cluster.bigtable.versions("default", row, f"{column}:lock")
    return versions[0][1] if versions else None


def write_both(cluster) -> bool:
    """A writer: Bob and Joe both to 0 (no reads, so its commit starts at once)."""
    t = cluster.begin()
    t.set("Bob", "bal", 0)
    t.set("Joe", "bal", 0)
    return t.commit()


def async_stepper(variants: Callable) -> Stepper:
    """Async commit's scenario: the writer's commit has taken its timestamps when the
    reader begins; the reader reads Bob before the writer's prewrites, Joe after its commit."""
    return Stepper({"writer": write_both, "reader": read_both_bob_first}, setup=figure4_setup,
                   cleaner=None, make_cluster=lambda: make(variants, first_timestamp=5))


def read_both_bob_first(cluster) -> tuple:
    """A reader: Bob's balance, then Joe's."""
    t = cluster.begin()
    bob = t.get("Bob", "bal")
    joe = t.get("Joe", "bal")
    t.commit()
    return bob, joe


def drive_async(s: Stepper) -> Stepper:
    """Reader reads Bob; the writer runs to its end; the reader reads Joe and ends."""
    writer, reader = s.runners
    s.step(reader.name)
    while writer.runnable:
        s.step(writer.name)
    while reader.runnable:
        s.step(reader.name)
    return s


def flaky_write_both(cluster) -> str:
    """A writer of Bob and Joe whose store loses the reply to its last prewrite (Joe's) and
    then fails its rollback too: its answer, ``"committed"``, ``"aborted"`` or
    ``"unknown"`` (:class:`~percolator_ref.errors.CommitOutcomeUnknown`)."""
    t = cluster.begin()
    t.set("Bob", "bal", 0)
    t.set("Joe", "bal", 0)
    with attach(cluster.bigtable, StoreFailsAt(Step.PREWRITE_SECONDARY, applied=True),
                StoreFailsAt(Step.ABORT_ROLLBACK, times=2)):
        try:
            return "committed" if t.commit() else "aborted"
        except CommitOutcomeUnknown:
            return "unknown"


def lost_reply_stepper(variants: Callable) -> Stepper:
    """Async commit's lost reply: the flaky writer, then a reader of both cells."""
    return Stepper({"writer": flaky_write_both, "reader": read_both}, setup=figure4_setup,
                   cleaner=None, make_cluster=lambda: make(variants, first_timestamp=5))


def drive_in_turn(s: Stepper) -> Stepper:
    """Each script to its end, in order (the writer first, then the reader)."""
    for runner in s.runners:
        while runner.runnable:
            s.step(runner.name)
    return s


# -- pessimistic locks ------------------------------------------------------------------------
def pessimistic_transfer(cluster, src: str = "Bob", dst: str = "Joe", amount: int = 7,
                         ordered: bool = False):
    """:func:`~percolator_ref.viz.scenarios.transfer` with both reads ``get_for_update``
    (needs the pessimistic-locks variant): True (committed), False (a conflict) or
    ``"deadlock"`` (aborted by the deadlock detector). ``ordered``: lock the two
    accounts in name order (every transaction in one global order: no cycle can form)."""
    from ..variants.pessimistic import Deadlock
    t = cluster.begin()
    first, second = sorted((src, dst)) if ordered else (src, dst)
    try:
        found = {first: t.get_for_update(first, "bal"), second: t.get_for_update(second, "bal")}
    except Deadlock:
        return "deadlock"
    a, b = found[src], found[dst]
    t.set(src, "bal", a - amount)
    t.set(dst, "bal", b + amount)
    return t.commit()


def crossing_transfers_stepper(variants: Callable) -> Stepper:
    """Two pessimistic transfers that lock in opposite orders: Bob -> Joe and Joe -> Bob."""
    return Stepper({"bob_to_joe": pessimistic_transfer,
                    "joe_to_bob": partial(pessimistic_transfer, src="Joe", dst="Bob", amount=1)},
                   setup=figure4_setup, cleaner=None,
                   make_cluster=lambda: make(variants, first_timestamp=5, lock_ttl=10.0))


def drive_crossing(s: Stepper, max_moves: int = 60) -> Stepper:
    """Each locks its first account; then they alternate until both end (or ``max_moves``)."""
    first, second = s.runners
    s.step(first.name)
    s.step(second.name)
    for _ in range(max_moves):
        movers = [r for r in (first, second) if r.runnable]
        if not movers:
            break
        for runner in movers:
            s.step(runner.name)
    return s


# -- a reader pushing min_commit_ts (lock TTL, large transactions) ---------------------------
def pushing_reader_stepper(variants: Callable) -> Stepper:
    """A transfer Bob -> Joe and a reader of both accounts, a TTL far longer than the scene
    (10 s): LockTTL's scenario for a reader that meets a live transaction's locks."""
    return Stepper({"writer": transfer, "reader": read_both}, setup=figure4_setup,
                   cleaner=None, make_cluster=lambda: make(variants, first_timestamp=5,
                                                           lock_ttl=10.0))


def drive_pushing_reader(s: Stepper, reader_moves: int = 6) -> Stepper:
    """The writer reads and prewrites both accounts (it has taken its commit_ts and stands
    before its commit point); the reader moves at most ``reader_moves`` times; then the
    writer runs to its end, and the reader too."""
    writer, reader = s.runners
    for _ in range(4):                              # get Bob, get Joe, prewrite both
        s.step(writer.name)
    for _ in range(reader_moves):
        if reader.runnable:
            s.step(reader.name)
    for runner in (writer, reader):
        while runner.runnable:
            s.step(runner.name)
    return s
