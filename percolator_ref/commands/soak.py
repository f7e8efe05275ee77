"""``percolator soak``: transfers, crashes, observers, readers (and server kills), then an audit."""
from __future__ import annotations

import json
import sys

from .arguments import Count, Seconds, backend_argument, refuse

SECONDS = Seconds(86_400)
THREADS = Count(1, 64)
SEED = Count(0, 2 ** 32 - 1)
KILL_EVERY = Seconds(3_600)
INTERVAL = Seconds(600)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "soak", help="a long run with crashes (and Redis server kills), then an audit",
        description="Run bank transfers with random client crashes, observers with weak "
                    "notifications and snapshot readers; on a throwaway Redis (--backend "
                    "redis) also SIGKILL the server and restart it from its append-only file; "
                    "on a throwaway replicated Redis Cluster (--backend cluster --nemesis) "
                    "SIGKILL masters and replicas and SIGSTOP masters past the node timeout. "
                    "Then report transactions, crashes, server_kills, anomalies, lost_commits, "
                    "stuck_locks, unobserved_notifications and reissued_timestamps (the last "
                    "five must be 0). Every server it starts is stopped at the end.")
    p.add_argument("--seconds", type=SECONDS, default=60.0,
                   help=f"wall time to run, {SECONDS} (default 60)")
    p.add_argument("--backend", type=backend_argument("redis", "cluster"), default=None,
                   help="memory (default), a store URL, 'redis' for a throwaway local "
                        "redis-server that is also killed and restarted during the run, or "
                        "'cluster' for a throwaway Redis Cluster with replicas (with --nemesis)")
    p.add_argument("--nemesis", action="store_true",
                   help="with --backend cluster: kill, pause and restart its nodes during the "
                        "run (see percolator_ref.workloads.nemesis)")
    p.add_argument("--wait", type=Count(0, 1), default=1,
                   help="with --nemesis: 1 (default) every write a commit depends on waits "
                        "for the replica (WAIT); 0 asynchronous replication")
    p.add_argument("--nemesis-interval", type=INTERVAL, default=2.0,
                   help=f"with --nemesis: calm seconds between its operations, {INTERVAL} "
                        "(default 2)")
    p.add_argument("--seed", type=SEED, default=0, help=f"{SEED}")
    p.add_argument("--threads", type=THREADS, default=3, help=f"transfer threads, {THREADS}")
    p.add_argument("--kill-every", type=KILL_EVERY, default=2.0,
                   help=f"seconds between server kills (throwaway Redis only), {KILL_EVERY}")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def check(args) -> None:
    """The combinations the parser cannot see (ValueError naming the argument)."""
    if args.nemesis != (args.backend == "cluster"):
        raise ValueError("--nemesis and --backend cluster go together (the nemesis kills "
                         "the nodes of a throwaway replicated Redis Cluster)")
    if args.backend in ("redis", "cluster"):
        from ..harness.redis_cluster import cluster_tools_available
        from ..harness.redis_server import LocalRedisServer
        if not (LocalRedisServer.available() and (args.backend == "redis"
                                                  or cluster_tools_available())):
            raise ValueError(f"--backend {args.backend} needs redis-server (and redis-cli) "
                             f"on PATH")


def soak(args) -> dict:
    """Run the soak the arguments ask for; its JSON dict."""
    from ..cluster import Cluster
    from ..workloads.soak import run_soak
    progress = not args.no_progress
    if args.backend == "cluster":
        from ..workloads.nemesis import NemesisSettings, run_nemesis
        return run_nemesis(NemesisSettings(seconds=args.seconds, wait=args.wait,
                                           interval=args.nemesis_interval,
                                           threads=args.threads, seed=args.seed), progress)
    if args.backend == "redis":
        from ..harness.redis_server import LocalRedisServer
        with LocalRedisServer(persistent=True) as server:
            return run_soak(Cluster(backend=server.url, lock_ttl=0.5), args.seconds,
                            seed=args.seed, threads=args.threads, server=server,
                            kill_every=args.kill_every, progress=progress).to_json()
    return run_soak(Cluster(backend=args.backend, lock_ttl=0.5), args.seconds, seed=args.seed,
                    threads=args.threads, progress=progress).to_json()


def run(args) -> int:
    from ..errors import StoreUnavailable
    try:
        check(args)
        out = soak(args)
    except StoreUnavailable as e:
        return refuse("soak", f"--backend {args.backend}: {e}")
    except (TypeError, ValueError, RuntimeError) as e:
        return refuse("soak", e)
    except KeyboardInterrupt:
        print("percolator soak: interrupted; every server it started was stopped",
              file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for key, value in out.items():
            if key not in ("problems", "nemesis"):
                print(f"{key:26} {value}")
        for key, value in out.get("nemesis", {}).items():
            if key != "events":
                print(f"nemesis {key:18} {value}")
        for problem in out["problems"]:
            print("  problem:", problem)
    if not out["ok"]:
        print("soak: the audit found problems", file=sys.stderr)
    return 0 if out["ok"] else 1
