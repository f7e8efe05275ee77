"""``percolator scale``: TPC-E scaling by deterministic simulation (see percolator_ref.sim)."""
from __future__ import annotations

import json
import sys

FULL_SIZES = (1, 10, 100, 1000)
QUICK_SIZES = (1, 4, 16, 32)
QUICK = {"reference_machines": 32}
INT_SETTINGS = ("clients_per_machine", "customers_per_machine", "securities_per_machine",
                "brokers", "worker_cores", "tablet_server_cores", "reference_machines")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scale", help="TPC-E scaling from 1 to 1,000 simulated machines (deterministic)",
        description="Runs the real TPC-E-style transactions of percolator_ref on simulated "
                    "time: each simulated machine has a worker and a tablet server, one "
                    "timestamp oracle and one lock service serve all, with service times "
                    "measured on this machine (printed). Reports tpsE, efficiency = "
                    "tpsE(n) / (n * tpsE(1)), abort rate and oracle utilization per size, "
                    "and checks the TPC-E invariants after every run.")
    p.add_argument("--machines", default=None,
                   help="comma-separated sizes (default 1,10,100,1000; --quick: 1,4,16,32)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes, fewer runs per size (a test-sized run, seconds)")
    p.add_argument("--no-broker-fix", action="store_true",
                   help="Trade-Result updates the broker's row (the hotspot)")
    p.add_argument("--no-oracle-batching", action="store_true",
                   help="one oracle request per timestamp (no batching per worker)")
    p.add_argument("--truetime", type=int, default=None, metavar="EPSILON_US",
                   help="no oracle: each machine's timestamps from its own simulated TrueTime "
                        "with this uncertainty in microseconds (Spanner's is 7000), with commit "
                        "wait and reads at a safe time (notebook 10); try --warmup 0.2 "
                        "--measure 0.1, as each transaction then waits milliseconds")
    p.add_argument("--calibration", metavar="FILE", default=None,
                   help="service times from a JSON file (a calibration object or the output "
                        "of scale --json) instead of measuring them")
    add_model_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=1,
                   help="run the sweep under this many seeds (--seed, --seed + 1, ...) and "
                        "report per size the mean and a 95%% interval of each figure")
    p.add_argument("--oracle-slowdown", type=float, default=1.0, metavar="K",
                   help="multiply the oracle's service times by K: few machines then load "
                        "the oracle as K times as many would (for long windows at small cost)")
    p.add_argument("--carrier", choices=("threads", "greenlets"), default=None,
                   help="how simulated clients keep their call stacks (default: greenlets "
                        "when the greenlet package is installed; the results are the same)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def add_model_arguments(p) -> None:
    """The simulated system's sizes and the run's simulated durations."""
    p.add_argument("--clients-per-machine", type=int, default=16,
                   help="emulator clients per machine (concurrent transactions per worker)")
    p.add_argument("--customers-per-machine", type=int, default=20)
    p.add_argument("--securities-per-machine", type=int, default=10)
    p.add_argument("--brokers", type=int, default=10,
                   help="brokers (fixed: each serves more customers as machines are added)")
    p.add_argument("--worker-cores", type=int, default=1, help="a worker's cores per machine")
    p.add_argument("--tablet-server-cores", type=int, default=1,
                   help="a tablet server's cores per machine")
    p.add_argument("--reference-machines", type=int, default=100,
                   help="a size below this is measured as several runs pooled, to total "
                        "about this many machine-runs (default 100; --quick: 32)")
    p.add_argument("--warmup", type=float, default=None, metavar="SECONDS",
                   help="simulated seconds before measuring, while orders and results fill "
                        "the pipeline (default 0.015)")
    p.add_argument("--measure", type=float, default=None, metavar="SECONDS",
                   help="simulated seconds measured per run, after the warm-up (default 0.005)")


def parse_sizes(text, quick: bool) -> list:
    """The ``--machines`` list, each an int >= 1."""
    if text is None:
        return list(QUICK_SIZES if quick else FULL_SIZES)
    sizes = []
    for part in str(text).split(","):
        try:
            n = int(part.strip())
        except ValueError:
            raise ValueError(f"--machines must be comma-separated ints, got {text!r}") from None
        if n < 1:
            raise ValueError(f"--machines must be >= 1 each, got {n}")
        sizes.append(n)
    return sizes


def settings_of(args):
    """The :class:`ScaleSettings` the arguments ask for (errors name the argument)."""
    from ..sim.scaling import ScaleSettings
    for name in INT_SETTINGS:
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    kw = {}
    for name in ("warmup", "measure"):
        value = getattr(args, name)
        if value is not None:
            if not value > 0:
                raise ValueError(f"--{name} must be > 0 simulated seconds, got {value}")
            kw[f"{name}_s"] = value
    kw.update({name: getattr(args, name) for name in INT_SETTINGS})
    if args.quick and args.reference_machines == 100:       # the default, unless asked
        kw.update(QUICK)
    if args.truetime is not None and args.truetime < 0:
        raise ValueError(f"--truetime must be >= 0 microseconds, got {args.truetime}")
    return ScaleSettings(broker_fix=not args.no_broker_fix,
                         oracle_batching=not args.no_oracle_batching, seed=args.seed,
                         truetime_epsilon_us=args.truetime, **kw)


def calibration_of(args, progress: bool):
    """Loaded from ``--calibration``, or measured now (announced on stderr)."""
    from ..sim import calibration
    if args.calibration is not None:
        return calibration.load(args.calibration)
    if progress:
        print("percolator scale: measuring service times on this machine ...", file=sys.stderr)
    return calibration.measure()


def run(args) -> int:
    from ..sim.scaling import sweep
    from ..sim.seeds import slower_oracle, sweep_seeds
    progress = not args.no_progress
    try:
        sizes = parse_sizes(args.machines, args.quick)
        settings = settings_of(args)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
        if not args.oracle_slowdown >= 1:
            raise ValueError(f"--oracle-slowdown must be >= 1, got {args.oracle_slowdown}")
        cal = slower_oracle(calibration_of(args, progress), args.oracle_slowdown)
    except (TypeError, ValueError) as e:
        print(f"percolator scale: {e}", file=sys.stderr)
        return 2
    if args.seeds > 1:
        result = sweep_seeds(sizes, settings, cal, args.seeds, progress, args.carrier)
    else:
        result = sweep(sizes, settings, cal, progress=progress, carrier=args.carrier)
    result["oracle_slowdown"] = args.oracle_slowdown
    result["calibration"] = cal.to_dict()
    result["invariants_ok"] = all(p["invariants_ok"] for p in result["points"])
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print_table(result)
    return 0 if result["invariants_ok"] else 1


def print_table(result: dict) -> None:
    """The calibration, then one line per size."""
    print("calibration (seconds):")
    for key, value in result["calibration"].items():
        print(f"  {key:40} {value:.3g}" if isinstance(value, float) else f"  {key:40} {value}")
    keys = ("machines", "tpsE", "efficiency", "abort_rate", "oracle_utilization",
            "oracle_mean_batch", "tablet_server_utilization", "latency_ms_p50", "invariants_ok")
    print(" ".join(f"{k:>14}" for k in keys))
    for p in result["points"]:
        print(" ".join(f"{p[k]!s:>14}" for k in keys))
    for p in result["points"]:
        for v in p["violations"]:
            print(f"violation at {p['machines']} machines: {v}")
