"""Who takes part in a trusted world: its record of each client, a family's participants, the scope.

A :class:`Client` is what the world (:mod:`.trusted`) keeps of one client: the
timestamps it took, the values the store handed it, what it answered, what it
committed and locked, digests of what it heard. A :class:`Participant` is one
client of a family (:meth:`~.trusted.TrustedWorld.run`); a :class:`Scope` is
where an exercise lets a student client write.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from percolator_ref.checking.checker import same_value


@dataclass(eq=False)
class Client:
    """The world's record of one client."""
    cid: int
    label: str
    host: str
    crashable: bool = False
    timestamps: list = field(default_factory=list)
    names: set = field(default_factory=set)
    seen: list = field(default_factory=list)        # values handed to it in rows
    answers: list = field(default_factory=list)     # outcomes, in order
    pending: Optional[dict] = None
    done: bool = False
    crashed: bool = False
    heard: list = field(default_factory=list)       # a digest of every message the world sent it
    commits: list = field(default_factory=list)     # (table, row, column, Write) it committed
    locked: list = field(default_factory=list)      # (table, row, column, Lock) it prewrote

    def committed(self) -> bool:
        """Did this client's transaction commit, by the world's log of its own steps: in one
        row transaction it replaced a lock at its start_ts, which the row held, by a write
        record pointing at that start_ts (the commit point). A write record found elsewhere in
        the store, which any client can write, proves nothing."""
        return bool(self.timestamps) and any(write.start_ts == self.timestamps[0]
                                             for _, _, _, write in self.commits)

    @property
    def answer(self):
        return self.answers[-1] if self.answers else None

    def saw(self, value) -> bool:
        """Was ``value`` handed to this client by the store (None: always)?"""
        return value is None or any(same_value(v, value) for v in self.seen)


@dataclass(frozen=True)
class Participant:
    """One client of a family: ``role(answer, cluster, *args)`` on ``host``."""
    label: str
    role: str
    args: tuple = ()
    host: str = "student"
    crashable: bool = False


@dataclass(frozen=True)
class Scope:
    """What a student client may write: ``tables`` and ``rows`` (None: any), given by the
    exercise (``w.scope = Scope(...)``); a row transaction writing elsewhere is refused."""
    tables: Optional[frozenset] = None
    rows: Optional[frozenset] = None

    def refuses(self, table: str, row: str) -> bool:
        return (self.tables is not None and table not in self.tables) or \
            (self.rows is not None and row not in self.rows)

    def describe(self) -> str:
        tables = "any table" if self.tables is None else "table(s) " + ", ".join(sorted(self.tables))
        rows = "" if self.rows is None else ", rows " + ", ".join(sorted(self.rows))
        return tables + rows
