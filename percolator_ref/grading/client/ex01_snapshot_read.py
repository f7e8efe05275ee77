"""Exercise 1 (the snapshot read), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex01_snapshot_read`'s."""
from __future__ import annotations

from percolator_ref.model import Cell, DEFAULT_TABLE as TABLE
from percolator_ref.step import Step

from ..framework import Exercise, outcome
from .observe import snapshot_fields
from .roles import writer_role


exercise = Exercise(
    1, "snapshot read (Get)", answer="SnapshotReadTransaction",
    graded={"SnapshotReadTransaction": ("snapshot_read",)},
    hidden=("percolator_ref.transaction:Transaction.snapshot_read",
            "percolator_ref.transaction:snapshot_read"))


@exercise.role("txn")
def _txn(Answer, cluster):
    """A transaction of the answer's class (its start_ts is the oracle's next timestamp)."""
    return Answer(cluster)


@exercise.role("fields")
def _fields_role(Answer, cluster, rows):
    """snapshot_read of ``rows``' bal cells, each in a GET row transaction, as plain fields."""
    txn, found = Answer(cluster), {}
    for row in rows:
        with cluster.bigtable.row_transaction(TABLE, row, client=txn.client, step=Step.GET) as rt:
            found[row] = outcome(lambda: snapshot_fields(txn.snapshot_read(rt, Cell(TABLE, row, "bal"))))
    return found


@exercise.role("reader")
def _reader_role(Answer, cluster, cells, client=None):
    """One transaction reading ``cells`` in order: the list of values."""
    txn = Answer(cluster, client)
    return [txn.get(row, column) for row, column in cells]


exercise.role("writer")(writer_role)
