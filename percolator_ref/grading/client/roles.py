"""Reference roles: clients of the kit's own code that several exercises' worlds spawn.

They run where the client runs, like the exercises' own roles (:mod:`.ex01_snapshot_read`
and the others register :func:`writer_role` as their role ``"writer"``).
"""
from __future__ import annotations


def record_intent(txn) -> None:
    """Record a reference writer's writes before it commits (a crash skips its finish)."""
    if txn.record is not None:
        txn.record.writes = [(m.cell, m.kind.name, m.value) for m in txn.writes.values()]


def writer_role(Answer, cluster, values, client=None):
    """The role "writer": one transaction writing ``[[row, column, value or None], ...]``;
    did it commit? ``client``: the worker it runs in (a name shared with other transactions)."""
    txn = Answer(cluster, client)
    for row, column, value in values:
        txn.set(row, column, value) if value is not None else txn.delete(row, column)
    record_intent(txn)
    return txn.commit()
