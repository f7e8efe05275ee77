"""``percolator failover``: TPC-E while a Redis Cluster master is SIGKILLed (see
percolator_ref.workloads.failover). The kit's own experiment, not a figure of the paper."""
from __future__ import annotations

import json

from .arguments import Count, Seconds, refuse

PHASE = Seconds(3_600)
LAG = Seconds(3_600, zero=True)
PROCESSES = Count(1, 32)
THREADS = Count(1, 32)
CUSTOMERS = Count(1, 100_000)
SEED = Count(0, 2 ** 32 - 1)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "failover", help="kill a store node under TPC-E load: throughput, recovery, lost commits",
        description="Start a Redis Cluster with one replica per master on loopback, run the "
                    "TPC-E workload in client processes, SIGKILL the master serving the "
                    "timestamp oracle mid-run and let its replica take over. Prints tpsE "
                    "before, during and after, the recovery time, the commits acknowledged "
                    "to a client but missing afterwards, TPC-E's invariants and a per-second "
                    "series. Needs redis-server and redis-cli on PATH.")
    p.add_argument("--before", type=PHASE, default=4.0,
                   help=f"seconds of load before the kill, {PHASE}")
    p.add_argument("--after", type=PHASE, default=8.0,
                   help=f"seconds of load after the kill, {PHASE}")
    p.add_argument("--processes", type=PROCESSES, default=3,
                   help=f"client processes, {PROCESSES}")
    p.add_argument("--threads", type=THREADS, default=2,
                   help=f"emulator threads per process, {THREADS}")
    p.add_argument("--customers", type=CUSTOMERS, default=100, help=f"{CUSTOMERS}")
    p.add_argument("--wait", type=int, choices=(0, 1), default=1,
                   help="1 (default): each write a commit depends on is acknowledged by the "
                        "replica before the client hears of it (WAIT); 0: asynchronous "
                        "replication")
    p.add_argument("--replica-lag", type=LAG, default=0.0,
                   help=f"cut the victim's replica off this many seconds before the kill, "
                        f"{LAG}, at most --before (exposes what --wait protects)")
    p.add_argument("--compare", action="store_true",
                   help="also run with the other --wait setting (same settings) and report it "
                        "under 'other_wait'; and measure what WAIT costs per write on the "
                        "cluster ('wait_cost': writes/s with and without it, interleaved)")
    p.add_argument("--seed", type=SEED, default=0, help=f"{SEED}")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def settings_from(args, wait: int):
    from ..workloads.failover import FailoverSettings
    return FailoverSettings(before_s=args.before, after_s=args.after, processes=args.processes,
                            threads=args.threads, wait=wait, replica_lag_s=args.replica_lag,
                            customers=args.customers, seed=args.seed)


def run(args) -> int:
    from ..harness.redis_cluster import cluster_tools_available
    from ..workloads.failover import run_failover
    try:
        if args.replica_lag > args.before:
            raise ValueError(f"--replica-lag ({args.replica_lag} s) must be at most --before "
                             f"({args.before} s): the cut happens during the run")
        settings = settings_from(args, args.wait)
        if not cluster_tools_available():
            raise ValueError("percolator failover needs redis-server and redis-cli on PATH "
                             "(apt-get install redis-server)")
        result = run_failover(settings, progress=not args.no_progress,
                              measure_wait_cost=args.compare)
        if args.compare:
            other = run_failover(settings_from(args, 1 - args.wait),
                                 progress=not args.no_progress)
            result["other_wait"] = other
            result["tpsE_before_other_wait"] = other["tpsE_before"]
    except (TypeError, ValueError, RuntimeError) as e:
        return refuse("failover", e)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(format_report(result))
    return 0 if result["invariants_ok"] and result["lost_commits"] == 0 else 1


def format_report(result: dict) -> str:
    lines = [f"wait={result['settings']['wait']}  replica lag {result['settings']['replica_lag_s']} s"
             f"  killed port {result['victim_port']} at {result['killed_at_s']} s, failover done "
             f"at {result['failover_done_at_s']} s"]
    for key in ("tpsE_before", "tpsE_min_during", "tpsE_after", "recovery_s", "lost_commits",
                "acknowledged_commits", "invariants_ok", "violation_count"):
        lines.append(f"{key:22} {result[key]}")
    lines.append("t(s)  tpsE  commits  failed attempts")
    lines += [f"{r['t']:4}  {r['tpsE']:4}  {r['commits']:7}  {r['failed_attempts']:6}"
              for r in result["series"]]
    return "\n".join(lines)
