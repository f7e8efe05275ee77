"""Wrong answers that the exercise notebooks run as demos of a failing report (never answers).

Exercise 1's demo cell runs :class:`PastOwnLock` through the self-check and steps
through the one family of schedules that catches it. Its read is this module's own,
not the graded reference (:func:`percolator_ref.transaction.snapshot_read`, which the
grader hides): the demo imports nothing that a student's answer could lean on. The
student edition ships this module as bytecode only, like the reference
(``release/build.py``): apart from its one mistake it reads as an answer would.
"""
from __future__ import annotations

from percolator_ref.model import WriteKind, data_col, lock_col
from percolator_ref.rows import latest_write
from percolator_ref.transaction import SnapshotRead, Transaction

__all__ = ["PastOwnLock"]


class PastOwnLock(Transaction):
    """NOT an answer (exercise 1's demo of a wrong one): a lock held under its own client
    name is taken for its own pending write and read past, as if its snapshot ended just
    below the lock. Two transactions of one worker share that name, so the lock may be
    another transaction's, about to commit below this reader's snapshot."""

    def snapshot_read(self, rt, cell):
        """The snapshot read at ``start_ts``, except for the mistake above."""
        column, at = cell.column, self.start_ts
        held = rt.read(lock_col(column), at)
        if held is not None and held[1].client == self.client:   # the mistake
            at = held[1].start_ts - 1
            held = rt.read(lock_col(column), at)
        if held is not None:
            return SnapshotRead(lock=held[1])
        found = latest_write(rt, column, at)
        if found is None:
            return SnapshotRead()
        if found[1].kind is WriteKind.DELETE:
            return SnapshotRead(version=found[0])
        return SnapshotRead(version=found[0],
                            value=rt.read(data_col(column), found[1].start_ts,
                                          found[1].start_ts)[1])
