"""The protocol's steps: one name for each kind of single-row Bigtable transaction.

Every row transaction the protocol runs is labelled with a :class:`Step`. The
trace, the stepper, the benchmark's counts, the stores (which may skip the row
lease on read-only steps) and fault injection all key on these names, so they
live in one enum. ``Step`` is a ``StrEnum``: ``Step.GET == "get"``.

A crash point has ONE meaning everywhere: "the client dies right *after* the
named step applied". ``commit(crash_after=...)``, the stepper's "Crash client"
button and the process-kill helper all use it:

- ``"prewrite-primary"``: after the primary's prewrite (only the primary locked);
- ``"prewrite"``: after the last prewrite (every cell locked, no commit_ts yet);
- ``"commit-primary"``: after the commit point (the primary's write record is
  written, the secondaries still locked).

A protocol variant adds steps of its own (async commit's ``"check-primary"``,
one-phase commit's ``"one-pc"``, ...), each declared with its properties in
:mod:`percolator_ref.stores.steps`, where the enum's are registered too.
"""
from __future__ import annotations

import enum


class Step(enum.StrEnum):
    """Why a row transaction runs (its label in the trace)."""
    GET = "get"                                  # Figure 6, Get
    SCAN = "scan"                                # a Get over every column of a row
    PREWRITE_PRIMARY = "prewrite-primary"        # Figure 6, Prewrite of writes_[0]
    PREWRITE_SECONDARY = "prewrite-secondary"    # Figure 6, Prewrite of the others
    NOTIFY = "notify"                            # c:notify set before the commit point
    COMMIT_PRIMARY = "commit-primary"            # the commit point
    COMMIT_SECONDARY = "commit-secondary"
    ABORT_ROLLBACK = "abort-rollback"            # an aborting commit erases its own locks
    CLEANUP_PRIMARY = "cleanup-primary"          # lazy cleanup decides at the primary
    ROLL_FORWARD = "roll-forward"
    ROLL_BACK = "roll-back"
    OBSERVER_CHECK = "observer-check"            # §2.4: notify vs ack
    CLEAR_NOTIFY = "clear-notify"
    BIGTABLE_READ = "bigtable-read"              # raw Bigtable operations (Figure 8)
    BIGTABLE_WRITE = "bigtable-write"
    BIGTABLE_ERASE = "bigtable-erase"
    ROW_TRANSACTION = "row-transaction"          # any other use of the raw store


READ_ONLY_STEPS = frozenset({Step.GET, Step.SCAN, Step.BIGTABLE_READ})
"""Steps that only read: a store may run them without taking the row for writing."""

CRASH_POINTS = ("prewrite-primary", "prewrite", "commit-primary")
"""The named crash points; each means "after that step applied" (see the module doc)."""



PREWRITE_STEPS = frozenset({Step.PREWRITE_PRIMARY, Step.PREWRITE_SECONDARY})

CHECK_AND_WRITE_STEPS = frozenset({
    Step.PREWRITE_PRIMARY, Step.PREWRITE_SECONDARY, Step.COMMIT_PRIMARY, Step.ABORT_ROLLBACK,
    Step.CLEANUP_PRIMARY, Step.ROLL_FORWARD, Step.ROLL_BACK})
"""Steps that check cells and write depending on what they found (a conditional mutation)."""
