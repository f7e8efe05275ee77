"""Small worlds for scenarios: a deterministic cluster with a budget, raw cells as plain data.

Scenarios run in the grading sandbox and return plain JSON observations
(:mod:`.framework`). These helpers build the world a scenario needs from the
public API only, and turn what the store holds into plain data a verdict can
judge (a :class:`~percolator_ref.model.Lock` or
:class:`~percolator_ref.model.Write` becomes a dict).
"""
from __future__ import annotations

from percolator_ref import Cluster, ManualClock
from percolator_ref.model import Lock, Write

from .battery import guard
from .framework import plain

TTL = 10.0
BUDGET = 2000         # row transactions per scenario: more means an endless retry loop


def new_cluster(first_timestamp: int) -> Cluster:
    """A cluster on a manual clock (lock TTL 10 s), no history, with a row-transaction budget."""
    return guard(Cluster(first_timestamp=first_timestamp, clock=ManualClock(), lock_ttl=TTL,
                         record_history=False), BUDGET)


def cell_value(value):
    """A stored value as plain data: locks and write records become dicts."""
    if isinstance(value, Lock):
        primary = "/".join(value.primary[:2]) + "." + value.primary[2]
        return {"lock": value.start_ts, "primary": primary, "client": value.client}
    if isinstance(value, Write):
        return {"write": value.start_ts, "kind": value.kind.name}
    return plain(value)


def versions(cluster, table: str, row: str, bigtable_column: str) -> list:
    """``[[ts, plain value], ...]`` of one physical column, newest first."""
    return [[ts, cell_value(v)] for ts, v in cluster.bigtable.versions(table, row, bigtable_column)]


def cell_name(table: str, row: str, column: str) -> str:
    """How feedback names a cell: ``table/row.column``."""
    return f"{table}/{row}.{column}"
