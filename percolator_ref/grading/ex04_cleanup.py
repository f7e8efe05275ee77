"""Exercise 4: lazy lock cleanup (section 2.2, BackoffAndMaybeCleanupLock).

The student writes ``backoff_and_maybe_cleanup_lock(txn, cell, lock, attempt)``,
which a reader calls when it meets ``lock`` on ``cell`` at or below its
``start_ts``. The battery plugs it in for the reference implementation's
``cleanup.backoff_and_maybe_cleanup_lock`` (what ``get`` and ``scan`` call).
"""
from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

from percolator_ref import Transaction, cleanup
from percolator_ref.model import Cell, Write

from .battery import Battery
from .scenarios import (TTL, commit, crashed_transfer, expect, locks, new_cluster,
                        prewrite_only, read, write_records)

battery = Battery(4, "lock cleanup: roll forward, roll back, only for dead clients")
reference = cleanup.backoff_and_maybe_cleanup_lock


@contextmanager
def plugged(fn):
    with mock.patch.object(cleanup, "backoff_and_maybe_cleanup_lock", fn):
        yield


def _lock_on(c, row):
    return c.bigtable.versions("default", row, "bal:lock")[0][1]


@battery.check("a live holder: back off (sleep backoff_delay), change nothing")
def _live(fn):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    prewrite_only(c, {("Bob", "bal"): 3})
    before = c.bigtable.dump()
    reader = Transaction(c)
    for attempt in (0, 3):
        start = c.clock.now()
        fn(reader, Cell("default", "Bob", "bal"), _lock_on(c, "Bob"), attempt)
        assert c.bigtable.dump() == before, \
            f"attempt {attempt} changed the store: a live client's lock must be left alone"
        expect(round(c.clock.now() - start, 6), round(cleanup.backoff_delay(attempt, TTL), 6),
               f"seconds slept at attempt {attempt}")


@battery.check("crashed before the commit point: the secondary is rolled back")
def _roll_back_secondary(fn):
    c = new_cluster()
    crashed_transfer(c, "prewrite")
    with plugged(fn):
        expect(Transaction(c).get("Joe", "bal"), 2, "Joe.bal read after the crash")
    expect(locks(c), [], "locks after the cleanup (the primary's too)")


@battery.check("crashed before the commit point: the primary is rolled back")
def _roll_back_primary(fn):
    c = new_cluster()
    crashed_transfer(c, "prewrite")
    with plugged(fn):
        expect(Transaction(c).get("Bob", "bal"), 10, "Bob.bal read after the crash")
    expect(c.bigtable.versions("default", "Bob", "bal:lock"), [], "Bob.bal:lock")


@battery.check("the primary's lock is erased before the secondary's")
def _primary_first(fn):
    c = new_cluster()
    crashed_transfer(c, "prewrite")
    with plugged(fn), c.tracer.record() as events:
        Transaction(c).get("Joe", "bal")
    erased = [e.row for e in events for ch in e.changes if ch.column == "bal:lock" and ch.erased]
    expect(erased, ["Bob", "Joe"], "rows whose lock was erased, in order")


@battery.check("crashed after the commit point: rolled forward at the primary's commit_ts")
def _roll_forward(fn):
    c = new_cluster()
    t = crashed_transfer(c, "commit-primary")
    with plugged(fn):
        expect(Transaction(c).get("Joe", "bal"), 9, "Joe.bal read after the crash")
    expect(write_records(c, "Joe", "bal")[0], (t.commit_ts, f"data @ {t.start_ts}"),
           "newest Joe.bal:write")
    expect(locks(c), [], "locks after the roll forward")


@battery.check("a committed primary is never rolled back")
def _committed_primary_kept(fn):
    c = new_cluster()
    t = crashed_transfer(c, "commit-primary")
    reader = Transaction(c)
    fn(reader, Cell("default", "Joe", "bal"), _lock_on(c, "Joe"), 0)
    expect(write_records(c, "Bob", "bal")[0], (t.commit_ts, f"data @ {t.start_ts}"),
           "newest Bob.bal:write")
    expect((read(c, "Bob", "bal"), read(c, "Joe", "bal")), (3, 9), "balances")


@battery.check("a delete is rolled forward as a delete")
def _delete(fn):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10, ("Joe", "bal"): 2})
    commit(c, {("Bob", "bal"): 12, ("Joe", "bal"): None}, crash_after="commit-primary")
    with plugged(fn):
        expect(Transaction(c).get("Joe", "bal"), None, "Joe.bal after rolling a delete forward")


@battery.check("an expired token (TTL passed) counts as dead")
def _expired(fn):
    c = new_cluster()
    commit(c, {("Bob", "bal"): 10})
    prewrite_only(c, {("Bob", "bal"): 3})
    c.clock.advance(TTL + 1)
    reader = Transaction(c)
    with plugged(fn):
        fn(reader, Cell("default", "Bob", "bal"), _lock_on(c, "Bob"), 0)
    expect(locks(c), [], "locks after cleaning up an expired client")
    expect(c.clock.now(), TTL + 1, "clock (no waiting for a dead client)")


@battery.check("cleaning up the same lock twice is harmless")
def _twice(fn):
    c = new_cluster()
    crashed_transfer(c, "prewrite")
    lock = _lock_on(c, "Joe")
    reader = Transaction(c)
    fn(reader, Cell("default", "Joe", "bal"), lock, 0)
    after = c.bigtable.dump()
    fn(reader, Cell("default", "Joe", "bal"), lock, 1)
    assert c.bigtable.dump() == after, "a second cleanup of the same lock changed the store"


# -- mutants ------------------------------------------------------------------

def _make(*, check_alive=True, sleep=True, trust_write=True, touch_primary=True,
          forward_ts=None, primary_first=True):
    def fn(txn, cell, lock, attempt):
        c = txn.cluster
        if check_alive and c.lockservice.is_alive(lock.client):
            if sleep:
                c.clock.sleep(cleanup.backoff_delay(attempt, c.lockservice.ttl))
            return
        primary = Cell(*lock.primary)
        if not primary_first and not lock.is_primary:
            with txn._row_txn(cell.table, cell.row, "roll-back") as rt:
                if cleanup.held_lock(rt, cell.column, lock.start_ts) is not None:
                    cleanup.erase_lock_and_data(rt, cell.column, lock.start_ts)
        commit_ts = None
        if touch_primary or lock.is_primary:
            with txn._row_txn(primary.table, primary.row, "cleanup-primary") as rt:
                commit_ts = cleanup.find_commit_ts(rt, primary.column, lock.start_ts)
                if not trust_write:
                    commit_ts = None
                if commit_ts is None and cleanup.held_lock(rt, primary.column, lock.start_ts):
                    cleanup.erase_lock_and_data(rt, primary.column, lock.start_ts)
                if not trust_write:
                    rt.erase("%s:write" % primary.column, cleanup.find_commit_ts(
                        rt, primary.column, lock.start_ts) or 0)
        if lock.is_primary:
            return
        with txn._row_txn(cell.table, cell.row, "cleanup-secondary") as rt:
            if cleanup.held_lock(rt, cell.column, lock.start_ts) is None:
                return
            if commit_ts is None:
                cleanup.erase_lock_and_data(rt, cell.column, lock.start_ts)
            else:
                ts = txn.start_ts if forward_ts == "reader" else commit_ts
                cleanup.write_commit_record(rt, cell, Write(lock.start_ts, lock.kind), ts, False)
    return fn


mutants = {
    "cleanup of a live client's lock": _make(check_alive=False),
    "cleanup retrying without backing off": _make(sleep=False),
    "cleanup rolling back a committed primary": _make(trust_write=False),
    "cleanup rolling back the secondary only": _make(touch_primary=False),
    "cleanup rolling forward at the reader's start_ts": _make(forward_ts="reader"),
    "cleanup erasing the secondary before the primary": _make(primary_first=False),
}
