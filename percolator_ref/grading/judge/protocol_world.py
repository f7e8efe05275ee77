"""Worlds for the protocol exercises (1-4): a cluster whose past is written cell by cell.

Each of exercises 1 to 4 hides the reference step it grades, so a scenario
cannot build its world by committing reference transactions (they would call
the hidden stub). A :class:`World` writes directly what transactions leave
behind, in raw row transactions of the client ``"world"``:

- :meth:`World.committed`: a committed transaction (data at ``start_ts``, a
  write record at ``commit_ts`` pointing at it; a delete writes no data);
- :meth:`World.locked`: a prewritten one (data and locks at ``start_ts``,
  the first cell the primary), held by a client that is alive until
  :meth:`World.crash` or until its token is older than the TTL;
- :meth:`World.commit_point`: the primary of a locked transaction committed
  (its lock replaced by a write record), the secondaries still locked.

Every timestamp is chosen by the check's params and taken from the cluster's
oracle at exactly that value (:meth:`World.stamp`, :meth:`World.begin`), so a
verdict computes every number it expects from its params alone.

The second half are verdict helpers: they read the untrusted observations
(:func:`versions`, :func:`value_at`, ...) and phrase what was found
(:func:`show`, :func:`said`) for the feedback sentences.
"""
from __future__ import annotations

from percolator_ref import Cluster, ManualClock, Transaction
from percolator_ref.model import (DEFAULT_TABLE, Cell, Lock, Write, WriteKind, data_col,
                                  lock_col, split_column, write_col)
from percolator_ref.step import Step

from ..battery import guard
from ..framework import outcome, plain, require, said, show  # noqa: F401 - said: one, re-exported
from ..client.observe import render

TTL = 10.0
TABLE = DEFAULT_TABLE
BUDGET = 300          # row transactions per scenario: more means an endless retry loop


def timeline(rng, *names: str) -> dict:
    """Increasing timestamps with small random gaps: ``{"t0": first, name: ts, ...}``."""
    t = rng.randrange(5, 10 ** 6)
    out = {"t0": t}
    for name in names:
        t += rng.randrange(1, 4)
        out[name] = t
    return out


def amounts(rng, *names: str) -> dict:
    """Distinct account balances, one per name."""
    return dict(zip(names, rng.sample(range(1, 1000), len(names))))


class World:
    """A deterministic cluster (manual clock, TTL 10 s) and the past its scenario needs;
    ``variants``: the protocol variants its cluster runs (:class:`~percolator_ref.Cluster`'s)."""

    def __init__(self, first_timestamp: int, ttl: float = TTL, variants=()):
        self.cluster = guard(Cluster(first_timestamp=first_timestamp, clock=ManualClock(),
                                     lock_ttl=ttl, variants=list(variants)), BUDGET)
        self.oracle = self.cluster.oracle
        self.reserved: set = set()

    # -- timestamps ---------------------------------------------------------------
    def reach(self, ts: int) -> None:
        """Advance the oracle so that the next timestamp it hands out is ``ts``."""
        if self.oracle.peek() > ts:
            raise RuntimeError(f"internal: timestamp {ts} was already handed out")
        while self.oracle.peek() < ts:
            self.oracle.get_timestamp()

    def stamp(self, ts: int) -> int:
        """Reserve ``ts`` for the world (taken from the oracle, so no transaction gets it)."""
        if ts not in self.reserved:
            self.reach(ts)
            self.oracle.get_timestamp()
            self.reserved.add(ts)
        return ts

    def begin(self, cls, ts: int):
        """A transaction of ``cls`` that starts at exactly ``ts``."""
        self.reach(ts)
        return cls(self.cluster)

    # -- what transactions leave behind -------------------------------------------
    def row(self, row: str, table: str = TABLE):
        return self.cluster.bigtable.row_transaction(table, row, client="world",
                                                     step=Step.ROW_TRANSACTION)

    def committed(self, values: dict, start: int, commit: int) -> None:
        """``{(row, column): value or None (delete)}`` written at ``start``, committed at ``commit``."""
        self.stamp(start)
        self.stamp(commit)
        for (row, column), value in values.items():
            with self.row(row) as rt:
                if value is not None:
                    rt.write(data_col(column), start, value)
                rt.write(write_col(column), commit, Write(start, kind_of(value)))

    def locked(self, values: dict, start: int, client: str) -> Cell:
        """``values`` prewritten at ``start`` by the live ``client``; returns the primary cell."""
        self.stamp(start)
        primary = Cell(TABLE, *next(iter(values)))
        for (row, column), value in values.items():
            lock = Lock(start, primary, (row, column) == primary[1:], client, kind_of(value))
            with self.row(row) as rt:
                if value is not None:
                    rt.write(data_col(column), start, value)
                rt.write(lock_col(column), start, lock)
        self.cluster.lockservice.register(client)
        return primary

    def commit_point(self, values: dict, start: int, commit: int, cells: int = 1) -> None:
        """The first ``cells`` cells of a locked transaction committed at ``commit``."""
        self.stamp(commit)
        for (row, column), value in list(values.items())[:cells]:
            with self.row(row) as rt:
                rt.write(write_col(column), commit, Write(start, kind_of(value)))
                rt.erase(lock_col(column), start)

    def rolled_back(self, values: dict, start: int) -> None:
        """A locked transaction rolled back by a cleaner: its locks and data at ``start`` erased."""
        for row, column in values:
            with self.row(row) as rt:
                rt.erase(lock_col(column), start)
                rt.erase(data_col(column), start)

    def crash(self, client: str) -> None:
        self.cluster.lockservice.crash(client)

    def crashed_transfer(self, p: dict, delete: bool = False, committed: bool = False) -> dict:
        """Bob, Joe committed at (s0, c0); W prewrote a transfer at s_w (Bob primary) and
        died, after its commit point at c_w if ``committed`` (Joe deleted if ``delete``);
        the transfer's values."""
        transfer = {("Bob", "bal"): p["b1"], ("Joe", "bal"): None if delete else p["j1"]}
        self.committed({("Bob", "bal"): p["b0"], ("Joe", "bal"): p["j0"]}, p["s0"], p["c0"])
        self.locked(transfer, p["s_w"], "W")
        if committed:
            self.commit_point(transfer, p["s_w"], p["c_w"])
        self.crash("W")
        return transfer

    def lock_on(self, row: str, column: str):
        """The newest lock on a cell (a reference to hand a cleanup function), or None."""
        found = self.cluster.bigtable.versions(TABLE, row, lock_col(column))
        return found[0][1] if found else None

    def read(self, row: str, column: str) -> dict:
        """What a fresh reference transaction reads (an ``outcome``); not for exercise 1."""
        reader = Transaction(self.cluster)
        try:
            return outcome(reader.get, row, column)
        finally:
            reader.abandon()

    def cells(self) -> dict:
        """Every version of every table as plain data (see :func:`render`)."""
        return {table: {row: {physical: [[plain(ts), render(v)] for ts, v in found]
                              for physical, found in columns.items()}
                        for row, columns in rows.items()}
                for table, rows in self.cluster.bigtable.dump().items()}


def kind_of(value) -> WriteKind:
    return WriteKind.DELETE if value is None else WriteKind.PUT


# -- verdict side: reading the (untrusted) observations ------------------------------

def versions_in(cells, row: str, physical: str, table: str = TABLE) -> list:
    """``[[ts, value], ...]`` (newest first) of one physical column, [] if absent."""
    require(isinstance(cells, dict), "malformed observations (cells)")
    found = cells.get(table, {})
    found = found.get(row, {}) if isinstance(found, dict) else None
    found = found.get(physical, []) if isinstance(found, dict) else None
    require(isinstance(found, list) and all(isinstance(v, list) and len(v) == 2 for v in found),
            f"malformed observations ({row}.{physical})")
    return found


def value_at(cells, row: str, physical: str, ts: int, table: str = TABLE):
    """The version at exactly ``ts``, or None."""
    return next((v for t, v in versions_in(cells, row, physical, table) if t == ts), None)


def locks(cells, table: str = TABLE) -> list:
    """``[(row, column, ts), ...]`` of every lock in ``table``."""
    require(isinstance(cells, dict) and isinstance(cells.get(table, {}), dict),
            "malformed observations (cells)")
    found = []
    for row, columns in cells.get(table, {}).items():
        require(isinstance(columns, dict), "malformed observations (cells)")
        for physical in columns:
            column, kind = split_column(physical)
            if kind == "lock":
                found += [(row, column, ts) for ts, _ in versions_in(cells, row, physical, table)]
    return sorted(found)


def is_write(value, start: int, kind: str = "data") -> bool:
    """Is ``value`` a rendered write record of ``kind`` pointing at ``start``?"""
    return isinstance(value, dict) and value.get("write") == kind and value.get("start_ts") == start


def returned(result, expected) -> bool:
    """Did the call return ``expected`` (exactly, not an equal value of another type)?"""
    if not (isinstance(result, dict) and "value" in result):
        return False
    value = result["value"]
    return value == expected and type(value) is type(expected)


class Once:
    """An interceptor running ``action(rt)`` once, at the first row transaction ``when(rt)`` picks.

    ``at="after"``: once that row transaction applied; ``at="before"``: before it starts.
    ``fired`` says whether it ran. Attach with :func:`percolator_ref.interceptors.attach`.
    """

    def __init__(self, when, action, at: str = "after"):
        if at not in ("before", "after"):
            raise ValueError(f"at must be 'before' or 'after', got {at!r}")
        self.when, self.action, self.at = when, action, at
        self.fired = False

    def fire(self, rt, at: str) -> None:
        if at == self.at and not self.fired and self.when(rt):
            self.fired = True
            self.action(rt)

    def before(self, rt) -> None:
        self.fire(rt, "before")

    def after(self, rt) -> None:
        self.fire(rt, "after")
