"""Exercise 2: prewrite (Figure 6, Prewrite).

The student overrides ``Transaction.prewrite(self, m, primary) -> bool``:
in one row transaction, abort on a write record at or after ``start_ts`` or
on a lock at any timestamp; else write the data (for a PUT) and a lock at
``start_ts``. Commit, reads and cleanup are the reference implementation.
"""
from __future__ import annotations

from percolator_ref import Transaction
from percolator_ref.model import Cell, Lock, WriteKind, data_col, lock_col, write_col

from .battery import Battery
from .scenarios import commit, expect, locks, new_cluster, prewrite_only, read, write_records

battery = Battery(2, "prewrite")
reference = Transaction


def _lock(c, row, column):
    versions = c.bigtable.versions("default", row, lock_col(column))
    return versions[0] if versions else None


@battery.check("a transfer commits and is readable")
def _transfer(cls):
    c = new_cluster()
    t = commit(c, {("Bob", "bal"): 3, ("Joe", "bal"): 9}, cls=cls)
    expect(t.outcome, True, "commit()")
    expect((read(c, "Bob", "bal"), read(c, "Joe", "bal")), (3, 9), "balances after commit")
    expect(locks(c), [], "locks after commit")


@battery.check("data and a lock at start_ts; the lock names the primary")
def _data_and_lock(cls):
    c = new_cluster()
    t = prewrite_only(c, {("Bob", "bal"): 3, ("Joe", "bal"): 9}, cls=cls)
    expect(c.bigtable.versions("default", "Bob", data_col("bal")), [(t.start_ts, 3)], "Bob.bal:data")
    expect(c.bigtable.versions("default", "Joe", data_col("bal")), [(t.start_ts, 9)], "Joe.bal:data")
    primary = Cell("default", "Bob", "bal")
    for row, is_primary in (("Bob", True), ("Joe", False)):
        found = _lock(c, row, "bal")
        assert found is not None, f"no lock on {row}.bal after prewrite"
        ts, lock = found
        expect(ts, t.start_ts, f"timestamp of the lock on {row}.bal")
        expect((tuple(lock.primary), lock.is_primary, lock.client, lock.start_ts),
               (tuple(primary), is_primary, t.client, t.start_ts),
               f"lock on {row}.bal (primary, is_primary, client, start_ts)")


@battery.check("a delete locks with kind DELETE and writes no data")
def _delete(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    t = cls(c)
    t.delete("Bob", "bal")
    assert t._prewrite_all(list(t.writes.values())), "prewrite of a delete returned False"
    found = _lock(c, "Bob", "bal")
    assert found is not None, "no lock after prewriting a delete"
    expect(found[1].kind, WriteKind.DELETE, "kind of the lock")
    expect(c.bigtable.versions("default", "Bob", data_col("bal"))[0][0] < t.start_ts, True,
           "no data written at start_ts for a delete")


@battery.check("a write committed after start_ts conflicts")
def _ww_after(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    t = cls(c)
    t.set("Bob", "bal", 99)
    commit(c, {("Bob", "bal"): 20})
    expect(t.commit(), False, "commit() over a newer committed write")
    expect(read(c, "Bob", "bal"), 20, "value after the aborted commit")
    expect(locks(c), [], "locks after the abort")


@battery.check("a write committed before start_ts does not conflict")
def _ww_before(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    commit(c, {("Bob", "bal"): 20})
    t = commit(c, {("Bob", "bal"): 30}, cls=cls)
    expect(t.outcome, True, "commit() over older writes")
    expect(read(c, "Bob", "bal"), 30, "value")


@battery.check("a lock above start_ts conflicts")
def _lock_above(cls):
    c = new_cluster()
    t = cls(c)
    t.set("Bob", "bal", 1)
    other = prewrite_only(c, {("Bob", "bal"): 2})
    expect(t.commit(), False, "commit() over a newer transaction's lock")
    expect(locks(c), [("Bob", "bal", other.start_ts)], "locks after the abort")


@battery.check("a lock below start_ts conflicts")
def _lock_below(cls):
    c = new_cluster()
    other = prewrite_only(c, {("Bob", "bal"): 2})
    t = cls(c)
    t.set("Bob", "bal", 1)
    expect(t.commit(), False, "commit() over an older transaction's lock")
    expect(locks(c), [("Bob", "bal", other.start_ts)], "locks after the abort")


@battery.check("a conflict on a secondary rolls back the primary's lock")
def _secondary_conflict(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    t = cls(c)
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    other = prewrite_only(c, {("Joe", "bal"): 5})
    expect(t.commit(), False, "commit() with a locked secondary")
    expect(locks(c), [("Joe", "bal", other.start_ts)], "locks after the abort")
    expect(read(c, "Bob", "bal"), 10, "the primary's value")


@battery.check("two concurrent writers of one cell: exactly one commits")
def _race(cls):
    c = new_cluster()
    a, b = cls(c), cls(c)
    a.set("Bob", "bal", 1)
    b.set("Bob", "bal", 2)
    expect((a.commit(), b.commit()), (True, False), "outcomes (first, second)")
    expect(write_records(c, "Bob", "bal"), [(a.commit_ts, f"data @ {a.start_ts}")],
           "Bob.bal:write")


@battery.check("a crashed holder's lock still makes the prewrite fail")
def _dead_holder(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    commit(c, {("Bob", "bal"): 3, ("Joe", "bal"): 9}, crash_after="prewrite")
    t = cls(c)
    t.set("Joe", "bal", 7)
    expect(t.commit(), False, "commit() meeting a crashed client's lock")
    again = commit(c, {("Joe", "bal"): 7}, cls=cls)
    expect(again.outcome, True, "a retry after the cleanup")
    expect(read(c, "Joe", "bal"), 7, "value after the retry")


# -- mutants ------------------------------------------------------------------

def _prewrite(self, m, primary, *, ww=True, lock_any=True, lock_max=None, write_lock=True,
              data_for_delete=False, name_primary=True, ww_before=False):
    column, is_primary = m.cell.column, m.cell == primary
    step = "prewrite-primary" if is_primary else "prewrite-secondary"
    with self._row_txn(m.cell.table, m.cell.row, step) as rt:
        if ww_before and rt.read(write_col(column), self.start_ts) is not None:
            return False
        if ww and rt.read(write_col(column), min_ts=self.start_ts) is not None:
            return False
        if lock_any and rt.read(lock_col(column), lock_max) is not None:
            return False
        if m.kind is WriteKind.PUT or data_for_delete:
            rt.write(data_col(column), self.start_ts, m.value if m.value is not None else "")
        if write_lock:
            points_at = primary if name_primary else m.cell
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, points_at, is_primary, self.client, m.kind))
        return True


def _mutant(name, **kw):
    return type(name, (Transaction,), {"prewrite": lambda self, m, p: _prewrite(self, m, p, **kw)})


mutants = {
    "prewrite without the lock check": _mutant("NoLockCheck", lock_any=False),
    "prewrite without the write-write check": _mutant("NoWriteCheck", ww=False),
    "prewrite checking only locks at or below start_ts":
        type("LockBelowOnly", (Transaction,), {"prewrite": lambda self, m, p: _prewrite(
            self, m, p, lock_max=self.start_ts)}),
    "prewrite checking write records before start_ts": _mutant("WwBefore", ww=False, ww_before=True),
    "prewrite writing data but no lock": _mutant("NoLock", write_lock=False),
    "prewrite with locks naming themselves as primary": _mutant("SelfPrimary", name_primary=False),
    "prewrite writing data for a delete": _mutant("DataForDelete", data_for_delete=True),
}
