"""Helpers shared by the protocol tests: cell inspection and a paused commit."""
from __future__ import annotations

import threading

from percolator_ref.interceptors import Gate, attach
from percolator_ref.model import data_col, lock_col, write_col


def cell_state(cluster, row, column, table="default"):
    """The three physical columns of one cell as the paper's Figure 4 shows them.

    ``{"data": [(ts, value)], "lock": [(ts, str(lock))], "write": [(ts, str(write))]}``,
    newest first (uncounted inspection through ``bigtable.versions``).
    """
    bt = cluster.bigtable
    return {
        "data": bt.versions(table, row, data_col(column)),
        "lock": [(ts, str(lock)) for ts, lock in bt.versions(table, row, lock_col(column))],
        "write": [(ts, str(w)) for ts, w in bt.versions(table, row, write_col(column))],
    }


def all_locks(cluster):
    """Every lock in the store as ``(table, row, physical column, ts)``."""
    found = []
    for table, rows in cluster.bigtable.dump().items():
        for row, columns in rows.items():
            for column, versions in columns.items():
                if column.endswith(":lock"):
                    found.extend((table, row, column, ts) for ts, _ in versions)
    return found


def fresh_view(cluster, table="default"):
    """A fresh read-only transaction's snapshot ``{(row, column): value}`` (cleans dead locks)."""
    t = cluster.begin()
    view = {(row, column): value for row, column, value in t.scan(table)}
    assert t.commit() is True
    return view


class PausedCommit:
    """Run ``txn.commit(**kw)`` in a thread that stops just before its first row
    transaction of protocol step ``step`` (through a ``Gate`` interceptor).

    While paused the holder is alive (it heartbeated at its last row transaction);
    ``resume()`` lets it go on and returns what ``commit`` returned (or raises
    what it raised).
    """

    def __init__(self, cluster, txn, step, **commit_kw):
        self.cluster, self.txn, self.step = cluster, txn, step
        self.reached, self.go = threading.Event(), threading.Event()
        self.result, self.error = None, None
        self.attachment = attach(cluster.bigtable, Gate(self._gate))
        self.thread = threading.Thread(target=self._run, args=(commit_kw,), daemon=True)
        self.thread.start()
        if not self.reached.wait(10):
            raise AssertionError(f"{txn.client} never reached step {step!r}")

    def _gate(self, client, table, row, step):
        if client == self.txn.client and step == self.step and not self.reached.is_set():
            self.reached.set()
            self.go.wait(10)

    def _run(self, commit_kw):
        try:
            self.result = self.txn.commit(**commit_kw)
        except BaseException as exc:   # handed back to the test by resume()
            self.error = exc

    def resume(self):
        self.go.set()
        self.thread.join(10)
        self.attachment.detach()
        if self.thread.is_alive():
            raise AssertionError("paused commit did not finish")
        if self.error is not None:
            raise self.error
        return self.result
