"""A soak test: transfers, crashes, observers and readers at once, then an audit.

:func:`run_soak` runs for ``seconds`` of wall time on one cluster:

- transfer threads move money between bank accounts (the ``balance`` column is
  observed), each transfer also sending a weak notification to a ledger row;
  a share of the clients crash at a random row transaction of their commit;
- a reader thread sums the accounts on every snapshot (the total never moves
  under snapshot isolation);
- an observer thread keeps running ``run_observers()``;
- with a ``server`` (a :class:`~percolator_ref.harness.redis_server.LocalRedisServer`
  with an append-only file), a killer thread SIGKILLs the store and restarts it
  from its file every ``kill_every`` seconds;
- with a ``nemesis`` (:class:`~percolator_ref.workloads.nemesis.Nemesis`), its
  thread kills, pauses and restarts the store's nodes; it heals them all
  before the audit.

Then it settles (waits out the lock TTL, scans everything so readers clean up
dead locks, drains the observers) and audits: ``anomalies`` (the checker over
the whole history, plus totals that moved), ``lost_commits`` (a commit reported
or decided as committed whose write record is missing), ``stuck_locks`` (locks
left after the settling scan), ``unobserved_notifications`` (a committed
write or weak notification with no observer run started after its commit) and
``reissued_timestamps`` (timestamps the oracle handed out more than once; every
one handed out is recorded), plus a last read of the bank's total.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from ..errors import ClientCrash, CommitOutcomeUnknown, StoreUnavailable
from ..model import ack_col, write_col
from .bank import COLUMN, TABLE, read_total, setup_accounts

LEDGER, TOUCH = "ledger", "touch"


@dataclass
class SoakReport:
    """What :func:`run_soak` counted; ``ok`` when every audit figure is zero."""
    seconds: float = 0.0
    transactions: int = 0
    committed: int = 0
    aborted: int = 0
    crashes: int = 0
    unknown_outcomes: int = 0
    store_errors: int = 0
    server_kills: int = 0
    observer_runs: int = 0
    snapshots_read: int = 0
    anomalies: int = 0
    lost_commits: int = 0
    stuck_locks: int = 0
    unobserved_notifications: int = 0
    reissued_timestamps: int = 0
    problems: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.anomalies or self.lost_commits or self.stuck_locks
                    or self.unobserved_notifications or self.reissued_timestamps)

    def to_json(self) -> dict:
        return {**asdict(self), "problems": self.problems[:20], "ok": self.ok}


class RecordingOracle:
    """The cluster's oracle, recording every timestamp it hands out (to find reissues)."""

    def __init__(self, oracle):
        self.oracle, self.handed_out, self.lock = oracle, [], threading.Lock()

    def get_timestamp(self) -> int:
        return self.get_timestamps(1)[0]

    def get_timestamps(self, n: int) -> range:
        stamps = self.oracle.get_timestamps(n)
        with self.lock:
            self.handed_out.extend(stamps)
        return stamps

    def reissued(self) -> list:
        """The timestamps handed out more than once (each listed once)."""
        counts = Counter(self.handed_out)
        return sorted(ts for ts, n in counts.items() if n > 1)

    def __getattr__(self, name):
        return getattr(self.oracle, name)


class Soak:
    """The threads of one soak run and what they recorded (see the module doc)."""

    def __init__(self, cluster, seed: int, accounts: int, crash_rate: float, server, kill_every):
        self.cluster, self.seed, self.crash_rate = cluster, seed, crash_rate
        self.server, self.kill_every = server, kill_every
        self.oracle = cluster.oracle = RecordingOracle(cluster.oracle)
        self.names = setup_accounts(cluster, accounts, 100, TABLE)
        self.expected_total = accounts * 100
        self.report = SoakReport()
        self.decided: list = []          # committed transactions: (txn, ledger row)
        self.undecided: list = []        # crashed or unknown: settled after the run
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def transfer(self, rng: random.Random) -> None:
        """One transfer (and a weak notification); its outcome recorded."""
        source, target = rng.sample(self.names, 2)
        ledger = f"L{rng.randrange(4)}"
        crash = rng.randint(1, 6) if rng.random() < self.crash_rate else None
        t = self.cluster.begin()
        try:
            a, b = t.get(source, COLUMN, table=TABLE), t.get(target, COLUMN, table=TABLE)
            amount = rng.randint(1, 10)
            t.set(source, COLUMN, a - amount, table=TABLE)
            t.set(target, COLUMN, b + amount, table=TABLE)
            t.notify(ledger, TOUCH, table=LEDGER)
            self.record(t, ledger, t.commit(crash_after=crash))
        except ClientCrash:
            self.record(t, ledger, None, "crashes")
        except CommitOutcomeUnknown:
            self.record(t, ledger, None, "unknown_outcomes")
        except StoreUnavailable:
            t.abandon()
            self.count("store_errors")
            time.sleep(0.05)

    def record(self, t, ledger: str, committed, undecided_kind: str = "") -> None:
        with self.lock:
            self.report.transactions += 1
            if committed is None:
                setattr(self.report, undecided_kind, getattr(self.report, undecided_kind) + 1)
                self.undecided.append((t, ledger))
            elif committed:
                self.report.committed += 1
                self.decided.append((t, ledger))
            else:
                self.report.aborted += 1

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self.report, name, getattr(self.report, name) + n)

    def forever(self, body, *args) -> None:
        """Run ``body`` until the soak stops; a store that is down is retried."""
        while not self.stop.is_set():
            try:
                body(*args)
            except (StoreUnavailable, CommitOutcomeUnknown):   # an observer run's commit
                self.count("store_errors")
                time.sleep(0.05)

    def read(self) -> None:
        total = read_total(self.cluster, TABLE)
        self.count("snapshots_read")
        if total != self.expected_total:
            self.count("anomalies")
            self.report.problems.append(f"a snapshot summed to {total}, not {self.expected_total}")

    def observe(self) -> None:
        self.count("observer_runs", self.cluster.run_observers())
        time.sleep(0.01)

    def kill(self) -> None:
        if self.stop.wait(self.kill_every):
            return
        self.server.restart(crash=True)              # SIGKILL, then restart from the AOF
        self.count("server_kills")


def register_observers(cluster) -> None:
    """The soak's observers: one on every balance, one on the ledger's weak notifications."""
    @cluster.observe(TABLE, COLUMN, name="audit")
    def audit(txn, row, column):
        txn.get(row, column, table=TABLE)        # reads the committed balance (cleaning up)

    @cluster.observe(LEDGER, TOUCH, name="touched")
    def touched(txn, row, column):
        pass


def run_soak(cluster, seconds: float, *, seed: int = 0, threads: int = 3, accounts: int = 8,
             crash_rate: float = 0.15, server=None, kill_every: float = 2.0,
             nemesis=None, progress: bool = False) -> SoakReport:
    """Soak ``cluster`` for ``seconds`` (wall time), then settle and audit it.

    ``nemesis``: an object with ``run(stop)`` (its thread, until the event
    ``stop`` is set) and ``heal()`` (every node back, before the audit).
    """
    for argument, value in (("seconds", seconds), ("kill_every", kill_every)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{argument} must be a number of seconds > 0, got {value!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    register_observers(cluster)
    soak = Soak(cluster, seed, accounts, crash_rate, server, kill_every)
    started = time.monotonic()
    workers = [(soak.forever, (soak.transfer, random.Random(f"{seed}/{i}"))) for i in range(threads)]
    workers += [(soak.forever, (soak.read,)), (soak.forever, (soak.observe,))]
    if server is not None:
        workers.append((soak.forever, (soak.kill,)))
    if nemesis is not None:
        workers.append((nemesis.run, (soak.stop,)))
    run_threads(soak.stop, workers, seconds, progress)
    soak.report.seconds = round(time.monotonic() - started, 2)
    if nemesis is not None:
        nemesis.heal()
    settle(soak)
    audit(soak)
    return soak.report


def run_threads(stop: threading.Event, workers: list, seconds: float, progress: bool) -> None:
    """Run ``workers`` (``(fn, args)``) as threads for ``seconds``, then set ``stop``, join them."""
    running = [threading.Thread(target=fn, args=args, daemon=True) for fn, args in workers]
    for thread in running:
        thread.start()
    try:
        wait_with_progress(stop, seconds, progress)
    except BaseException:               # Ctrl-C: stop soon; the caller stops the servers
        stop.set()
        give_up = time.monotonic() + 3.0    # a killer thread mid-restart finishes first
        for thread in running:
            thread.join(max(0.0, give_up - time.monotonic()))
        raise
    stop.set()
    for thread in running:
        thread.join()


def wait_with_progress(stop: threading.Event, seconds: float, progress: bool) -> None:
    from tqdm.auto import tqdm
    with tqdm(total=round(seconds), desc="soak", unit="s", disable=not progress,
              leave=False) as bar:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            stop.wait(min(1.0, left))
            bar.n = round(seconds - max(left - 1.0, 0))
            bar.refresh()


def settle(soak: Soak) -> None:
    """Decide every crashed or unknown commit, let dead locks be cleaned, drain observers.

    A store that fails meanwhile (a node still rejoining) is retried for up to a minute.
    """
    cluster = soak.cluster
    for t, ledger in soak.undecided:
        if retried(t.outcome):
            soak.decided.append((t, ledger))
    cluster.clock.sleep(cluster.lock_ttl + 0.05)       # open transactions' tokens expire
    for table in retried(cluster.bigtable.tables):
        retried(scan_all, cluster, table)               # meets every lock: cleans it up
    soak.count("observer_runs", retried(cluster.run_observers))


def scan_all(cluster, table: str) -> None:
    reader = cluster.begin()
    reader.scan(table)
    reader.commit()


def retried(fn, *args, seconds: float = 60.0):
    """``fn(*args)``, again while the store is unavailable, for up to ``seconds``."""
    give_up = time.monotonic() + seconds
    while True:
        try:
            return fn(*args)
        except (StoreUnavailable, CommitOutcomeUnknown):
            if time.monotonic() > give_up:
                raise
            time.sleep(0.1)


def audit(soak: Soak) -> None:
    """Count anomalies, lost commits, stuck locks and unobserved notifications."""
    cluster, report = soak.cluster, soak.report
    found = cluster.check_history()
    report.anomalies += len(found.anomalies)
    report.problems += [str(a) for a in found.anomalies]
    soak.read()                                         # the bank's total, once more
    reissued = soak.oracle.reissued()
    report.reissued_timestamps = len(reissued)
    report.problems += [f"timestamp {ts} handed out twice" for ts in reissued[:5]]
    records, last_run = Cached(cluster, write_records), Cached(cluster, newest_run)
    for t, ledger in soak.decided:
        for cell in t.writes:
            if (t.commit_ts, t.start_ts) not in records.get(cell.table, cell.row, cell.column):
                report.lost_commits += 1
                report.problems.append(f"{t.client}: {cell} has no write record at {t.commit_ts}")
            if last_run.get(TABLE, cell.row, ack_col(COLUMN, "audit")) <= t.commit_ts:
                report.unobserved_notifications += 1
                report.problems.append(f"{t.client}: {cell} never observed after its commit")
        if last_run.get(LEDGER, ledger, ack_col(TOUCH, "touched")) <= t.commit_ts:
            report.unobserved_notifications += 1
            report.problems.append(f"{t.client}: weak notification of {ledger} never observed")
    report.stuck_locks = sum(len(cluster.bigtable.versions(table, row, column))
                             for table in cluster.bigtable.tables()
                             for row in cluster.bigtable.rows(table)
                             for column in cluster.bigtable.columns(table, row)
                             if column.endswith(":lock"))


class Cached:
    """``fn(cluster, table, row, column)`` computed once per cell."""

    def __init__(self, cluster, fn):
        self.cluster, self.fn, self.known = cluster, fn, {}

    def get(self, table: str, row: str, column: str):
        key = (table, row, column)
        if key not in self.known:
            self.known[key] = self.fn(self.cluster, *key)
        return self.known[key]


def write_records(cluster, table: str, row: str, column: str) -> set:
    """``{(commit_ts, start_ts)}`` of the cell's write records."""
    return {(ts, w.start_ts) for ts, w in cluster.bigtable.versions(table, row, write_col(column))}


def newest_run(cluster, table: str, row: str, ack_column: str) -> int:
    """The start_ts of the observer's newest committed run on this cell (0: none)."""
    acks = cluster.bigtable.versions(table, row, write_col(ack_column))
    return max((w.start_ts for _, w in acks), default=0)
