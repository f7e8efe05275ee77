"""Exercise 1: the snapshot read (Figure 6, Get).

The student subclasses :class:`~percolator_ref.Transaction` and overrides
``_snapshot_read(self, rt, cell) -> SnapshotRead`` — the body of Get inside
one row transaction. Everything else (waiting, cleanup, scan) is the
reference implementation.
"""
from __future__ import annotations

from percolator_ref import Transaction
from percolator_ref.model import WriteKind, data_col, lock_col, write_col
from percolator_ref.transaction import SnapshotRead

from .battery import Battery
from .scenarios import TTL, commit, expect, locks, new_cluster, prewrite_only

battery = Battery(1, "snapshot read (Get)")
reference = Transaction


@battery.check("absent cell reads as None")
def _absent(cls):
    c = new_cluster()
    expect(cls(c).get("Bob", "bal"), None, "get of a never-written cell")


@battery.check("reads a committed value")
def _committed(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    expect(cls(c).get("Bob", "bal"), 10, "get after a commit")


@battery.check("a write committed after start_ts is invisible")
def _snapshot(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    reader = cls(c)
    commit(c, {("Bob", "bal"): 20})
    expect(reader.get("Bob", "bal"), 10, "reader started before the second commit")


@battery.check("reads the version its snapshot selects among several")
def _versions(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    commit(c, {("Bob", "bal"): 20})
    middle = cls(c)
    commit(c, {("Bob", "bal"): 30})
    expect(middle.get("Bob", "bal"), 20, "reader between the 2nd and 3rd commits")


@battery.check("a committed delete reads as None")
def _delete(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    commit(c, {("Bob", "bal"): None})
    expect(cls(c).get("Bob", "bal"), None, "get after a committed delete")


@battery.check("a snapshot from before a delete still sees the value")
def _before_delete(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    reader = cls(c)
    commit(c, {("Bob", "bal"): None})
    expect(reader.get("Bob", "bal"), 10, "reader started before the delete")


@battery.check("a lock above start_ts is ignored (no wait, no cleanup)")
def _lock_above(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    reader = cls(c)
    writer = prewrite_only(c, {("Bob", "bal"): 20})
    expect(reader.get("Bob", "bal"), 10, "reader below a pending write")
    expect(c.clock.now(), 0.0, "seconds waited (clock)")
    expect(locks(c), [("Bob", "bal", writer.start_ts)], "locks after the read")


@battery.check("a live lock at or below start_ts makes the reader wait")
def _live_lock_below(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    prewrite_only(c, {("Bob", "bal"): 20})
    reader = cls(c)
    value = reader.get("Bob", "bal")
    assert c.clock.now() > TTL, (f"the reader returned {value!r} after waiting "
                                 f"{c.clock.now()} s: it must wait for the live holder "
                                 f"(here until its {TTL} s TTL passes)")
    expect(value, 10, "value once the stale writer was rolled back")


@battery.check("a dead client's lock before its commit point is rolled back")
def _dead_rolled_back(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    commit(c, {("Bob", "bal"): 3, ("Joe", "bal"): 9}, crash_after="prewrite")
    reader = cls(c)
    expect(reader.get("Joe", "bal"), 2, "secondary of a crashed, uncommitted transfer")
    expect(locks(c), [], "locks left after the read (cleanup via the primary)")


@battery.check("a dead client's lock after its commit point is rolled forward")
def _dead_rolled_forward(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    commit(c, {("Bob", "bal"): 3, ("Joe", "bal"): 9}, crash_after="commit-primary")
    expect(cls(c).get("Joe", "bal"), 9, "secondary of a transfer that passed its commit point")


@battery.check("scan uses the same snapshot rule")
def _scan(cls):
    c = new_cluster()
    commit(c, {("A", "x"): 1, ("B", "x"): 2, ("C", "x"): 3})
    commit(c, {("B", "x"): None})
    reader = cls(c)
    commit(c, {("A", "x"): 100, ("D", "x"): 4})
    expect(reader.scan(), [("A", "x", 1), ("C", "x", 3)], "scan")


# -- mutants: known-wrong implementations the battery must reject ------------

class IgnoresLocks(Transaction):
    """Reads the newest write record and never looks at the lock column."""
    def _snapshot_read(self, rt, cell):
        latest = rt.read(write_col(cell.column), self.start_ts)
        if latest is None or latest[1].kind is WriteKind.DELETE:
            return SnapshotRead(version=None if latest is None else latest[0])
        data = rt.read(data_col(cell.column), latest[1].start_ts, latest[1].start_ts)
        return SnapshotRead(version=latest[0], value=data[1])


class LockAtAnyTimestamp(Transaction):
    """Waits for every lock, even one above start_ts."""
    def _snapshot_read(self, rt, cell):
        lock = rt.read(lock_col(cell.column))
        if lock is not None:
            return SnapshotRead(lock=lock[1])
        return IgnoresLocks._snapshot_read(self, rt, cell)


class NewestCommit(Transaction):
    """Reads the newest write record, ignoring start_ts."""
    def _snapshot_read(self, rt, cell):
        lock = rt.read(lock_col(cell.column), self.start_ts)
        if lock is not None:
            return SnapshotRead(lock=lock[1])
        latest = rt.read(write_col(cell.column))
        if latest is None or latest[1].kind is WriteKind.DELETE:
            return SnapshotRead(version=None if latest is None else latest[0])
        data = rt.read(data_col(cell.column), latest[1].start_ts, latest[1].start_ts)
        return SnapshotRead(version=latest[0], value=data[1])


class NewestDataNoWriteRecord(Transaction):
    """Skips the write column: the newest data at or below start_ts."""
    def _snapshot_read(self, rt, cell):
        lock = rt.read(lock_col(cell.column), self.start_ts)
        if lock is not None:
            return SnapshotRead(lock=lock[1])
        data = rt.read(data_col(cell.column), self.start_ts)
        return SnapshotRead() if data is None else SnapshotRead(version=data[0], value=data[1])


class DeleteAsData(Transaction):
    """Treats a delete record as data: returns an older value after a delete."""
    def _snapshot_read(self, rt, cell):
        lock = rt.read(lock_col(cell.column), self.start_ts)
        if lock is not None:
            return SnapshotRead(lock=lock[1])
        latest = rt.read(write_col(cell.column), self.start_ts)
        if latest is None:
            return SnapshotRead()
        data = rt.read(data_col(cell.column), latest[1].start_ts)
        return SnapshotRead(version=latest[0], value=None if data is None else data[1])


mutants = {
    "get ignoring locks": IgnoresLocks,
    "get waiting on a lock above start_ts": LockAtAnyTimestamp,
    "get reading the newest commit": NewestCommit,
    "get reading data without the write record": NewestDataNoWriteRecord,
    "get reading a delete as data": DeleteAsData,
}
