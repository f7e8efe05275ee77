"""``percolator demo transfer|crash``: the stepper's frames as text tables.

``transfer`` prints the paper's Figure 4 (Bob sends Joe $7, start 7,
commit 8) one single-row Bigtable transaction per frame. ``crash`` crashes
the transfer's client right after its N-th row transaction (``--after``,
default 4: after its last prewrite, so the commit point is never reached) and
shows a later reader cleaning up.
"""
from __future__ import annotations

from .arguments import Count


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo", help="print the protocol's Bigtable writes step by step (Figure 4)",
        description=__doc__.split("\n\n")[1])
    demos = parser.add_subparsers(dest="demo", metavar="DEMO", required=True)
    transfer = demos.add_parser("transfer", help="the paper's Figure 4 transfer, frame by frame")
    transfer.set_defaults(func=run_transfer)
    crash = demos.add_parser("crash", help="crash the transfer's client, watch the cleanup")
    crash.add_argument("--after", type=Count(0, 5), default=4, metavar="N",
                       help="crash right after the transfer's N-th row transaction "
                            "(0..5: 1 get Bob, 2 get Joe, 3 prewrite Bob, 4 prewrite Joe, "
                            "5 commit Bob = the commit point; default 4 = before the commit point)")
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
    stepper = figure4_stepper()
    try:
        for _ in range(args.after):
            stepper.step("transfer")
        stepper.crash("transfer")
        stepper.run()
        print(stepper.transcript())
    finally:
        stepper.close()
    return 0
