"""The protocol's vocabulary: cells, locks, write records (the paper's Figure 5).

A Percolator column ``c`` is stored as several Bigtable columns:

============  ==========================================================
``c:data``    the value, at the writer's ``start_ts``
``c:lock``    an uncommitted write; holds a :class:`Lock` (where the primary is)
``c:write``   committed data; holds a :class:`Write` pointing at ``start_ts``
``c:notify``  hint: observers of ``c`` may need to run
``c:ack_O``   observer ``O`` ran; holds the start_ts of its last good run
============  ==========================================================
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple, Optional

# Input rules live in checks.py; re-exported here, where the vocabulary is.
from .checks import (INT_LIMIT, MAX_INT_DIGITS, MAX_TIMESTAMP, VALUE_TYPES,  # noqa: F401
                     check_cell_names, check_encodable, check_name, check_timestamp, check_value)

DEFAULT_TABLE = "default"
class Cell(NamedTuple):
    """A Percolator cell ``(table, row, column)``; prints as the paper does (``Bob.bal``)."""
    table: str
    row: str
    column: str

    def __str__(self):
        prefix = "" if self.table == DEFAULT_TABLE else f"{self.table}/"
        return f"{prefix}{self.row}.{self.column}"


def check_cell(row, column, table) -> Cell:
    """Validate a cell's names (no ``:`` in a column) and return it as a :class:`Cell`."""
    check_cell_names(row, column, table)
    return Cell(table, row, column)


def data_col(column: str) -> str:
    return f"{column}:data"


def lock_col(column: str) -> str:
    return f"{column}:lock"


def write_col(column: str) -> str:
    return f"{column}:write"


def notify_col(column: str) -> str:
    return f"{column}:notify"


def ack_col(column: str, observer: str) -> str:
    return f"{column}:ack_{observer}"


def split_column(bigtable_column: str) -> tuple[str, str]:
    """``"bal:lock"`` -> ``("bal", "lock")``."""
    column, _, kind = bigtable_column.partition(":")
    return column, kind


class WriteKind(enum.Enum):
    """What a write record commits: a value, or a delete.

    ``ROLLBACK`` is not a commit: it is the rollback record some protocol
    variants write in ``c:write`` at the rolled-back transaction's ``start_ts``
    (TiKV's ``WriteType::Rollback``). Readers skip it; it is never read as data.
    """
    PUT = "data"
    DELETE = "delete"
    ROLLBACK = "rollback"


class TxStatus(enum.StrEnum):
    """Where a transaction stands; a ``StrEnum``, so ``TxStatus.COMMITTED == "committed"``.

    Every ``commit()`` ends in COMMITTED, ABORTED, CRASHED (fault injection) or
    UNKNOWN (the store failed at the commit point: see ``outcome()``)."""
    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"
    CRASHED = "crashed"
    UNKNOWN = "unknown"


class CommitPhase(enum.StrEnum):
    """How far a commit got, which decides what a store failure means: before the commit
    point (abort), at it (unknown), after it (committed)."""
    PREWRITE = "prewrite"
    COMMIT_POINT = "commit-point"
    SECONDARIES = "secondaries"


@dataclass(frozen=True)
class Write:
    """A write record in ``c:write`` at ``commit_ts``: the data is at ``start_ts``."""
    start_ts: int
    kind: WriteKind = WriteKind.PUT

    def __str__(self):
        return f"{self.kind.value} @ {self.start_ts}"


@dataclass(frozen=True)
class Lock:
    """A lock in ``c:lock`` at ``start_ts``.

    ``primary`` is the primary cell as ``(table, row, column)`` on every lock,
    the primary's own included; ``client`` is the holder whose liveness token
    decides whether the lock may be cleaned up; ``kind`` says what the
    write record will be if the transaction commits (needed to roll forward).
    """
    start_ts: int
    primary: Cell
    is_primary: bool
    client: Optional[str] = None
    kind: WriteKind = WriteKind.PUT

    def __str__(self):
        return "I am primary" if self.is_primary else f"primary @ {Cell(*self.primary)}"
