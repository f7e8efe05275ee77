"""Figure 8's raw Bigtable operations, shared by every store.

Each is a single-cell row transaction on the store it is mixed into: what the
paper's microbenchmark compares Percolator's transactions against.
"""
from __future__ import annotations

from typing import Any, Optional

from ..model import MAX_TIMESTAMP, check_name
from ..step import Step


def check_ts(ts, argument: str = "ts") -> None:
    """Raise TypeError/ValueError naming ``argument`` unless ``ts`` is a timestamp."""
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise TypeError(f"{argument} must be an int timestamp, got {ts!r}")
    if not 0 <= ts <= MAX_TIMESTAMP:
        raise ValueError(f"{argument} must be in [0, {MAX_TIMESTAMP}], got {ts}")


class RawCellOperations:
    """Figure 8's raw Bigtable operations, shared by every store: each one is a
    single-cell row transaction. A store needs ``row_transaction`` and may
    refuse a value it cannot hold in ``check_storable``."""

    def check_storable(self, value: Any) -> None:
        """Raise TypeError before anything is written if ``value`` cannot be stored."""
        if value is None:
            raise TypeError("value must not be None (use erase to remove a version)")

    def order_reads_after_row_writes(self) -> None:
        """From now on, a read of a row waits while another client's row transaction holds
        the row for writing (a variant that takes a timestamp while it holds a row needs
        this). Here nothing to do: a store whose row transactions run one at a time (the
        in-memory Bigtable) already orders them; the Redis store overrides it."""

    def write(self, table: str, row: str, bigtable_column: str, value: Any, ts: int) -> None:
        """Write one version: a one-cell row transaction (Figure 8's raw write)."""
        check_name(bigtable_column, "bigtable_column")
        check_ts(ts)
        self.check_storable(value)
        with self.row_transaction(table, row, step=Step.BIGTABLE_WRITE) as rt:
            rt.write(bigtable_column, ts, value)

    def read(self, table: str, row: str, bigtable_column: str, ts: Optional[int] = None):
        """Newest value at or below ``ts`` (newest of all if None), or None."""
        check_name(bigtable_column, "bigtable_column")
        if ts is not None:
            check_ts(ts)
        with self.row_transaction(table, row, step=Step.BIGTABLE_READ) as rt:
            found = rt.read(bigtable_column, ts)
        return None if found is None else found[1]

    def erase(self, table: str, row: str, bigtable_column: str, ts: int) -> None:
        """Erase the version at exactly ``ts`` (no-op if absent)."""
        check_name(bigtable_column, "bigtable_column")
        check_ts(ts)
        with self.row_transaction(table, row, step=Step.BIGTABLE_ERASE) as rt:
            rt.erase(bigtable_column, ts)
