"""Exercise 6: observers — acknowledgement and message collapsing (section 2.4).

The student writes ``pending_notification(txn, observer, row)`` (step 1: the
newest notification at or below start_ts that the observer has not
acknowledged, else None) and ``run_observer(cluster, observer, row,
client=None, crash_after=None) -> bool`` (step 2: run the observer with its
acknowledgement in the same transaction). The battery plugs them into
:mod:`percolator_ref.observers`; ``run_observers`` and the notification
clearing are the reference implementation.
"""
from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from unittest import mock

from percolator_ref import ClientCrash, Transaction, observers
from percolator_ref.model import WriteKind, notify_col
from percolator_ref.transaction import Mutation

from .battery import Battery
from .scenarios import commit, expect, new_cluster, read

battery = Battery(6, "observers: acknowledgement and message collapsing")


_RUN_OBSERVER = observers.run_observer


def _reference_run(cluster, observer, row, client=None, crash_after=None):
    return _RUN_OBSERVER(cluster, observer, row, client=client, crash_after=crash_after)


reference = SimpleNamespace(pending_notification=observers.pending_notification,
                            run_observer=_reference_run)


@contextmanager
def plugged(impl):
    def run(cluster, observer, row, *, client=None, crash_after=None, before_run=None):
        return impl.run_observer(cluster, observer, row, client=client, crash_after=crash_after)
    with mock.patch.object(observers, "run_observer", run), \
            mock.patch.object(observers, "pending_notification", impl.pending_notification):
        yield


def _doc_cluster():
    """docs/<row>.contents observed by ``upper``, which writes docs/<row>.upper."""
    c = new_cluster()
    seen = []

    @c.observe("docs", "contents")
    def upper(txn, row, column):
        value = txn.get(row, column, table="docs")
        seen.append(value)
        txn.set(row, "upper", str(value).upper(), table="docs")
    return c, seen


def _run(c, impl):
    with plugged(impl):
        return c.run_observers()


@battery.check("a write triggers its observer once")
def _once(impl):
    c, seen = _doc_cluster()
    commit(c, {("d1", "contents"): "hello"}, table="docs")
    expect(_run(c, impl), 1, "runs")
    expect(read(c, "d1", "upper", table="docs"), "HELLO", "docs/d1.upper")
    expect(_run(c, impl), 0, "runs of a second run_observers()")


@battery.check("several writes before a run collapse into one run")
def _collapse(impl):
    c, seen = _doc_cluster()
    for text in ("a", "b", "c"):
        commit(c, {("d1", "contents"): text}, table="docs")
    expect(_run(c, impl), 1, "runs after three writes")
    expect(seen, ["c"], "values the observer saw")


@battery.check("an acknowledged notification does not run again")
def _acked(impl):
    c, seen = _doc_cluster()
    t = commit(c, {("d1", "contents"): "hello"}, table="docs")
    _run(c, impl)
    c.bigtable.write("docs", "d1", notify_col("contents"), True, t.commit_ts)   # a stale notify
    expect(_run(c, impl), 0, "runs for a notification the ack already covers")
    expect(seen, ["hello"], "values the observer saw")


@battery.check("a write after a run triggers a new run")
def _again(impl):
    c, seen = _doc_cluster()
    commit(c, {("d1", "contents"): "a"}, table="docs")
    _run(c, impl)
    commit(c, {("d1", "contents"): "b"}, table="docs")
    expect(_run(c, impl), 1, "runs after the second write")
    expect(seen, ["a", "b"], "values the observer saw")


@battery.check("two observers of one column each run once")
def _two(impl):
    c, seen = _doc_cluster()
    lengths = []
    c.observe("docs", "contents", name="length")(
        lambda txn, row, column: lengths.append(len(txn.get(row, column, table="docs"))))
    commit(c, {("d1", "contents"): "hello"}, table="docs")
    expect(_run(c, impl), 2, "runs")
    expect((seen, lengths), (["hello"], [5]), "what each observer saw")


@battery.check("a weak notification triggers a run")
def _weak(impl):
    c, seen = _doc_cluster()
    commit(c, {("d1", "contents"): "hi"}, table="docs")
    _run(c, impl)
    t = Transaction(c)
    t.notify("d1", "contents", table="docs")
    t.commit()
    expect(_run(c, impl), 1, "runs after a weak notification")


@battery.check("a write from before the observer existed does not trigger it")
def _registered_later(impl):
    c = new_cluster()
    c.observe("docs", "x", name="early")(lambda txn, row, column: None)
    commit(c, {("d1", "x"): 1}, table="docs")             # sets docs/d1 x:notify
    c.observers._by_column.clear()                        # the early observer goes away
    c.observe("docs", "x", name="late")(lambda txn, row, column: None)
    expect(_run(c, impl), 0, "runs of an observer registered after the write")


@battery.check("a run that crashes before committing is redone")
def _crash(impl):
    c, seen = _doc_cluster()
    commit(c, {("d1", "contents"): "hello"}, table="docs")
    observer = c.observers.for_column("docs", "contents")[0]
    try:
        impl.run_observer(c, observer, "d1", crash_after="prewrite")
    except ClientCrash:
        pass
    expect(_run(c, impl), 1, "runs after the crashed run")
    expect(read(c, "d1", "upper", table="docs"), "HELLO", "docs/d1.upper")


# -- mutants ------------------------------------------------------------------

def _pending(*, use_ack=True, registered=True):
    def pending(txn, observer, row):
        ack = observer.ack_cell(row)
        with txn._row_txn(observer.table, row, "observer-check") as rt:
            notified = rt.read(notify_col(observer.column), txn.start_ts)
            acked = txn._snapshot_read(rt, ack)
        if notified is None or (registered and notified[0] < observer.registered_ts):
            return None
        if use_ack and acked.value is not None and notified[0] < acked.value:
            return None
        return notified[0]
    return pending


def _runner(*, pending, write_ack=True, ack_apart=False, each_version=False):
    def run(cluster, observer, row, client=None, crash_after=None):
        txn = cluster.begin(client=client)
        if pending(txn, observer, row) is None:
            txn.commit()
            return False
        ack = observer.ack_cell(row)
        if ack_apart:
            t = cluster.begin(client=client)
            t.writes[ack] = Mutation(ack, WriteKind.PUT, txn.start_ts)
            t.commit()
        elif write_ack:
            txn.writes[ack] = Mutation(ack, WriteKind.PUT, txn.start_ts)
        versions = cluster.bigtable.versions(observer.table, row, notify_col(observer.column))
        for _ in (versions if each_version else [None]):
            observer.fn(txn, row, observer.column)
        return txn.commit(crash_after=crash_after)
    return run


def _mutant(pending=None, **kw):
    pending = pending or _pending()
    return SimpleNamespace(pending_notification=pending, run_observer=_runner(pending=pending, **kw))


mutants = {
    "observer ignoring its ack": _mutant(pending=_pending(use_ack=False)),
    "observer never writing its ack": _mutant(write_ack=False),
    "observer committing its ack in a separate transaction": _mutant(ack_apart=True),
    "observer running once per write (no collapsing)": _mutant(each_version=True),
    "observer ignoring when it was registered": _mutant(pending=_pending(registered=False)),
}
