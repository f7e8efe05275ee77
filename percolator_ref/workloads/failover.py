"""A store node dies under load: TPC-E on a replicated Redis Cluster, one master SIGKILLed.

The kit's own experiment, in the spirit of the paper's reliance on Bigtable
staying durable and consistent across a tablet server failure (the paper's
own failure figure is not in the notes, so none is cited here).

:func:`run_failover`:

1. starts a Redis Cluster of ``masters`` masters, each with one replica
   (:class:`~percolator_ref.harness.redis_cluster.ReplicatedRedisCluster`),
   and loads the TPC-E database;
2. runs ``processes`` client processes, ``threads`` emulators each, for
   ``before_s + after_s`` seconds. A client whose store call fails (the node
   is dead, the slot not yet moved) abandons that attempt and retries the
   same logical transaction; a commit whose outcome is unknown is resolved
   at its primary once the store answers (:meth:`Transaction.outcome`);
3. after ``before_s`` it SIGKILLs the master that serves the timestamp
   oracle's key (a third of the rows live there too); its replica takes over
   (the cluster failover); once it has, the killed node is restarted and
   rejoins as a replica, as a supervisor would restart it;
4. at the end: TPC-E's invariants on the store, and ``lost_commits``: the
   commits a client was told succeeded whose write records are missing.

With ``wait=1`` (the store's ``?wait=1``) every write a commit depends on is
acknowledged by a replica before the client hears of it (``WAIT``), so a
failover loses nothing acknowledged. With ``wait=0`` replication is
asynchronous; ``replica_lag_s`` cuts the victim's replica off (stopped, its
replication link dropped: :meth:`ReplicatedRedisCluster.cut_replication`)
that long before the kill, a deterministic stand-in for replication lag,
so what ``wait`` protects is exposed on purpose.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Optional

from ..errors import CommitOutcomeUnknown, StoreUnavailable
from ..model import write_col
from .tpce import TRANSACTIONS, Tpce, TpceConfig

ORACLE_KEY_TAG = "{oracle}"
RETRY_SLEEP = 0.05


@dataclass(frozen=True)
class FailoverSettings:
    """One run's settings (see the module doc)."""
    before_s: float = 4.0
    after_s: float = 8.0
    processes: int = 3
    threads: int = 2
    wait: int = 1
    replica_lag_s: float = 0.0
    customers: int = 100
    masters: int = 3
    lock_ttl: float = 2.0
    seed: int = 0

    def __post_init__(self):
        for name in ("processes", "threads", "customers", "masters"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.masters < 3:
            raise ValueError(f"masters must be >= 3 (failover needs a majority), got {self.masters}")
        if self.wait not in (0, 1):
            raise ValueError(f"wait must be 0 or 1 (one replica per master), got {self.wait!r}")
        for name in ("before_s", "after_s", "lock_ttl"):
            if not isinstance(getattr(self, name), (int, float)) or not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, "
                                 f"got {getattr(self, name)!r}")
        if not isinstance(self.replica_lag_s, (int, float)) or not self.replica_lag_s >= 0:
            raise ValueError(f"replica_lag_s must be >= 0 seconds, got {self.replica_lag_s!r}")


# -- in each client process ----------------------------------------------------------

class CommitLog:
    """A client's JSON-lines log: each acknowledged commit and each failed store call."""

    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)
        self.unavailable = self.unknown = 0
        self.errors: list = []
        self.reasons: Counter = Counter()     # why store calls failed (message heads)

    def commit(self, name: str, t, completed: bool) -> None:
        cells = [[c.table, c.row, c.column] for c in t.writes]
        self.file.write(json.dumps({"t": time.time(), "name": name, "start_ts": t.start_ts,
                                    "commit_ts": t.commit_ts, "cells": cells,
                                    "trade_result": bool(completed)}) + "\n")

    def failure(self, kind: str, message: str = "") -> None:
        self.reasons[f"{kind}: {message}"[:160]] += 1
        if kind == "unavailable":
            self.unavailable += 1
        elif kind == "unknown":
            self.unknown += 1
        else:
            self.errors.append(message)
        self.file.write(json.dumps({"t": time.time(), "failure": kind}) + "\n")


def settle(t, give_up_at: float) -> Optional[bool]:
    """The outcome of a commit that ended unknown, once the store answers (None: never did)."""
    while time.time() < give_up_at:
        try:
            return t.outcome()
        except StoreUnavailable:
            time.sleep(RETRY_SLEEP)
    return None


def attempt_once(w: Tpce, name: str, args: tuple, log: CommitLog, started: float,
                 give_up_at: float) -> Optional[bool]:
    """One attempt: True committed (told to the client), False aborted, None the store failed."""
    t = None
    try:
        t = w.store.begin()
        result = TRANSACTIONS[name](t, *args)
        ok = t.commit()
    except CommitOutcomeUnknown:
        ok = settle(t, give_up_at)
        if ok is None:
            log.failure("unknown")
            return None
    except StoreUnavailable as e:
        if t is not None:
            t.abandon()
        log.failure("unavailable", str(e).split(": ", 1)[-1])
        return None
    if ok:
        w.record_commit(name, result, started)
        log.commit(name, t, result.get("completed"))
    return ok


def run_logical(w: Tpce, name: str, args: tuple, rng: random.Random, log: CommitLog,
                give_up_at: float) -> bool:
    """A logical transaction, retried through conflicts and store failures until ``give_up_at``."""
    started = time.perf_counter()
    for attempt in range(1_000_000):
        try:
            ok = attempt_once(w, name, args, log, started, give_up_at)
        except Exception as e:      # noqa: BLE001 - e.g. a row lost with a node: reported
            log.failure("error", f"{name}: {type(e).__name__}: {e}")
            ok = None
            give_up_at = 0.0
        if ok:
            return True
        if ok is False:
            w.record_abort(name)
        if time.time() > give_up_at:
            break
        time.sleep(rng.uniform(0, min(0.001 * 2 ** min(attempt, 6), RETRY_SLEEP)))
    if name == "trade_result":
        w.pending.append(args[0])             # the market tries again later
    return False


def emulate(w: Tpce, index: int, stop_at: float, log: CommitLog) -> None:
    """One emulator thread until ``stop_at`` (wall time): TPC-E's mix, one feed at a time."""
    rng = random.Random(w.config.seed * 100003 + w.stream * 1009 + index)
    while time.time() < stop_at:
        feed = w.feed_lock.acquire(blocking=False)
        try:
            name, args = w.next_job(rng, feed_busy=not feed)
            if name != "market_feed" and feed:
                w.feed_lock.release()
                feed = False
            run_logical(w, name, args, rng, log, stop_at + 30.0)
        except StoreUnavailable as e:        # drawing the job read the store (a feed)
            log.failure("unavailable", str(e).split(": ", 1)[-1])
            time.sleep(RETRY_SLEEP)
        except Exception as e:               # noqa: BLE001 - e.g. a price lost with a node
            log.failure("error", f"drawing a job: {type(e).__name__}: {e}")
        finally:
            if feed:
                w.feed_lock.release()


def failover_client(cluster, index: int, config: TpceConfig, threads: int, start_at: float,
                    stop_at: float, log_path: str) -> dict:
    """A client process (:func:`~percolator_ref.harness.multiprocess.start_worker`'s workload)."""
    import threading
    w = Tpce(cluster, config, load=False, trade_id_prefix=f"F{index:02d}-", stream=index + 1)
    log = CommitLog(log_path)
    time.sleep(max(0.0, start_at - time.time()))
    workers = [threading.Thread(target=emulate, args=(w, i, stop_at, log))
               for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    rng = random.Random(index)
    while w.pending:                          # finish the trades this client made pending
        run_logical(w, "trade_result", (w.pending.popleft(), config.broker_fix), rng, log,
                    time.time() + 30.0)
    return {"trade_results": w.stats.trade_results, "violations": list(w.stats.violations),
            "unavailable": log.unavailable, "unknown": log.unknown, "errors": log.errors[:20],
            "error_count": len(log.errors), "pending_left": len(w.pending),
            "reasons": dict(log.reasons.most_common(5))}


# -- the parent ---------------------------------------------------------------------------

def read_logs(paths: list) -> tuple:
    """``(commits, failures)`` from the clients' logs."""
    commits, failures = [], []
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                (failures if "failure" in record else commits).append(record)
    return commits, failures


def lost_commits(bigtable, commits: list) -> list:
    """The acknowledged commits with a written cell whose write record at commit_ts is missing."""
    lost = []
    for c in commits:
        for table, row, column in c["cells"]:
            versions = bigtable.versions(table, row, write_col(column))
            if not any(ts == c["commit_ts"] and getattr(w, "start_ts", None) == c["start_ts"]
                       for ts, w in versions):
                lost.append(c)
                break
    return lost


def per_second(commits: list, failures: list, t0: float, seconds: int) -> list:
    """The timeline: per second from the start, Trade-Results (tpsE), commits, failed calls."""
    rows = [{"t": s, "tpsE": 0, "commits": 0, "failed_attempts": 0} for s in range(seconds)]
    for c in commits:
        s = int(c["t"] - t0)
        if 0 <= s < seconds:
            rows[s]["commits"] += 1
            rows[s]["tpsE"] += 1 if c["trade_result"] else 0
    for f in failures:
        s = int(f["t"] - t0)
        if 0 <= s < seconds:
            rows[s]["failed_attempts"] += 1
    return rows


def recovery(commits: list, t0: float, kill_t: float, end_t: float, before: float) -> Optional[float]:
    """Seconds from the kill until the Trade-Results of the last second reach half of ``before``."""
    times = sorted(c["t"] - t0 for c in commits if c["trade_result"])
    t = kill_t + 1.0
    while t <= end_t:
        if sum(1 for x in times if t - 1.0 <= x < t) >= 0.5 * before:
            return round(t - kill_t, 2)
        t += 0.1
    return None


def timeline_numbers(commits: list, t0: float, kill_t: float, end_t: float,
                     fault_t: Optional[float] = None) -> dict:
    """tpsE before the fault (from ``fault_t``, default the kill, after a warm-up second),
    lowest during the outage, after recovery, and recovery_s (from the kill)."""
    trade_times = [c["t"] - t0 for c in commits if c["trade_result"]]
    fault_t = kill_t if fault_t is None else fault_t
    warm = min(1.0, fault_t / 2)
    before = sum(1 for x in trade_times if warm <= x < fault_t) / (fault_t - warm)
    rec = recovery(commits, t0, kill_t, end_t, before)
    back = kill_t + (rec if rec is not None else end_t - kill_t)
    after_from = min(back + 1.0, end_t - 1.0)
    after = sum(1 for x in trade_times if after_from <= x < end_t) / max(end_t - after_from, 1e-9)
    during = [sum(1 for x in trade_times if s <= x < s + 1) for s in range(int(kill_t), int(back))]
    return {"tpsE_before": round(before, 2), "tpsE_after": round(after, 2),
            "tpsE_min_during": min(during) if during else None, "recovery_s": rec}


def start_clients(url: str, s: FailoverSettings, config: TpceConfig, start_at: float,
                  stop_at: float, log_dir: str) -> tuple:
    """Start the client processes; ``(workers, log paths)``."""
    from ..harness.multiprocess import start_worker
    paths = [os.path.join(log_dir, f"client-{i}.jsonl") for i in range(s.processes)]
    workers = [start_worker(url, failover_client, i,
                            (config, s.threads, start_at, stop_at, paths[i]),
                            cluster_options={"record_history": False, "lock_ttl": s.lock_ttl})
               for i in range(s.processes)]
    return workers, paths


def wait_until(t: float, bar, t0: float, stage: str) -> None:
    """Sleep until wall time ``t``, moving the progress bar along the timeline."""
    bar.set_postfix_str(stage)
    while (now := time.time()) < t:
        time.sleep(min(0.1, t - now))
        bar.n = round(min(time.time(), t) - t0, 1)
        bar.refresh()


def inject_failure(nodes, victim, s: FailoverSettings, kill_at: float, bar, t0: float) -> dict:
    """(Pause the replica,) SIGKILL ``victim`` at ``kill_at``, wait for the failover, restart it."""
    replica = nodes.replica_of(victim)
    events = {"victim_port": victim.port, "replica_port": replica.port}
    if s.replica_lag_s:
        wait_until(kill_at - s.replica_lag_s, bar, t0, "running")
        nodes.cut_replication(victim, replica)
        events["replication_cut_at_s"] = round(time.time() - t0, 2)
    wait_until(kill_at, bar, t0, "running")
    nodes.kill(victim)
    events["killed_at_s"] = round(time.time() - t0, 2)
    if s.replica_lag_s:
        nodes.resume(replica)
    bar.set_postfix_str("failover")
    nodes.wait_failover(victim)
    events["failover_done_at_s"] = round(time.time() - t0, 2)
    nodes.restart(victim)                  # a supervisor restarts it: it rejoins as a replica
    events["victim_restarted_at_s"] = round(time.time() - t0, 2)
    return events


def join_clients(workers: list, timeout: float) -> tuple:
    """``(results, failures)``: each client's result, and the tracebacks of clients that died."""
    outs, failures = [], []
    for w in workers:
        r = w.join(timeout)
        if r.error is not None or r.exitcode != 0:
            failures.append(f"client {r.index} (exit {r.exitcode}): "
                            f"{(r.error or '').strip().splitlines()[-1:]}")
        else:
            outs.append(r.result)
    return outs, failures


def reused_timestamps(commits: list) -> list:
    """Timestamps that two acknowledged commits share (as start or commit timestamp), sorted.

    The oracle must never hand a timestamp out twice; a counter that goes back
    (a replica promoted without the last increments) hands out again the
    timestamps of transactions already acknowledged.
    """
    owner: dict = {}
    reused = set()
    for i, c in enumerate(commits):
        for ts in {c["start_ts"], c["commit_ts"]} - {None}:
            if owner.setdefault(ts, i) != i:
                reused.add(ts)
    return sorted(reused)


def verify(w: Tpce, outs: list, commits: list) -> dict:
    """TPC-E's invariants on the store (locks resolved), then the lost acknowledged commits."""
    w.stats.trade_results = sum(1 for c in commits if c["trade_result"])   # as acknowledged
    w.stats.violations = [v for o in outs for v in o["violations"]]
    violations = w.check_invariants()
    lost = lost_commits(w.cluster.bigtable, commits)
    return {"invariants_ok": not violations, "violation_count": len(violations),
            "violations": violations[:20], "lost_commits": len(lost),
            "lost_examples": [{k: c[k] for k in ("name", "start_ts", "commit_ts", "cells")}
                              for c in lost[:5]],
            "acknowledged_commits": len(commits),
            "reused_timestamps": len(reused_timestamps(commits)),
            "reused_timestamp_examples": reused_timestamps(commits)[:10],
            "checked_commits": sum(1 for c in commits if c["cells"])}


def run_on(nodes, s: FailoverSettings, log_dir: str, progress: bool) -> dict:
    """The experiment on a started cluster ``nodes`` (see :func:`run_failover`)."""
    from tqdm.auto import tqdm
    from ..cluster import Cluster
    url = f"{nodes.url}?prefix=fo&wait={s.wait}&timeout=5"
    config = TpceConfig(customers=s.customers, seed=s.seed)
    w = Tpce(Cluster(backend=url, lock_ttl=s.lock_ttl, record_history=False), config)
    victim = nodes.master_for_key(f"fo:{ORACLE_KEY_TAG}")
    t0 = time.time() + 1.0 + 0.3 * s.processes          # the clients start together
    end = t0 + s.before_s + s.after_s
    workers, paths = start_clients(url, s, config, t0, end, log_dir)
    with tqdm(total=round(s.before_s + s.after_s, 1), desc="failover run", unit="s",
              disable=not progress, leave=False,
              bar_format="{l_bar}{bar}| {n:.1f}/{total}s {postfix}") as bar:
        wait_until(t0, bar, t0, "starting")
        events = inject_failure(nodes, victim, s, t0 + s.before_s, bar, t0)
        wait_until(end, bar, t0, "after")
        bar.set_postfix_str("draining and checking")
        outs, client_failures = join_clients(workers, timeout=120.0)
    commits, failures = read_logs(paths)
    result = {"settings": asdict(s), "url": url, **events}
    result.update(timeline_numbers(commits, t0, events["killed_at_s"], s.before_s + s.after_s,
                                   events.get("replication_cut_at_s")))
    result["series"] = per_second(commits, failures, t0, int(s.before_s + s.after_s))
    result.update(verify(w, outs, commits))
    result.update({k: sum(o[k] for o in outs) for k in ("unavailable", "unknown", "error_count")})
    result["client_errors"] = [e for o in outs for e in o["errors"]][:10]
    result["client_failures"] = client_failures
    reasons = Counter()
    for o in outs:
        reasons.update(o["reasons"])
    result["failure_reasons"] = dict(reasons.most_common(6))
    return result


def write_rates(cluster, ops: int, start: int) -> tuple:
    """Raw single-cell writes/s and single-cell write transactions/s, one client thread."""
    t0 = time.perf_counter()
    for i in range(start, start + ops):
        cluster.bigtable.write("wc_raw", f"r{i % 100:03d}", "v", i, i + 1)
    raw = ops / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(start, start + ops // 4):
        t = cluster.begin()
        t.set(f"r{i % 100:03d}", "v", i, table="wc_txn")
        if not t.commit():
            raise RuntimeError("a single-cell write transaction on an idle store aborted")
    return raw, (ops // 4) / (time.perf_counter() - t0)


def wait_cost(nodes, ops: int = 200, rounds: int = 3) -> dict:
    """What ``wait=1`` costs on the started cluster: writes/s with and without WAIT.

    One client thread, rounds interleaved, median kept: raw single-cell writes and
    single-cell write transactions, on keys of their own; ``*_ratio`` is wait=1 / wait=0.
    """
    from ..cluster import Cluster
    clusters = {w: Cluster(backend=f"{nodes.url}?prefix=wc{w}&wait={w}", record_history=False)
                for w in (0, 1)}
    samples = {w: ([], []) for w in clusters}
    for r in range(rounds):
        for w, cluster in clusters.items():
            raw, txn = write_rates(cluster, ops, r * ops)
            samples[w][0].append(raw)
            samples[w][1].append(txn)
    med = {w: (statistics.median(a), statistics.median(b)) for w, (a, b) in samples.items()}
    return {"raw_writes_per_s": {f"wait={w}": round(m[0], 1) for w, m in med.items()},
            "write_transactions_per_s": {f"wait={w}": round(m[1], 1) for w, m in med.items()},
            "raw_ratio": round(med[1][0] / med[0][0], 3),
            "transaction_ratio": round(med[1][1] / med[0][1], 3), "ops": ops, "rounds": rounds}


def run_failover(settings: Optional[FailoverSettings] = None, progress: bool = True,
                 measure_wait_cost: bool = False) -> dict:
    """Start a replicated Redis Cluster, run the experiment, stop the cluster; the JSON dict.

    Keys: ``tpsE_before``, ``tpsE_min_during``, ``tpsE_after``, ``recovery_s``,
    ``lost_commits``, ``invariants_ok``, ``series`` (per second: ``t``,
    ``tpsE``, ``commits``, ``failed_attempts``), the failure's times
    (``killed_at_s``, ``failover_done_at_s``, ...) and the settings. With
    ``measure_wait_cost``, also ``wait_cost`` (:func:`wait_cost`, measured on the
    cluster before the run).
    """
    from ..harness.redis_cluster import ReplicatedRedisCluster
    s = settings or FailoverSettings()
    with tempfile.TemporaryDirectory(prefix="percolator-failover-") as log_dir, \
            ReplicatedRedisCluster(masters=s.masters) as nodes:
        cost = wait_cost(nodes) if measure_wait_cost else None
        result = run_on(nodes, s, log_dir, progress)
    if cost is not None:
        result["wait_cost"] = cost
    return result
