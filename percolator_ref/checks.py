"""Input rules, checked where input enters (one rule for every store).

Names (tables, rows, columns, clients) are non-empty ``str`` without NUL or a
lone surrogate; a column has no ``:``; values are ``str`` (UTF-8 encodable),
``bytes``, ``int`` of at most :data:`MAX_INT_DIGITS` digits, ``float`` or
``bool``; timestamps are ints in [1, :data:`MAX_TIMESTAMP`]. Each check raises
``TypeError``/``ValueError`` naming the argument, before anything is written.
"""
from __future__ import annotations

VALUE_TYPES = (str, bytes, int, float, bool)
MAX_TIMESTAMP = 2 ** 63 - 1
"""The largest timestamp the kit hands out or stores (a signed 64-bit integer,
as Bigtable's timestamps): every store holds every timestamp up to it exactly."""
MAX_INT_DIGITS = 4300
"""Ints longer than this many decimal digits are refused (Python's own limit
for converting an int to text, which a store that sends values as text needs)."""
INT_LIMIT = 10 ** MAX_INT_DIGITS


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


def check_cell_names(row, column, table) -> None:
    """Raise TypeError/ValueError naming the argument unless these name a cell (no ``:`` in
    ``column``)."""
    check_name(table, "table")
    check_name(row, "row")
    check_name(column, "column")
    if ":" in column:
        raise ValueError(f"column must not contain ':' (physical columns are "
                         f"column:data, column:lock, ...), got {column!r}")


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
