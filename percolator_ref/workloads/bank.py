"""A bank workload in the manner of Jepsen's: transfers under threads, crashes, a total.

Accounts are rows of table ``bank`` with a ``balance`` column. Worker threads
move random amounts between random accounts, each transfer one transaction;
some clients crash in the middle of their commit (``crash_after`` random). A
reader thread sums every account on each snapshot: under snapshot isolation
the total never changes. Afterwards the recorded history goes to the
snapshot-isolation checker and :func:`check_invariants` inspects the store.

    >>> from percolator_ref import Cluster, ManualClock
    >>> cluster = Cluster(clock=ManualClock())
    >>> result = run_bank(cluster, threads=1, transfers=20, crash_rate=0.2, seed=1)
    >>> result.ok, set(result.totals_seen)
    (True, {800})
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Optional

from ..errors import ClientCrash
from ..model import TxStatus, Write, WriteKind, data_col, split_column, write_col

TABLE = "bank"
COLUMN = "balance"


def account_name(i: int) -> str:
    return f"acct{i:02d}"


def setup_accounts(cluster, accounts: int = 8, balance: int = 100, table: str = TABLE) -> list:
    """Open ``accounts`` accounts holding ``balance`` each, in one transaction; their names."""
    if isinstance(accounts, bool) or not isinstance(accounts, int) or accounts < 2:
        raise ValueError(f"accounts must be an int >= 2, got {accounts!r}")
    names = [account_name(i) for i in range(accounts)]
    t = cluster.begin()
    for name in names:
        t.set(name, COLUMN, balance, table=table)
    if not t.commit():
        raise RuntimeError("could not open the accounts (a concurrent writer?)")
    return names


def transfer(cluster, source: str, target: str, amount: int, crash_after=None,
             table: str = TABLE) -> str:
    """Move ``amount`` from ``source`` to ``target`` in one transaction.

    Returns ``"committed"``, ``"aborted"`` (a write-write conflict),
    ``"crashed"`` (``crash_after`` fired) or ``"insufficient"`` (the source
    holds less than ``amount``: nothing written).
    """
    t = cluster.begin()
    have = t.get(source, COLUMN, table=table)
    other = t.get(target, COLUMN, table=table)
    if have < amount:
        t.commit()
        return "insufficient"
    t.set(source, COLUMN, have - amount, table=table)
    t.set(target, COLUMN, other + amount, table=table)
    try:
        return "committed" if t.commit(crash_after=crash_after) else "aborted"
    except ClientCrash:
        return "crashed"


def read_total(cluster, table: str = TABLE) -> int:
    """The sum of all balances in one snapshot (a read-only transaction)."""
    t = cluster.begin()
    total = sum(value for _, column, value in t.scan(table) if column == COLUMN)
    t.commit()
    return total


@dataclass
class BankResult:
    """What a bank run saw. ``ok``: every total right, clean history, no violation."""
    accounts: int
    expected_total: int
    outcomes: dict = field(default_factory=dict)   # committed/aborted/crashed/insufficient
    totals_seen: list = field(default_factory=list)
    history: Optional[object] = None               # the checker's CheckReport
    violations: list = field(default_factory=list)

    @property
    def committed(self) -> int:
        return self.outcomes.get("committed", 0)

    @property
    def aborts(self) -> int:
        return self.outcomes.get("aborted", 0)

    @property
    def crashes(self) -> int:
        return self.outcomes.get("crashed", 0)

    @property
    def bad_totals(self) -> list:
        return [t for t in self.totals_seen if t != self.expected_total]

    @property
    def ok(self) -> bool:
        return (not self.bad_totals and not self.violations
                and (self.history is None or self.history.ok))

    def __repr__(self):
        return (f"BankResult(accounts={self.accounts}, outcomes={dict(sorted(self.outcomes.items()))}, "
                f"snapshots={len(self.totals_seen)}, bad_totals={len(self.bad_totals)}, "
                f"history_ok={None if self.history is None else self.history.ok}, "
                f"violations={len(self.violations)})")


def run_bank(cluster, threads: int = 4, transfers: int = 200, crash_rate: float = 0.1,
             seed: int = 0, accounts: int = 8, balance: int = 100, table: str = TABLE,
             max_amount: int = 20, progress: bool = False) -> BankResult:
    """Run ``transfers`` random transfers on ``threads`` worker threads, with a reader thread.

    Each transfer crashes its client with probability ``crash_rate`` at a
    random row transaction of its commit (``crash_after`` in 1..4). Worker
    ``i`` draws from ``random.Random(seed * 1000 + i)``. The reader sums the
    balances on every snapshot until the workers are done (and once more
    after). Then the history is checked and :func:`check_invariants` runs.
    """
    names = setup_accounts(cluster, accounts, balance, table)
    result = BankResult(accounts, accounts * balance)
    run = _BankRun(cluster, names, result, table, max_amount, crash_rate, seed,
                   _progress(transfers, progress))
    shares = [transfers // threads + (1 if i < transfers % threads else 0) for i in range(threads)]
    run.start_and_join(shares)
    result.totals_seen.append(read_total(cluster, table))
    if cluster.history is not None:
        result.history = cluster.check_history()
    result.violations = check_invariants(cluster)
    return result


class _BankRun:
    """The threads of one :func:`run_bank`: transfer workers and the reader."""

    def __init__(self, cluster, names, result, table, max_amount, crash_rate, seed, bar):
        self.cluster, self.names, self.result, self.table = cluster, names, result, table
        self.max_amount, self.crash_rate, self.seed, self.bar = max_amount, crash_rate, seed, bar
        self.done, self.errors, self.lock = threading.Event(), [], threading.Lock()

    def worker(self, i: int, count: int) -> None:
        rng = random.Random(self.seed * 1000 + i)
        try:
            for _ in range(count):
                source, target = rng.sample(self.names, 2)
                crash = rng.randint(1, 4) if rng.random() < self.crash_rate else None
                outcome = transfer(self.cluster, source, target, rng.randint(1, self.max_amount),
                                   crash, self.table)
                with self.lock:
                    self.result.outcomes[outcome] = self.result.outcomes.get(outcome, 0) + 1
                if self.bar is not None:
                    self.bar.update(1)
        except BaseException as exc:   # re-raised in the caller's thread
            self.errors.append(exc)

    def reader(self) -> None:
        try:
            while not self.done.is_set():
                self.result.totals_seen.append(read_total(self.cluster, self.table))
        except BaseException as exc:
            self.errors.append(exc)

    def start_and_join(self, shares: list) -> None:
        workers = [threading.Thread(target=self.worker, args=(i, n), name=f"bank-{i}")
                   for i, n in enumerate(shares)]
        watcher = threading.Thread(target=self.reader, name="bank-reader")
        watcher.start()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        self.done.set()
        watcher.join()
        if self.bar is not None:
            self.bar.close()
        if self.errors:
            raise self.errors[0]


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc="transfers", unit="txn")


# -- invariants over the store --------------------------------------------------

def check_invariants(cluster, settle: bool = True) -> list:
    """Inspect the store; return a list of violations (empty: all hold).

    With ``settle`` a fresh transaction first scans every table, so locks
    left by dead clients are rolled forward or back, as the next reader
    would. Then:

    - at most one lock per cell, and (after settling) no lock at all;
    - committed write intervals ``[start_ts, commit_ts]`` of a cell never
      overlap, and each data write record points at existing data;
    - every committed transaction's writes are visible on every one of its
      cells (a write record at its ``commit_ts``), and no aborted
      transaction left a write record or data.
    """
    if settle:
        _settle(cluster)
    violations = []
    dump = cluster.bigtable.dump()
    for table, rows in dump.items():
        for row, columns in rows.items():
            for physical, versions in columns.items():
                column, kind = split_column(physical)
                where = f"{table}/{row}.{column}"
                if kind == "lock":
                    if len(versions) > 1:
                        violations.append(f"{where} has {len(versions)} locks {versions}")
                    if settle:
                        violations.append(f"{where} still locked after a full scan: {versions}")
                elif kind == "write":
                    violations += _check_write_column(where, versions, columns.get(data_col(column), []))
    if cluster.history is not None:
        cluster.history.resolve_crashed(cluster.bigtable)
        violations += _check_outcomes(cluster, dump, settle)
    return violations


def _settle(cluster) -> None:
    t = cluster.begin()
    for table in cluster.bigtable.tables():
        t.scan(table)
    t.commit()


def _check_write_column(where: str, versions: list, data: list) -> list:
    found, data_ts = [], {ts for ts, _ in data}
    records = sorted((commit_ts, w) for commit_ts, w in versions
                     if isinstance(w, Write) and w.kind is not WriteKind.ROLLBACK)
    for commit_ts, w in records:
        if commit_ts <= w.start_ts:
            found.append(f"{where}: write record at {commit_ts} for start {w.start_ts} is not after it")
        if w.kind is WriteKind.PUT and w.start_ts not in data_ts:
            found.append(f"{where}: write record at {commit_ts} points at missing data @ {w.start_ts}")
    for (c1, w1), (c2, w2) in zip(records, records[1:]):
        if w2.start_ts < c1:
            found.append(f"{where}: write intervals [{w1.start_ts},{c1}] and "
                         f"[{w2.start_ts},{c2}] overlap")
    return found


def _check_outcomes(cluster, dump: dict, settle: bool) -> list:
    found = []
    for record in cluster.history.records:
        for cell, _, _ in record.writes:
            columns = dump.get(cell.table, {}).get(cell.row, {})
            records = {c: w.start_ts for c, w in columns.get(write_col(cell.column), [])
                       if w.kind is not WriteKind.ROLLBACK}
            pointing = [c for c, s in records.items() if s == record.start_ts]
            if record.committed and settle and records.get(record.commit_ts) != record.start_ts:
                found.append(f"{record.client} committed at {record.commit_ts} but {cell} "
                             f"shows no write record for it")
            if record.status == TxStatus.ABORTED and pointing:
                found.append(f"{record.client} aborted but {cell} has its write record at {pointing}")
            if record.status == TxStatus.ABORTED and settle and any(
                    ts == record.start_ts for ts, _ in columns.get(data_col(cell.column), [])):
                found.append(f"{record.client} aborted but its data @ {record.start_ts} "
                             f"is still in {cell}")
    return found
