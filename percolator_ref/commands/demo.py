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
        print()
        print(crash_outcome(stepper, "transfer"))
    finally:
        stepper.close()
    return 0


def crash_outcome(stepper, name: str) -> str:
    """One line: what became of script ``name``'s crashed transaction and what the cleaner
    read, from the run's own record (its history, the primary's write column, the steps)."""
    runners = {r.name: r for r in stepper.runners}
    crashed, cleaner = runners[name], runners.get("cleaner")
    records = {r.client: r for r in stepper.cluster.history.records}
    mine = records[crashed.client]
    primary = mine.writes[0][0] if mine.writes else None
    committed = primary is not None and any(
        getattr(w, "start_ts", None) == mine.start_ts for _, w in stepper.cluster.bigtable.versions(
            primary.table, primary.row, f"{primary.column}:write"))
    steps = [(e.client, e.step.value) for f in stepper.frames for e in f.events]
    wrote = any(c == crashed.client and s.startswith("prewrite") for c, s in steps)
    tidied = {s for c, s in steps if cleaner is not None and c == cleaner.client
              and s in ("cleanup-primary", "roll-back", "roll-forward")}
    who = crashed.client
    if not wrote:
        what = f"{who} crashed before writing anything: there was nothing to clean up"
    elif committed:
        what = (f"{who} crashed after its commit point (the primary {primary.row}.{primary.column} "
                f"holds its write record): {who} committed"
                + (", and the cleaner rolled its secondaries forward" if "roll-forward" in tidied
                   else ""))
    else:
        what = (f"{who} crashed before its commit point: {who} did not commit"
                + (f", and the cleaner rolled it back (its locks and data at {mine.start_ts} "
                   "are erased)" if tidied else ", and its locks are still there"))
    if cleaner is None or cleaner.client not in records:
        return f"Outcome: {what}."
    reads = ", ".join(f"{cell.row}.{cell.column} = {value}"
                      for cell, _, value in records[cleaner.client].reads)
    return f"Outcome: {what}; the cleaner {cleaner.client} then read {reads}."
