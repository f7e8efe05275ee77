"""``percolator demo transfer|crash``: the stepper's frames as text tables.

``transfer`` prints the paper's Figure 4 (Bob sends Joe $7, start 7,
commit 8) one single-row Bigtable transaction per frame. ``crash`` crashes
the transfer's client before its N-th row transaction (``--before``, default
5: right before the commit point) and shows a later reader cleaning up.
"""
from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo", help="print the protocol's Bigtable writes step by step (Figure 4)",
        description=__doc__.split("\n\n")[1])
    demos = parser.add_subparsers(dest="demo", metavar="DEMO", required=True)
    transfer = demos.add_parser("transfer", help="the paper's Figure 4 transfer, frame by frame")
    transfer.set_defaults(func=run_transfer)
    crash = demos.add_parser("crash", help="crash the transfer's client, watch the cleanup")
    crash.add_argument("--before", type=int, default=5, metavar="N",
                       help="crash before the transfer's N-th row transaction "
                            "(1..6: get Bob, get Joe, prewrite Bob, prewrite Joe, commit Bob, "
                            "commit Joe; default 5 = right before the commit point)")
    crash.set_defaults(func=run_crash)


def run_transfer(args) -> int:
    from ..viz import figure4_stepper
    stepper = figure4_stepper()
    try:
        stepper.run()
        print(stepper.transcript())
    finally:
        stepper.close()
    return 0


def run_crash(args) -> int:
    from ..viz import figure4_stepper
    if not 1 <= args.before <= 6:
        raise SystemExit(f"percolator demo crash: --before must be in 1..6, got {args.before}")
    stepper = figure4_stepper()
    try:
        for _ in range(args.before - 1):
            stepper.step("transfer")
        stepper.crash("transfer")
        stepper.run()
        print(stepper.transcript())
    finally:
        stepper.close()
    return 0
