"""``percolator bench``: the paper's Figure 8, with operation counts (see percolator_ref.bench)."""
from __future__ import annotations

import json

from .arguments import Count, Seconds, backend_argument, refuse

OPS = Count(1, 1_000_000)
ROUNDS = Count(1, 100)
LATENCY = Seconds(1.0, zero=True)
CLIENTS = Count(1, 64)
THREADS = Count(1, 64)
SECONDS = Seconds(600)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bench", help="Figure 8: raw Bigtable vs Percolator reads/s and writes/s",
        description="Measure raw single-cell Bigtable reads/writes against Percolator "
                    "single-cell read and write transactions on the same store, beside the "
                    "paper's 0.94 and 0.23; also a bare dict, itertools.count and SQLite in "
                    "memory, and the count of row transactions and oracle calls per operation.")
    p.add_argument("--quick", action="store_true", help="a short run (under 30 s)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--backend", type=backend_argument("redis"), default=None,
                   help="store URL passed to Cluster(backend=...), e.g. redis://127.0.0.1:6390/0; "
                        "'redis' starts a throwaway local redis-server for the run. Over Redis "
                        "both ways of a check-and-write step are measured: 'separate' (read "
                        "under a lease, then write: 2 round trips) and 'combined' (one script, "
                        "the paper's conditional mutation), with round trips per operation")
    p.add_argument("--ops", type=OPS, default=None,
                   help=f"operations per measurement, {OPS}")
    p.add_argument("--rounds", type=ROUNDS, default=None,
                   help=f"interleaved rounds (median), {ROUNDS}")
    p.add_argument("--latency", type=LATENCY, default=0.0,
                   help=f"modeled round trip per row transaction in the main run, {LATENCY}")
    p.add_argument("--model-latency", type=LATENCY, default=0.0002,
                   help=f"also run with this modeled round trip per row transaction, "
                        f"{LATENCY} (0 to skip)")
    add_clients_arguments(p)
    p.add_argument("--store-cpu", action="store_true",
                   help="with a Redis backend: the server's CPU per operation (INFO cpu), the "
                        "oracle measured apart, and the ratios a store-bound server would show "
                        "(§3.2's tablet server was the bottleneck), beside the wall-clock ratios")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def add_clients_arguments(p) -> None:
    """``--clients`` and the arguments that go with it."""
    p.add_argument("--clients", type=CLIENTS, default=None,
                   help="Figure 8 with this many concurrent client PROCESSES (needs a Redis "
                        "backend): each runs --threads threads and has a batching oracle "
                        "client; reports clients, the three ratios, server_calls_per_op (the "
                        f"oracle amortized) and client/server CPU per operation; {CLIENTS}")
    p.add_argument("--threads", type=THREADS, default=4,
                   help=f"with --clients: concurrent operations per client process, {THREADS}")
    p.add_argument("--seconds", type=SECONDS, default=None,
                   help=f"with --clients: seconds per measured phase, {SECONDS} "
                        f"(default 1, --quick 0.5)")
    p.add_argument("--profile", action="store_true",
                   help="with --clients: add a cProfile of one client thread's raw and "
                        "Percolator reads (where the client's CPU goes)")


def run_clients(args) -> int:
    """``--clients N``: Figure 8 with N client processes on a Redis store."""
    from ..bench import clients as bench_clients
    from ..stores import is_redis
    from . import backend_url
    from ..errors import StoreUnavailable
    try:
        if not is_redis(args.backend):
            raise ValueError("--clients needs a store shared by processes: --backend redis "
                             "or redis://HOST:PORT/DB")
        bench_clients.check_count(args.clients, "--clients")
        bench_clients.check_count(args.threads, "--threads")
        seconds = args.seconds if args.seconds is not None else (0.5 if args.quick else 1.0)
        bench_clients.check_seconds(seconds, "--seconds")
        rounds = args.rounds or (2 if args.quick else 3)
        with backend_url(args.backend) as url:
            url = bench_clients.fresh_prefix_url(url)
            result = bench_clients.run_clients(url, args.clients, args.threads, seconds,
                                               rounds, progress=not args.no_progress)
            if args.profile:
                result["profile"] = {op: bench_clients.profile_client(url, op)
                                     for op in ("bigtable_read", "percolator_get")}
    except StoreUnavailable as e:
        return refuse("bench", f"--backend {args.backend}: {e}")
    except (TypeError, ValueError, RuntimeError) as e:
        return refuse("bench", e)
    result["backend"] = ("redis (a throwaway local redis-server)" if args.backend == "redis"
                         else args.backend)
    print(json.dumps(result, sort_keys=True) if args.json
          else bench_clients.format_report(result))
    return 0


def run_store_cpu(args) -> int:
    """``--store-cpu``: the server's CPU per Figure 8 operation on a Redis store."""
    from ..bench import store as bench_store
    from ..stores import is_redis
    from . import backend_url
    from ..errors import StoreUnavailable
    try:
        if not is_redis(args.backend):
            raise ValueError("--store-cpu measures a server's CPU: --backend redis "
                             "or redis://HOST:PORT/DB")
        ops = args.ops or (200 if args.quick else 1000)
        with backend_url(args.backend) as url:
            result = bench_store.run_store_cpu(url, ops=ops, rounds=args.rounds or 3)
    except (TypeError, ValueError, StoreUnavailable) as e:
        return refuse("bench", e)
    print(json.dumps(result, sort_keys=True))
    return 0


def run(args) -> int:
    if args.store_cpu:
        return run_store_cpu(args)
    if args.clients is not None:
        return run_clients(args)
    from .. import bench
    from ..stores import is_redis
    from . import backend_url
    from ..errors import StoreUnavailable
    redis = is_redis(args.backend)
    ops = args.ops or ((500 if args.quick else 3000) if redis else (2000 if args.quick else 20000))
    rounds = args.rounds or (3 if args.quick else 5)
    progress = not args.no_progress
    try:
        with backend_url(args.backend) as url:
            result = bench.run_figure8(ops=ops, rounds=rounds, backend=url,
                                       latency=args.latency, progress=progress)
            if args.model_latency and not redis:      # Redis has real round trips
                result["modeled_latency"] = bench.run_modeled_latency(
                    args.model_latency, ops=max(ops // 10, 50), rounds=rounds,
                    backend=url, progress=progress)
    except StoreUnavailable as e:
        return refuse("bench", f"--backend {args.backend}: {e}")
    except (TypeError, ValueError) as e:
        return refuse("bench", e)
    if args.backend == "redis":
        result["backend"] = "redis (a throwaway local redis-server)"
    result["rpc_model"] = bench.rpc_model(result["counts"])
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(bench.format_report(result))
    return 0
