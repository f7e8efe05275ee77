"""Stores the workload runs on: a Percolator cluster, or SQLite in memory (the CPU baseline).

A store has ``begin()`` returning a transaction with the Percolator interface
(``get/set/delete/scan/commit``), so the same transaction code runs on both.
"""
from __future__ import annotations

import sqlite3


class PercolatorStore:
    """Transactions on a :class:`~percolator_ref.Cluster`."""
    name = "percolator"

    def __init__(self, cluster):
        self.cluster = cluster

    def begin(self):
        return self.cluster.begin()


class SqliteTxn:
    """The Percolator transaction interface over one SQLite transaction."""

    def __init__(self, conn):
        self.conn = conn
        conn.execute("BEGIN")

    def get(self, row, column, table="default"):
        hit = self.conn.execute("SELECT v FROM cells WHERE tbl=? AND row=? AND col=?",
                                (table, row, column)).fetchone()
        return None if hit is None else hit[0]

    def set(self, row, column, value, table="default"):
        self.conn.execute("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?)",
                          (table, row, column, value))

    def delete(self, row, column, table="default"):
        self.conn.execute("DELETE FROM cells WHERE tbl=? AND row=? AND col=?",
                          (table, row, column))

    def scan(self, table="default", start_row=None, end_row=None):
        return self.conn.execute(
            "SELECT row, col, v FROM cells WHERE tbl=? AND row>=? AND row<? ORDER BY row, col",
            (table, start_row or "", end_row or "\U0010ffff")).fetchall()

    def commit(self) -> bool:
        self.conn.execute("COMMIT")
        return True


class SqliteStore:
    """SQLite in memory: one ``cells(tbl, row, col, v)`` table, the same transactions."""
    name = "sqlite"

    def __init__(self):
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.execute("CREATE TABLE cells (tbl TEXT, row TEXT, col TEXT, v, "
                          "PRIMARY KEY (tbl, row, col)) WITHOUT ROWID")

    def begin(self):
        return SqliteTxn(self.conn)


class NoWrites:
    """Stands in for the loading transaction when another process loaded the data."""

    def set(self, *args, **kwargs) -> None:
        pass

    def commit(self) -> bool:
        return True
