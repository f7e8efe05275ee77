"""``percolator soak``: transfers, crashes, observers, readers (and server kills), then an audit."""
from __future__ import annotations

import json
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "soak", help="a long run with crashes (and Redis server kills), then an audit",
        description="Run bank transfers with random client crashes, observers with weak "
                    "notifications and snapshot readers; on a throwaway Redis (--backend "
                    "redis) also SIGKILL the server and restart it from its append-only file. "
                    "Then report transactions, crashes, server_kills, anomalies, lost_commits, "
                    "stuck_locks and unobserved_notifications (all four must be 0).")
    p.add_argument("--seconds", type=float, default=60.0, help="wall time to run (default 60)")
    p.add_argument("--backend", default=None,
                   help="a store URL, or 'redis' for a throwaway local redis-server that is "
                        "also killed and restarted during the run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=3, help="transfer threads")
    p.add_argument("--kill-every", type=float, default=2.0,
                   help="seconds between server kills (throwaway Redis only)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cluster import Cluster
    from ..workloads.soak import run_soak
    if args.backend == "redis":
        from ..harness.redis_server import LocalRedisServer
        if not LocalRedisServer.available():
            raise SystemExit("percolator soak: --backend redis needs redis-server on PATH")
        with LocalRedisServer(persistent=True) as server:
            report = run_soak(Cluster(backend=server.url, lock_ttl=0.5), args.seconds,
                              seed=args.seed, threads=args.threads, server=server,
                              kill_every=args.kill_every, progress=not args.no_progress)
    else:
        report = run_soak(Cluster(backend=args.backend, lock_ttl=0.5), args.seconds,
                          seed=args.seed, threads=args.threads, progress=not args.no_progress)
    out = report.to_json()
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for key, value in out.items():
            if key != "problems":
                print(f"{key:26} {value}")
        for problem in out["problems"]:
            print("  problem:", problem)
    if not report.ok:
        print("soak: the audit found problems", file=sys.stderr)
    return 0 if report.ok else 1
