"""Every accepted combination of protocol variants, under crashes, store faults and late messages.

For one combination of the kit's variants (:func:`~percolator_ref.variants.accepted_combinations`)
on one store, :func:`audit_combination` runs, each schedule on a fresh cluster:

- **crash schedules**: a writer W (three rows, or two cells of one row: the
  one-phase-commit case) dies after each row transaction of its commit in turn
  (every step any variant adds counts: async commit's prewrites, a heartbeat,
  an abort's rollback, a pessimistic release, ``one-pc``), and after each named
  crash point;
- **store faults**: :class:`FailNth` makes the store fail at the n-th row
  transaction of each step seen in the crash-free run (W's commit, the readers'
  cleanup steps, the variants' steps), before it applies (the request lost) or
  after (the reply lost);
- **late duplicates**: after W's commit has ended and its outcome is decided,
  every prewrite of W (or its one-phase commit) arrives again;
- **dying readers**: a reader that cleans up W's locks dies after each of its
  row transactions in turn, and the next reader finishes the job;
- **a reader inside the commit**: after each row transaction of W's commit, a
  reader runs to its end (it waits for W until W's TTL passes, then cleans W
  up) and W goes on, finding its locks gone or not;
- then a second writer V writes over W's cells, and a last reader settles the store.

Each schedule is judged by the snapshot-isolation checker
(:meth:`~percolator_ref.Cluster.check_history`), the store audit
(:func:`~percolator_ref.workloads.bank.check_invariants`: one lock per cell and
none left, write intervals, every committed transaction visible on every cell,
no aborted one) and the clients' answers against the final store: a
transaction answered committed (``commit()`` True, or ``outcome()`` True) whose
write is missing is *lost*; one answered aborted whose write is visible is a
*G1a*; one visible on some of its cells only is a *partial commit*. Rollback
records are not commits (``check_invariants`` and :func:`visible_cells` skip
them) and locks of every kind (async commit's, pessimistic) count as locks.

:func:`bank_with_faults` is the bank workload (two concurrent transfers per
round, a reader summing every account) with random crashes, random one-shot
store faults and a tiny lock TTL, judged the same way.

``python -m percolator_ref.workloads.variant_audit`` runs every accepted
combination (``--redis URL`` on a Redis server too) and prints the figures.
"""
from __future__ import annotations

import argparse
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..cluster import Cluster
from ..errors import ClientCrash, CommitOutcomeUnknown, StoreUnavailable
from ..interceptors import attach
from ..model import Cell, WriteKind, split_column, write_col
from ..services.clock import ManualClock
from ..step import CRASH_POINTS
from ..variants import accepted_combinations
from ..variants.async_commit import AsyncCommit
from ..variants.lock_ttl import LockTTL
from ..variants.one_pc import OnePC
from ..variants.pessimistic import PessimisticLocks, is_pessimistic
from ..variants.rollback_records import RollbackRecords
from ..variants.truetime import SpannerTimestamps
from .bank import check_invariants

KIT = {"pessimistic-locks": PessimisticLocks, "one-pc": OnePC, "async-commit": AsyncCommit,
       "lock-ttl": LockTTL, "rollback-records": RollbackRecords,
       "truetime": lambda: SpannerTimestamps(epsilon_us=1_000, nodes=2)}
TTL = 1.0
SHAPES = {"rows": (("a", "v"), ("b", "v"), ("c", "v")),     # three rows: two-phase / async
          "row": (("r", "x"), ("r", "y"))}                  # one row: one-phase commit
CELLS = tuple(Cell("default", row, column) for shape in SHAPES.values() for row, column in shape)
RETRIES = 8


def kit_variants(combination) -> list:
    """Fresh variant objects for a combination of family names."""
    return [KIT[family]() for family in combination]


def label(combination) -> str:
    return "+".join(combination) or "paper"


@dataclass
class Figures:
    """What the schedules of one combination did and found."""
    schedules: int = 0
    transactions: int = 0
    crashes: int = 0
    faults: int = 0
    late_duplicates: int = 0
    reader_deaths: int = 0
    anomalies: int = 0
    lost: int = 0
    partial: int = 0
    g1a: int = 0
    problems: list = field(default_factory=list)     # the first few, described

    def add(self, other: "Figures") -> None:
        for name in ("schedules", "transactions", "crashes", "faults", "late_duplicates",
                     "reader_deaths", "anomalies", "lost", "partial", "g1a"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems[: max(0, 5 - len(self.problems))])

    @property
    def ok(self) -> bool:
        return not (self.anomalies or self.lost or self.partial or self.g1a or self.problems)

    def row(self) -> dict:
        return {name: getattr(self, name) for name in (
            "schedules", "transactions", "crashes", "faults", "late_duplicates",
            "reader_deaths", "anomalies", "lost", "partial", "g1a")}


class FailNth:
    """The store fails (``StoreUnavailable``) at the ``n``-th row transaction of ``step``
    from now on, before it applies or after (``applied``); once."""

    def __init__(self, step: str, n: int, applied: bool):
        self.step, self.n, self.applied = step, n, applied
        self.seen = 0
        self.fired = False

    def check(self, rt, applied: bool) -> None:
        if rt.step != self.step or applied != self.applied or self.fired:
            return
        self.seen += 1
        if self.seen == self.n:
            self.fired = True
            raise StoreUnavailable(f"injected: {rt.step} #{self.n} of {rt.row} "
                                   f"{'reply lost' if applied else 'request lost'}")

    def before(self, rt) -> None:
        self.check(rt, False)

    def after(self, rt) -> None:
        self.check(rt, True)


class Recorder:
    """Every row transaction's step, in order (the crash-free run's, to plan faults)."""

    def __init__(self):
        self.steps: list = []

    def after(self, rt) -> None:
        self.steps.append(str(rt.step))


class ReaderAfter:
    """Inside W's commit: right after W's ``n``-th row transaction, a reader of every cell
    runs to its end (it waits for W, alive, until W's TTL passes, then cleans W up), and W
    goes on."""

    def __init__(self, schedule, n: int):
        self.schedule, self.n, self.count = schedule, n, 0

    def after(self, rt) -> None:
        self.count += 1
        if self.count == self.n:
            self.schedule.reader()


class DieAfter:
    """A reader's client dies right after its ``n``-th row transaction."""

    def __init__(self, session, n: int):
        self.session, self.n, self.count = session, n, 0

    def after(self, rt) -> None:
        self.count += 1
        if self.count == self.n:
            self.session.crash()
            raise ClientCrash("reader", self.count)


def retry(action: Callable, attempts: int = RETRIES):
    """``action()``, again after a StoreUnavailable (an injected fault fails once)."""
    for attempt in range(attempts):
        try:
            return action()
        except StoreUnavailable:
            if attempt == attempts - 1:
                raise


def visible_cells(cluster, txn) -> list:
    """The cells of ``txn`` holding a committed (not rollback) write record of it."""
    found = []
    for cell in txn.writes:
        records = cluster.bigtable.versions(cell.table, cell.row, write_col(cell.column))
        if any(w.start_ts == txn.start_ts and w.kind is not WriteKind.ROLLBACK
               for _, w in records):
            found.append(cell)
    return found


class Schedule:
    """One schedule on a fresh cluster (see the module doc)."""

    def __init__(self, make: Callable, combination: tuple, shape: str,
                 factory: Callable = kit_variants):
        self.cluster = make(factory(combination))
        self.combination, self.shape = combination, shape
        self.pessimistic = "pessimistic-locks" in combination
        self.figures = Figures(schedules=1)
        self.answers: dict = {}          # txn -> True / False / None (ask outcome() later)
        setup = self.cluster.begin()
        for cell in CELLS:
            setup.set(cell.row, cell.column, 0)
        assert setup.commit(), "setup"

    # -- the clients ---------------------------------------------------------------------
    def begin_writer(self, cells, value):
        t = self.cluster.begin()
        for row, column in cells:
            read = t.get_for_update if self.pessimistic else t.get
            read(row, column)
        for row, column in cells:
            t.set(row, column, value)
        self.figures.transactions += 1
        return t

    def commit(self, txn, crash_after=None) -> None:
        """Commit; record the answer (None: crashed or unknown, ``outcome()`` decides)."""
        try:
            self.answers[txn] = txn.commit(crash_after=crash_after)
        except ClientCrash:
            self.answers[txn] = None
            self.figures.crashes += 1
        except CommitOutcomeUnknown:
            self.answers[txn] = None

    def decide(self, txn) -> None:
        """Ask ``outcome()`` now, if the answer is still open."""
        if self.answers.get(txn) is None:
            self.answers[txn] = retry(txn.outcome)

    def replay_prewrites(self, txn) -> None:
        """Every request of ``txn``'s commit that carries its writes arrives again, late."""
        mutations = list(txn.writes.values())
        if "one-pc" in self.combination and len({m.cell[:2] for m in mutations}) == 1:
            requests = [lambda: txn.one_phase_commit(mutations)]    # its only request
        else:
            requests = [lambda m=m: txn.prewrite(m, mutations[0].cell) for m in mutations]
        for request in requests:
            try:
                request()
            except StoreUnavailable:
                pass
            self.figures.late_duplicates += 1

    def blocker(self, cell) -> None:
        """H writes ``cell`` (its primary) and another row, and dies after its first
        prewrite: W's request on ``cell`` is refused (and H is rolled back later)."""
        h = self.cluster.begin()
        h.set(cell[0], cell[1], 7)
        h.set("other", "v", 7)
        self.figures.transactions += 1
        self.commit(h, "prewrite-primary")

    def reader(self, die_after: Optional[int] = None) -> None:
        """A reader of every cell (it cleans up what it meets); may die after its n-th
        row transaction."""
        r = self.cluster.begin()
        self.figures.transactions += 1
        plan = attach(r.session, DieAfter(r.session, die_after)) if die_after else None
        try:
            for cell in CELLS:
                r.get(cell.row, cell.column)
            r.commit()
        except ClientCrash:
            self.figures.reader_deaths += 1
            r.abandon()
        except StoreUnavailable:
            r.abandon()
        finally:
            if plan is not None:
                plan.detach()

    def second_writer(self) -> None:
        """V writes over one cell of each shape."""
        try:
            v = self.begin_writer([("a", "v"), ("r", "x")], 2)
        except StoreUnavailable:
            return
        self.commit(v)

    # -- the judgement -------------------------------------------------------------------
    def pessimistic_leftovers(self) -> list:
        """Cells holding a pessimistic lock (no data: readers skip it, as TiKV's do)."""
        return [Cell(table, row, split_column(column)[0])
                for table, rows in self.cluster.bigtable.dump().items()
                for row, columns in rows.items() for column, versions in columns.items()
                if column.endswith(":lock") and any(is_pessimistic(v) for _, v in versions)]

    def sweep_pessimistic(self) -> None:
        """A pessimistic lock left by a finished transaction holds no data and readers skip
        it; the next writer of the cell must get past it: one writes each such cell."""
        for cell in self.pessimistic_leftovers():
            for _ in range(3):          # a prewrite that meets a dead client's lock cleans
                t = self.cluster.begin()    # it up and still aborts (Figure 6): try again
                t.set(cell.row, cell.column, 3)
                self.figures.transactions += 1
                if t.commit():
                    break
            else:
                self.figures.problems.append(f"{label(self.combination)}: a writer cannot get "
                                             f"past the pessimistic lock left on {cell}")

    def settle_and_judge(self) -> Figures:
        self.cluster.clock.advance(2 * TTL)
        retry(lambda: self.reader())
        for txn in list(self.answers):
            self.decide(txn)
        retry(lambda: self.reader())
        self.sweep_pessimistic()
        history = self.cluster.check_history()
        f = self.figures
        f.anomalies += len(history.anomalies)
        for anomaly in history.anomalies[:2]:
            f.problems.append(f"{label(self.combination)}: {anomaly}")
        for violation in check_invariants(self.cluster)[:2]:
            f.problems.append(f"{label(self.combination)}: {violation}")
        for txn, answer in self.answers.items():
            seen = visible_cells(self.cluster, txn)
            if 0 < len(seen) < len(txn.writes):
                f.partial += 1
                f.problems.append(f"{label(self.combination)}: partial commit of {txn.client}")
            elif answer and not seen:
                f.lost += 1
                f.problems.append(f"{label(self.combination)}: {txn.client} lost")
            elif not answer and seen:
                f.g1a += 1
                f.problems.append(f"{label(self.combination)}: {txn.client} answered "
                                  f"aborted but committed")
        return f


def run_schedule(make, combination, shape, crash_after=None, fault=None, die_after=None,
                 decide_first=False, record=None, blocked=False, reader_inside=None,
                 factory: Callable = kit_variants) -> Figures:
    """One schedule: W's commit (crash or fault; refused where ``blocked``; a reader inside
    it after its ``reader_inside``-th row transaction), late duplicates, readers, V,
    judgement."""
    s = Schedule(make, combination, shape, factory)
    w = s.begin_writer(SHAPES[shape], 1)
    if blocked:
        s.blocker(SHAPES[shape][0])
    attached = [attach(s.cluster.bigtable, x) for x in (fault, record) if x is not None]
    if reader_inside:
        attached.append(attach(w.session, ReaderAfter(s, reader_inside)))
    try:
        s.commit(w, crash_after)
        if decide_first:                 # the outcome decided before its requests come again
            s.decide(w)
            s.replay_prewrites(w)
        s.cluster.clock.advance(2 * TTL)
        s.reader(die_after)
        s.reader()
        if not decide_first:
            s.replay_prewrites(w)        # late, after the readers decided
        s.second_writer()
    finally:
        for a in attached:
            a.detach()
    if isinstance(fault, FailNth) and fault.fired:
        s.figures.faults += 1
    return s.settle_and_judge()


def audit_combination(make, combination, depth: int = 2, shapes=tuple(SHAPES),
                      factory: Callable = kit_variants) -> Figures:
    """Every schedule of the module doc for one combination; ``depth``: store faults at the
    first ``depth`` occurrences of each step, readers dying after each of their first
    ``3 * depth`` row transactions. ``factory(combination)`` makes the variants (the
    kit's by default; a test passes a broken one to see the audit fail)."""
    total = Figures()
    for shape in shapes:
        try:
            audit_shape(make, combination, shape, depth, total, factory)
        except Exception as error:                  # a liveness defect, or a crash of the kit
            total.problems.append(f"{label(combination)} ({shape}): {type(error).__name__}: "
                                  f"{error}")
    return total


def audit_shape(make, combination, shape, depth, total, factory=kit_variants) -> None:
    """The schedules of :func:`audit_combination` for one shape of W, added to ``total``."""
    def run(**plan):
        total.add(run_schedule(make, combination, shape, factory=factory, **plan))
    record = Recorder()
    run(record=record)
    commit_steps = run_commit_length(make, combination, shape, factory)
    for point in [*range(1, commit_steps + 1), *CRASH_POINTS]:
        for decide_first in (False, True):
            run(crash_after=point, decide_first=decide_first)
    for decide_first in (False, True):             # W's first request refused
        run(blocked=True, decide_first=decide_first)
    for point in range(1, commit_steps + 1):       # a reader inside W's commit
        run(reader_inside=point)
    counts: dict = {}
    for step in record.steps:
        counts[step] = counts.get(step, 0) + 1
    for step, count in counts.items():
        for n, applied in itertools.product(range(1, min(count, depth) + 1), (False, True)):
            run(fault=FailNth(step, n, applied), decide_first=True)
    for point in (1, commit_steps):
        for j in range(1, 3 * depth + 1):
            run(crash_after=point, die_after=j)


def run_commit_length(make, combination, shape, factory: Callable = kit_variants) -> int:
    """How many row transactions W's commit runs when nothing fails."""
    s = Schedule(make, combination, shape, factory)
    w = s.begin_writer(SHAPES[shape], 1)
    record = Recorder()
    with attach(w.session, record):
        assert w.commit(), f"{label(combination)}: a lone writer's commit failed"
    return len(record.steps)


BANK_FAULT_STEPS = sorted({
    "prewrite-primary", "prewrite-secondary", "commit-primary", "commit-secondary", "get",
    "scan", "cleanup-primary", "roll-back", "roll-forward", "abort-rollback", "check-primary",
    "check-secondary-locks", "resolve-primary", "check-txn-status", "txn-heart-beat",
    "one-pc", "acquire-pessimistic-lock", "pessimistic-rollback", "protect-rollback"})


def bank_with_faults(make, combination, rounds: int = 30, seed: int = 0,
                     accounts: int = 4) -> Figures:
    """The bank: per round two concurrent transfers (reads interleaved), each crashing with
    probability 0.25 at a random row transaction of its commit, a one-shot store fault at a
    random step with probability 0.25, a reader summing every account, the clock moved by
    up to two TTLs; a tiny TTL (the cluster's). Judged like a schedule."""
    rng = random.Random(seed)
    s = Schedule(make, combination, "rows")
    names = [f"acct{i}" for i in range(accounts)]
    opening = s.cluster.begin()
    for name in names:
        opening.set(name, "bal", 100)
    assert opening.commit()
    for _ in range(rounds):
        fault = None
        if rng.random() < 0.25:
            fault = FailNth(rng.choice(BANK_FAULT_STEPS), 1, rng.random() < 0.5)
        attachment = attach(s.cluster.bigtable, fault) if fault else None
        try:
            bank_round(s, rng, names, 100 * accounts)
        finally:
            if attachment is not None:
                attachment.detach()
                s.figures.faults += fault.fired
        s.cluster.clock.advance(rng.uniform(0, 2 * s.cluster.lock_ttl))
    return s.settle_and_judge()


def bank_round(s: Schedule, rng: random.Random, names: list, expected: int) -> None:
    """Two transfers begun together (reads interleaved), committed in a random order (each
    may crash), then a reader's total, which must be ``expected``."""
    transfers = []
    for _ in range(2):
        source, target = rng.sample(names, 2)
        t = s.cluster.begin()
        s.figures.transactions += 1
        try:
            read = t.get_for_update if s.pessimistic else t.get
            have, other = read(source, "bal"), read(target, "bal")
        except StoreUnavailable:
            t.abandon()
            continue
        amount = rng.randint(1, 20)
        t.set(source, "bal", have - amount)
        t.set(target, "bal", other + amount)
        transfers.append(t)
    for t in rng.sample(transfers, len(transfers)):
        s.commit(t, rng.randint(1, 6) if rng.random() < 0.25 else None)
    reader = s.cluster.begin()
    try:
        total = sum(v for _, _, v in reader.scan())
        reader.commit()
    except StoreUnavailable:
        reader.abandon()
        return
    if total != expected:
        s.figures.anomalies += 1
        s.figures.problems.append(f"{label(s.combination)}: bank total {total}")


def memory_maker(lock_ttl: float = TTL) -> Callable:
    def make(variants):
        return Cluster(clock=ManualClock(), lock_ttl=lock_ttl, variants=variants)
    return make


def redis_maker(url: str, lock_ttl: float = TTL) -> Callable:
    """Clusters on the Redis server at ``url`` (its query, a prefix included, is dropped),
    each on a key prefix of its own."""
    counter = itertools.count()
    server = url.split("?")[0]

    def make(variants):
        return Cluster(clock=ManualClock(), lock_ttl=lock_ttl, variants=variants,
                       backend=f"{server}?prefix=va{time.monotonic_ns()}x{next(counter)}")
    return make


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="also run on this Redis server (redis://host:port/db)")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--bank-rounds", type=int, default=40)
    parser.add_argument("--only", help="comma-separated combination labels to run")
    args = parser.parse_args(argv)
    stores = [("memory", memory_maker, memory_maker(0.05))]
    if args.redis:
        stores.append(("redis", lambda: redis_maker(args.redis), redis_maker(args.redis, 0.05)))
    wanted = set(args.only.split(",")) if args.only else None
    bad = 0
    print("store,combination,schedules,transactions,crashes,faults,late_duplicates,"
          "reader_deaths,anomalies,lost,partial,g1a,seconds")
    for store, maker, tiny in stores:
        for combination in accepted_combinations():
            if wanted and label(combination) not in wanted:
                continue
            began = time.monotonic()
            figures = audit_combination(maker(), combination, args.depth)
            figures.add(bank_with_faults(tiny, combination, args.bank_rounds))
            row = figures.row()
            print(",".join([store, label(combination)] + [str(v) for v in row.values()]
                           + [f"{time.monotonic() - began:.1f}"]), flush=True)
            for problem in figures.problems:
                print("   ", problem)
            bad += not figures.ok
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
