"""Small building blocks the batteries share: clusters, commits, inspection."""
from __future__ import annotations

from percolator_ref import Cluster, ManualClock, Transaction
from percolator_ref.model import lock_col, write_col

from .battery import guard

TTL = 10.0


def new_cluster(first_timestamp: int = 1, **kwargs) -> Cluster:
    """A deterministic cluster (manual clock, TTL 10 s) with a row-transaction budget."""
    kwargs.setdefault("clock", ManualClock())
    return guard(Cluster(first_timestamp=first_timestamp, lock_ttl=TTL, **kwargs))


def commit(cluster, values: dict, cls=Transaction, crash_after=None, table="default"):
    """Commit ``{(row, column): value}`` (None = delete) in one transaction; return it."""
    t = cls(cluster)
    for (row, column), value in values.items():
        if value is None:
            t.delete(row, column, table=table)
        else:
            t.set(row, column, value, table=table)
    t.outcome = t.commit(crash_after=crash_after) if crash_after is None else _crash(t, crash_after)
    return t


def _crash(t, crash_after):
    from percolator_ref import ClientCrash
    try:
        return t.commit(crash_after=crash_after)
    except ClientCrash:
        return "crashed"


def prewrite_only(cluster, values: dict, cls=Transaction):
    """A live client that has prewritten ``values`` and not committed yet."""
    t = cls(cluster)
    for (row, column), value in values.items():
        t.set(row, column, value)
    assert t._prewrite_all(list(t.writes.values())), "setup: prewrite failed"
    return t


def read(cluster, row, column, table="default"):
    """The committed value seen by a fresh reference transaction."""
    return Transaction(cluster).get(row, column, table=table)


def locks(cluster, table="default") -> list:
    """Every lock in ``table`` as ``(row, column, start_ts)``, sorted."""
    found = []
    for row, cols in cluster.bigtable.dump(table).get(table, {}).items():
        for physical, versions in cols.items():
            column, kind = physical.split(":", 1)
            if kind == "lock":
                found.extend((row, column, ts) for ts, _ in versions)
    return sorted(found)


def lock_at(cluster, row, column, table="default"):
    versions = cluster.bigtable.versions(table, row, lock_col(column))
    return versions[0] if versions else None


def write_records(cluster, row, column, table="default") -> list:
    """``[(commit_ts, str(write)), ...]`` newest first."""
    return [(ts, str(w)) for ts, w in cluster.bigtable.versions(table, row, write_col(column))]


def expect(actual, expected, what: str) -> None:
    assert actual == expected, f"{what}: expected {expected!r}, got {actual!r}"


def steps(events) -> list:
    return [(e.step, e.row) for e in events]


def on_step(cluster, fn):
    """Call ``fn(client, table, row, step)`` before each row transaction; returns the interceptor."""
    interceptor = Gate(fn)
    cluster.bigtable.interceptors.append(interceptor)
    return interceptor


def crashed_transfer(cluster, crash_after, cls=None):
    """Bob.bal=10, Joe.bal=2 committed; then a transfer (Bob primary) crashes at ``crash_after``."""
    from percolator_ref import Transaction
    commit(cluster, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    return commit(cluster, {("Bob", "bal"): 3, ("Joe", "bal"): 9}, cls=cls or Transaction,
                  crash_after=crash_after)
