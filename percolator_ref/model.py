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

DEFAULT_TABLE = "default"
VALUE_TYPES = (str, bytes, int, float, bool)
MAX_TIMESTAMP = 2 ** 63 - 1
"""The largest timestamp the kit hands out or stores (a signed 64-bit integer,
as Bigtable's timestamps): every store holds every timestamp up to it exactly."""
MAX_INT_DIGITS = 4300
"""Ints longer than this many decimal digits are refused (Python's own limit
for converting an int to text, which a store that sends values as text needs)."""
INT_LIMIT = 10 ** MAX_INT_DIGITS


class Cell(NamedTuple):
    """A Percolator cell ``(table, row, column)``; prints as the paper does (``Bob.bal``)."""
    table: str
    row: str
    column: str

    def __str__(self):
        prefix = "" if self.table == DEFAULT_TABLE else f"{self.table}/"
        return f"{prefix}{self.row}.{self.column}"


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
    """What a write record commits: a value, or a delete."""
    PUT = "data"
    DELETE = "delete"


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


def check_name(value, argument: str) -> None:
    """Raise TypeError/ValueError naming ``argument`` unless it is a storable, non-empty str.

    One rule for every store: no NUL character (stores use it as a separator)
    and no lone surrogate (not encodable as UTF-8).
    """
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a non-empty str, got {type(value).__name__} {value!r}")
    if not value:
        raise ValueError(f"{argument} must be a non-empty str, got ''")
    if "\x00" in value:
        raise ValueError(f"{argument} must not contain the NUL character, got {value!r}")
    check_encodable(value, argument)


def check_encodable(text: str, argument: str) -> None:
    """Raise ValueError naming ``argument`` if ``text`` has a lone surrogate (not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{argument} must be encodable as UTF-8 (it holds a lone "
                         f"surrogate), got {text!r}") from None


def check_cell(row, column, table) -> Cell:
    """Validate a cell's names (no ``:`` in a column) and return it as a :class:`Cell`."""
    check_name(table, "table")
    check_name(row, "row")
    check_name(column, "column")
    if ":" in column:
        raise ValueError(f"column must not contain ':' (physical columns are "
                         f"column:data, column:lock, ...), got {column!r}")
    return Cell(table, row, column)


def check_value(value) -> None:
    """Raise TypeError/ValueError naming ``value`` unless every store can hold it exactly.

    Values are ``str`` (UTF-8 encodable), ``bytes``, ``int`` (at most
    :data:`MAX_INT_DIGITS` digits), ``float`` or ``bool``.
    """
    if not isinstance(value, VALUE_TYPES):
        raise TypeError(f"value must be str, bytes, int, float or bool, "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, str):
        check_encodable(value, "value")
    elif isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= INT_LIMIT:
            raise ValueError(f"value must be an int of at most {MAX_INT_DIGITS} digits")


def check_timestamp(ts, argument: str) -> None:
    """Raise TypeError/ValueError naming ``argument`` unless ``ts`` is in [1, MAX_TIMESTAMP]."""
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise TypeError(f"{argument} must be an int, got {type(ts).__name__} {ts!r}")
    if not 1 <= ts <= MAX_TIMESTAMP:
        raise ValueError(f"{argument} must be in [1, {MAX_TIMESTAMP}], got {ts}")
