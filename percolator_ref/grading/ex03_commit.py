"""Exercise 3: commit (Figure 6, Commit after the prewrites).

The student overrides ``_two_phase_commit(self) -> bool`` (prewrite is
given) and ``_commit_primary(self, m) -> bool`` (the commit point). The
reference implementation does everything else.
"""
from __future__ import annotations

from percolator_ref import ClientCrash, Transaction
from percolator_ref import cleanup

from .battery import Battery
from .scenarios import (commit, crashed_transfer, expect, locks, new_cluster, on_step, read,
                        write_records)

battery = Battery(3, "commit: the primary's commit point, then the secondaries")
reference = Transaction


def _transfer(cls):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    t = cls(c)
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    return c, t


@battery.check("a transfer commits: write records at commit_ts, no locks")
def _commits(cls):
    c, t = _transfer(cls)
    expect(t.commit(), True, "commit()")
    assert t.commit_ts is not None and t.commit_ts > t.start_ts, \
        f"commit_ts must be a new timestamp above start_ts {t.start_ts}, got {t.commit_ts!r}"
    for row in ("Bob", "Joe"):
        expect(write_records(c, row, "bal")[0], (t.commit_ts, f"data @ {t.start_ts}"),
               f"newest {row}.bal:write")
    expect(locks(c), [], "locks after commit")
    expect((read(c, "Bob", "bal"), read(c, "Joe", "bal")), (3, 9), "balances")


@battery.check("commit_ts is taken from the oracle after the prewrites")
def _commit_ts_after_prewrite(cls):
    c, t = _transfer(cls)
    seen = {}
    on_step(c, lambda client, table, row, step: seen.__setitem__("peek", c.oracle.peek())
            if step.startswith("prewrite") else None)
    t.commit()
    assert t.commit_ts is not None and t.commit_ts >= seen.get("peek", 0), \
        (f"commit_ts {t.commit_ts} was not taken after the last prewrite "
         f"(the oracle was at {seen.get('peek')} then)")


@battery.check("the primary is committed before any secondary")
def _primary_first(cls):
    c, t = _transfer(cls)
    with c.tracer.record() as events:
        t.commit()
    rows = [e.row for e in events if any(ch.column == "bal:write" and not ch.erased
                                         for ch in e.changes)]
    expect(rows, ["Bob", "Joe"], "rows in the order their write records were written")


@battery.check("a crash at the commit point leaves the secondaries locked")
def _crash_commit_point(cls):
    c = new_cluster()
    t = crashed_transfer(c, "commit-primary", cls=cls)
    expect(t.outcome, "crashed", "commit(crash_after='commit-primary')")
    expect(locks(c), [("Joe", "bal", t.start_ts)], "locks left by the crash")
    expect(read(c, "Joe", "bal"), 9, "a reader rolls the secondary forward")


@battery.check("a crash before the commit point commits nothing")
def _crash_before(cls):
    c = new_cluster()
    t = cls(c)
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    t = cls(c)
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    try:
        t.commit(crash_after=2)          # both prewrites, nothing else
    except ClientCrash:
        pass
    expect((read(c, "Bob", "bal"), read(c, "Joe", "bal")), (10, 2), "balances")


@battery.check("primary lock gone at the commit point: abort, nothing visible")
def _lock_gone(cls):
    c, t = _transfer(cls)
    fired = []

    def cleaner(client, table, row, step):
        if client == t.client and step == "commit-primary" and not fired:
            fired.append(True)
            c.clock.advance(c.lock_ttl + 1)            # t looks dead to others...
            Transaction(c).get("Bob", "bal")           # ...so a reader rolls it back
    on_step(c, cleaner)
    expect(t.commit(), False, "commit() after a cleaner erased the primary lock")
    assert fired, "no row transaction with step 'commit-primary' ran"
    expect(locks(c), [], "locks after the abort (secondaries rolled back by the client)")
    expect((read(c, "Bob", "bal"), read(c, "Joe", "bal")), (10, 2), "balances")


@battery.check("a write-write conflict returns False and leaves nothing")
def _conflict(cls):
    c, t = _transfer(cls)
    commit(c, {("Joe", "bal"): 5})
    expect(t.commit(), False, "commit()")
    expect(t.commit_ts, None, "commit_ts after an abort")
    expect((read(c, "Bob", "bal"), read(c, "Joe", "bal")), (10, 5), "balances")


@battery.check("a weak notification is written at commit_ts")
def _notify(cls):
    c = new_cluster()
    t = cls(c)
    t.notify("doc1", "contents", table="docs")
    expect(t.commit(), True, "commit() of a notify")
    expect(c.bigtable.versions("docs", "doc1", "contents:notify"), [(t.commit_ts, True)],
           "docs/doc1 contents:notify")


# -- mutants ------------------------------------------------------------------

def _sequence(self, *, primary_first=True, check_lock=True, ts_early=False, roll_back=True,
              crash_point=True, notify=True):
    mutations = list(self.writes.values())
    if ts_early:
        self.commit_ts = self.cluster.oracle.get_timestamp()
    if mutations and not self._prewrite_all(mutations):
        self.commit_ts = None
        return False
    if not ts_early:
        self.commit_ts = self.cluster.oracle.get_timestamp()
    if mutations:
        primary, secondaries = mutations[0], mutations[1:]
        if not primary_first:
            for m in secondaries:
                self._commit_secondary(m)
        if not _commit_primary(self, primary, check_lock):
            self.commit_ts = None
            if roll_back:
                self._roll_back_own(secondaries)
            return False
        if crash_point:
            self._crash_point("commit-primary")
        if primary_first:
            for m in secondaries:
                self._commit_secondary(m)
    if notify:
        for cell in self.notifies:
            self._write_weak_notification(cell)
    return True


def _commit_primary(self, m, check_lock=True):
    with self._row_txn(m.cell.table, m.cell.row, "commit-primary") as rt:
        if check_lock and cleanup.held_lock(rt, m.cell.column, self.start_ts) is None:
            return False
        self._write_record(rt, m)
        return True


def _mutant(name, **kw):
    return type(name, (Transaction,), {"_two_phase_commit": lambda self: _sequence(self, **kw)})


mutants = {
    "commit writing secondaries before the primary": _mutant("SecondariesFirst", primary_first=False),
    "commit skipping the lock check at the commit point": _mutant("NoLockCheck", check_lock=False),
    "commit taking commit_ts before the prewrites": _mutant("EarlyTs", ts_early=True),
    "commit leaving its secondaries locked after an abort": _mutant("NoRollBack", roll_back=False),
    "commit without the commit-primary crash point": _mutant("NoCrashPoint", crash_point=False),
    "commit dropping weak notifications": _mutant("NoNotify", notify=False),
}
