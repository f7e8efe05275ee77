"""``percolator scale``: TPC-E scaling by deterministic simulation (see percolator_ref.sim)."""
from __future__ import annotations

import argparse
import json
import sys

from .arguments import Count, Number, Seconds, refuse

MACHINES = Count(1, 2_000)
PER_MACHINE = Count(1, 1_000)
BROKERS = Count(1, 100_000)
CORES = Count(1, 64)
SIMULATED = Seconds(1.0)
SEEDS = Count(1, 100)
EPSILON_US = Count(0, 1_000_000)
SLOWDOWN = Number(1.0, 10_000.0)
SEED = Count(0, 2 ** 32 - 1)
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
                   help=f"comma-separated sizes, each {MACHINES} (default 1,10,100,1000; "
                        f"--quick: 1,4,16,32)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes, fewer runs per size (a test-sized run, seconds)")
    p.add_argument("--no-broker-fix", action="store_true",
                   help="Trade-Result updates the broker's row (the hotspot)")
    p.add_argument("--no-oracle-batching", action="store_true",
                   help="one oracle request per timestamp (no batching per worker)")
    p.add_argument("--truetime", type=EPSILON_US, default=None, metavar="EPSILON_US",
                   help=f"no oracle: each machine's timestamps from its own simulated TrueTime "
                        f"with this uncertainty in microseconds, {EPSILON_US} (Spanner's is "
                        f"7000), with commit "
                        "wait and reads at a safe time (notebook 10); try --warmup 0.2 "
                        "--measure 0.1, as each transaction then waits milliseconds")
    p.add_argument("--calibration", metavar="FILE", default=None,
                   help="service times from a JSON file (a calibration object or the output "
                        "of scale --json) instead of measuring them")
    add_model_arguments(p)
    add_seed_arguments(p)
    p.add_argument("--carrier", choices=("threads", "greenlets"), default=None,
                   help="how simulated clients keep their call stacks (default: greenlets "
                        "when the greenlet package is installed; the results are the same)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--merge", nargs="+", metavar="FILE", default=None,
                   help="run nothing: pool the JSON outputs of single-seed runs of one sweep "
                        "(--seed k, k + 1, ...; same sizes and settings) into the result "
                        "--seeds N gives, so a long sweep can run one seed at a time")
    p.set_defaults(func=run)


def add_seed_arguments(p) -> None:
    """The seeds and the oracle's slowdown."""
    p.add_argument("--seed", type=SEED, default=0, help=f"{SEED}")
    p.add_argument("--seeds", type=SEEDS, default=1,
                   help=f"run the sweep under this many seeds (--seed, --seed + 1, ...) and "
                        f"report per size the mean and a 95%% interval of each figure, {SEEDS}")
    p.add_argument("--oracle-slowdown", type=SLOWDOWN, default=1.0, metavar="K",
                   help=f"multiply the oracle's service times by K, {SLOWDOWN}: few machines "
                        f"then load the oracle as K times as many would (for long windows at "
                        f"small cost)")


def add_model_arguments(p) -> None:
    """The simulated system's sizes and the run's simulated durations."""
    p.add_argument("--clients-per-machine", type=PER_MACHINE, default=16,
                   help=f"emulator clients per machine (concurrent transactions per worker), "
                        f"{PER_MACHINE}")
    p.add_argument("--customers-per-machine", type=PER_MACHINE, default=20, help=f"{PER_MACHINE}")
    p.add_argument("--securities-per-machine", type=PER_MACHINE, default=10,
                   help=f"{PER_MACHINE}")
    p.add_argument("--brokers", type=BROKERS, default=10,
                   help=f"brokers (fixed: each serves more customers as machines are added), "
                        f"{BROKERS}")
    p.add_argument("--worker-cores", type=CORES, default=1,
                   help=f"a worker's cores per machine, {CORES}")
    p.add_argument("--tablet-server-cores", type=CORES, default=1,
                   help=f"a tablet server's cores per machine, {CORES}")
    p.add_argument("--reference-machines", type=MACHINES, default=100,
                   help=f"a size below this is measured as several runs pooled, to total "
                        f"about this many machine-runs, {MACHINES} (default 100; --quick: 32)")
    p.add_argument("--warmup", type=SIMULATED, default=None, metavar="SECONDS",
                   help=f"simulated seconds before measuring, while orders and results fill "
                        f"the pipeline, {SIMULATED} (default 0.015)")
    p.add_argument("--measure", type=SIMULATED, default=None, metavar="SECONDS",
                   help=f"simulated seconds measured per run, after the warm-up, {SIMULATED} "
                        f"(default 0.005)")


def parse_sizes(text, quick: bool) -> list:
    """The ``--machines`` list, each an int >= 1."""
    if text is None:
        return list(QUICK_SIZES if quick else FULL_SIZES)
    sizes = []
    for part in str(text).split(","):
        try:
            sizes.append(MACHINES(part))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"--machines: each size {e}") from None
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


def merged(args) -> int:
    """``--merge``: the several-seeds result of single-seed outputs (errors name the file)."""
    from ..sim.seeds import merge_seed_runs
    runs = []
    try:
        for path in args.merge:
            try:
                with open(path, encoding="utf-8") as f:
                    runs.append(json.load(f))
            except (OSError, ValueError) as e:
                raise ValueError(f"--merge {path}: {e}") from None
            if not isinstance(runs[-1], dict) or "settings" not in runs[-1]:
                raise ValueError(f"--merge {path}: not the JSON output of percolator scale")
        result = merge_seed_runs(runs)
    except (KeyError, TypeError, ValueError) as e:
        return refuse("scale", ValueError(f"--merge: {e}" if "--merge" not in str(e) else e))
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print_table(result)
    return 0 if result["invariants_ok"] else 1


def run(args) -> int:
    from ..sim.scaling import sweep
    from ..sim.seeds import slower_oracle, sweep_seeds
    if args.merge is not None:
        return merged(args)
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
        return refuse("scale", e)
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
