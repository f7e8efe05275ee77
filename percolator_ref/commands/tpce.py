"""``percolator tpce``: the TPC-E-style workload (see percolator_ref.workloads.tpce)."""
from __future__ import annotations

import json
import os
import time

from .arguments import Count, Seconds, backend_argument, refuse

SECONDS = Seconds(3_600)
THREADS = Count(1, 256)
CUSTOMERS = Count(1, 100_000)
BROKERS = Count(1, 10_000)
SECURITIES = Count(1, 10_000)
LATENCY = Seconds(1.0, zero=True)
PROCESSES = Count(1, 64)
SEED = Count(0, 2 ** 32 - 1)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "tpce", help="run the TPC-E-style trading workload and check its invariants",
        description="Emulator threads run Trade-Order, Trade-Result, Market-Feed, "
                    "Customer-Position and Trade-Status in TPC-E's mix for a number of "
                    "seconds; prints tpsE over that window (what finishes after it is "
                    "reported apart), abort rate, latency percentiles and the result of "
                    "the consistency checks made after the run.")
    p.add_argument("--seconds", type=SECONDS, default=5.0,
                   help=f"timed run length, {SECONDS} (default 5)")
    p.add_argument("--threads", type=THREADS, default=4,
                   help=f"emulator threads (clients), {THREADS}")
    p.add_argument("--customers", type=CUSTOMERS, default=200,
                   help=f"accounts (one per customer), {CUSTOMERS}")
    p.add_argument("--brokers", type=BROKERS, default=None,
                   help=f"brokers, {BROKERS} (default: one per 100 customers)")
    p.add_argument("--securities", type=SECURITIES, default=20, help=f"{SECURITIES}")
    p.add_argument("--latency", type=LATENCY, default=0.0,
                   help=f"modeled round trip per row transaction, {LATENCY} (e.g. 0.002)")
    p.add_argument("--broker-fix", action="store_true",
                   help="per-trade commission side rows aggregated later (no broker hotspot)")
    p.add_argument("--aggregation", default="observer",
                   choices=["observer", "observer-per-trade", "periodic"],
                   help="with --broker-fix, how side rows are folded into the broker rows: "
                        "an observer per group of side rows woken by weak notifications "
                        "(default), an observer run per trade, or a periodic transaction")
    p.add_argument("--seed", type=SEED, default=0, help=f"{SEED}")
    p.add_argument("--backend", type=backend_argument("redis"), default=None,
                   help="store URL for Cluster(backend=...), e.g. redis://127.0.0.1:6390/0; "
                        "'redis' starts a throwaway local redis-server for the run. On Redis "
                        "the run uses a fresh key prefix and deletes its keys afterwards")
    p.add_argument("--processes", type=PROCESSES, default=None,
                   help=f"client processes sharing the store (needs a Redis backend), "
                        f"{PROCESSES}; each runs --threads emulator threads")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _fresh_prefix(url: str) -> str:
    """The store URL under a key prefix of this run's own (Redis), so runs never mix."""
    from urllib.parse import parse_qs, urlparse
    from ..stores import url_with
    base = parse_qs(urlparse(url).query).get("prefix", ["pc"])[-1]
    return url_with(url, prefix=f"{base}-tpce-{os.getpid()}-{int(time.time() * 1000)}")


def _run_on(url, args, config) -> tuple:
    """``(result, violations, workload)`` of one run on the store at ``url``."""
    from ..workloads import tpce
    if args.processes is not None:
        result, workload = tpce.run_processes(
            url, config, processes=args.processes, threads=args.threads, seconds=args.seconds,
            latency=args.latency, progress=not args.no_progress)
        return result, result["violations"], workload
    workload = tpce.Tpce(tpce.new_cluster(backend=url), config)
    result = workload.run_threads(threads=args.threads, seconds=args.seconds,
                                  latency=args.latency, progress=not args.no_progress)
    return result, workload.check_invariants(), workload


def run(args) -> int:
    from ..stores import is_redis
    from . import backend_url
    from ..errors import StoreUnavailable
    from ..workloads import tpce
    try:
        config = tpce.TpceConfig(customers=args.customers, securities=args.securities,
                                 brokers=args.brokers, broker_fix=args.broker_fix,
                                 aggregation=args.aggregation, seed=args.seed)
        if args.processes is not None and not is_redis(args.backend):
            raise ValueError("--processes needs a store shared by processes: "
                             "--backend redis or redis://HOST:PORT/DB")
        with backend_url(args.backend) as url:
            if is_redis(url):
                url = _fresh_prefix(url)
            try:
                result, violations, workload = _run_on(url, args, config)
            finally:
                if is_redis(url):
                    _flush(url)
    except StoreUnavailable as e:
        return refuse("tpce", f"--backend {args.backend}: {e}")
    except (TypeError, ValueError) as e:
        return refuse("tpce", e)
    result.update(invariants_ok=not violations, violations=violations[:50],
                  violation_count=len(violations), broker_fix=args.broker_fix,
                  aggregation=args.aggregation if args.broker_fix else None,
                  customers=args.customers, brokers=config.n_brokers, seed=args.seed,
                  backend=args.backend or "memory")
    _report(result, violations, args.json)
    return 0 if not violations else 1


def _report(result: dict, violations: list, as_json: bool) -> None:
    """Print the run's result: one JSON object, or one line per figure."""
    if as_json:
        print(json.dumps(result, sort_keys=True))
        return
    for key in ("threads", "seconds", "tpsE", "trade_results", "committed", "aborts",
                "abort_rate", "trade_result_abort_rate", "latency_ms_p50", "latency_ms_p99",
                "cpu_ms_per_trade_result", "stop_seconds", "side_rows_unfolded",
                "invariants_ok"):
        if key in result:
            print(f"{key:24} {result[key]}")
    for v in violations[:20]:
        print(f"violation: {v}")


def _flush(url: str) -> None:
    from ..stores.backend import open_backend
    store = open_backend(url).bigtable
    store.flush()
    store.close()
