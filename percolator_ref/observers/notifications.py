"""Observers and notifications (paper section 2.4).

An *observer* is a function bound to a (table, column). A committed write to
an observed column also sets ``c:notify`` at its commit_ts: for the primary in
the same row transaction as its write record (the commit point), for the
secondaries and for weak notifications just BEFORE the commit point
(:meth:`~percolator_ref.transaction.Transaction.write_notifications`), so a
client that dies after its commit point cannot lose them;
the Bigtable keeps every pending notification in ``notify_index``, the
paper's separate locality group, so finding dirty cells never reads the
whole table. ``txn.notify(row, column, table)`` sets ``c:notify`` without a
write (a *weak notification*).

Processing one notification ``(table, row, column)`` for observer ``O``:

1. begin a transaction; in one row transaction read the newest ``c:notify``
   at or below ``start_ts`` and the acknowledgement ``c:ack_O`` (its snapshot
   value is the start_ts of ``O``'s last committed run);
2. notified after the last acknowledgement: buffer the new acknowledgement
   (``c:ack_O`` = this ``start_ts``, written FIRST so it is the primary),
   call ``O(txn, row, column)``, commit; on a conflict retry from 1.
   Already acknowledged: do nothing (message collapsing: several writes
   before a run collapse into one run, and a later run finds them done);
3. after the run committed, erase the ``c:notify`` versions that every
   observer of the column has acknowledged; a newer notification stays.

The acknowledgement is itself a Percolator column, hidden from ``get`` and
``scan``: its physical columns are ``c:ack_O:data`` (the run's start_ts),
``c:ack_O:lock`` and ``c:ack_O:write``. Writing it inside the observer's
transaction is what gives the paper's guarantee: of two runs of one
notification, at most one commits (they conflict on ``c:ack_O``). Its lock
is the run's primary, so the run commits exactly when its acknowledgement
does, and a crashed run is settled by the ordinary lazy cleanup.

:func:`run_observers` is the deterministic single-threaded runner used by
notebooks and tests; :class:`~percolator_ref.worker.Worker` is the paper's
worker process: scanner threads over the notify index and a thread pool
running the transactions.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Callable, Optional

from .. import cleanup
from ..errors import ObserverLoopError
from ..model import Cell, ack_col, check_cell, check_name, notify_col, write_col
from ..step import Step
from ..transaction import snapshot_read

RETRY_LIMIT = 1000      # conflicts in a row before a run gives up (a livelock guard)


@dataclass(frozen=True)
class Observer:
    """``fn(txn, row, column)`` run when ``table``/``column`` is written.

    ``registered_ts``: the oracle's next timestamp when it was registered; a
    notification older than that (a write committed before the observer
    existed) does not trigger it.
    """
    name: str
    table: str
    column: str
    fn: Callable
    registered_ts: int = 0

    def ack_cell(self, row: str) -> Cell:
        """The hidden Percolator cell ``column:ack_<name>`` of ``row``."""
        return Cell(self.table, row, ack_col(self.column, self.name))


class ObserverRegistry:
    """Observers by (table, column); several may watch one column."""

    def __init__(self):
        self._by_column: dict[tuple, list] = {}
        self._lock = threading.Lock()
        self._workers = itertools.count(1)

    def add(self, table: str, column: str, fn: Callable, name: Optional[str] = None,
            registered_ts: int = 0) -> Observer:
        """Register ``fn``; ``name`` (default ``fn.__name__``) names its ack column."""
        check_cell("row", column, table)
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        name = name if name is not None else getattr(fn, "__name__", "observer")
        check_name(name, "name")
        if ":" in name:
            raise ValueError(f"name must not contain ':' (it names the ack column), got {name!r}")
        with self._lock:
            if any(o.name == name for o in self._by_column.get((table, column), ())):
                raise ValueError(f"name {name!r} already observes {table}/{column}: "
                                 f"each observer of a column needs its own ack column")
            observer = Observer(name, table, column, fn, registered_ts)
            self._by_column.setdefault((table, column), []).append(observer)
        return observer

    def watches(self, table: str, column: str) -> bool:
        return (table, column) in self._by_column

    def for_column(self, table: str, column: str) -> list:
        return list(self._by_column.get((table, column), ()))

    def all(self) -> list:
        return [o for obs in list(self._by_column.values()) for o in obs]

    def next_worker_name(self) -> str:
        """A fresh worker name (``worker-1``, ``worker-2`` ...): each incarnation its own token."""
        return f"worker-{next(self._workers)}"


# -- one observer run ---------------------------------------------------------

def pending_notification(txn, observer: Observer, row: str) -> Optional[int]:
    """Step 1, one row transaction: the newest unacknowledged notify ts, or None.

    Reads ``c:notify`` at or below ``start_ts`` and the snapshot value of
    ``c:ack_O``; a lock on the ack (another run of this notification) is
    waited for or cleaned up exactly as ``get`` does.
    """
    ack = observer.ack_cell(row)
    attempt = 0
    while True:
        with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
            notified = rt.read(notify_col(observer.column), txn.start_ts)
            acked = snapshot_read(rt, txn.start_ts, ack.column)
            pending = _unacknowledged(observer, notified, acked.value)
            rt.explain(_explain_check(observer, row, notified, acked, pending))
        if acked.lock is None:
            return pending
        cleanup.backoff_and_maybe_cleanup_lock(txn.session, ack, acked.lock, attempt)
        attempt += 1


def _unacknowledged(observer: Observer, notified, acked_start) -> Optional[int]:
    if notified is None or notified[0] < observer.registered_ts:
        return None                  # nothing, or a write from before the observer existed
    if acked_start is not None and notified[0] < acked_start:
        return None                  # a run that started after this write already ran
    return notified[0]


def _explain_check(observer, row, notified, acked, pending) -> str:
    where = f"{observer.table}/{row}.{observer.column}"
    if acked.lock is not None:
        return f"observer {observer.name} on {where}: ack locked by {acked.lock.client} -> wait"
    ack = "none" if acked.value is None else f"run started @ {acked.value}"
    if pending is None:
        newest = "none" if notified is None else f"@ {notified[0]}"
        return (f"observer {observer.name} on {where}: newest notify {newest}, last ack {ack} "
                f"-> already acknowledged, nothing to do")
    return (f"observer {observer.name} on {where}: notify @ {pending} newer than last ack "
            f"{ack} -> run the observer")


def run_observer(cluster, observer: Observer, row: str, *, client: Optional[str] = None,
                 crash_after=None, before_run: Optional[Callable] = None) -> bool:
    """Steps 1-2 for one observer and row; True if a run committed.

    Retried on conflict with a fresh transaction. ``before_run()`` is called
    just before the observer function (``run_observers`` counts runs there).
    ``crash_after`` is passed to the run's ``commit`` (fault injection). An
    exception from the observer abandons its transaction (nothing is
    written, the notification stays pending) and propagates.
    """
    for attempt in range(RETRY_LIMIT):
        txn = cluster.begin(client=client)
        if pending_notification(txn, observer, row) is None:
            txn.commit()                                  # read-only: writes nothing
            return False
        if before_run is not None:
            _guarded(txn, before_run)
        txn.acknowledge(observer.ack_cell(row))        # the primary
        _guarded(txn, observer.fn, txn, row, observer.column)
        if txn.commit(crash_after=crash_after):
            return True
        txn.session.backoff(attempt)
    raise RuntimeError(f"observer {observer.name} on {row!r}: {RETRY_LIMIT} conflicts in a row")


def _guarded(txn, fn: Callable, *args) -> None:
    """Call ``fn``; if it raises, abandon ``txn`` without writing anything and re-raise."""
    try:
        fn(*args)
    except BaseException:
        txn.abandon()
        raise


def clear_notification(cluster, table: str, row: str, column: str, client: str = "observers") -> bool:
    """Step 3, one row transaction: erase the notify versions every observer acknowledged.

    A version at ``n`` is acknowledged by observer ``O`` if ``O``'s newest
    committed ack holds a start_ts above ``n`` (or ``O`` was registered after
    ``n``). Returns True if the cell has no pending notification left.
    """
    observers = cluster.observers.for_column(table, column)
    with cluster.bigtable.row_transaction(table, row, client=client, step=Step.CLEAR_NOTIFY) as rt:
        acks = [(o, _committed_ack(rt, ack_col(column, o.name))) for o in observers]
        versions = [ts for ts, _ in rt.versions(notify_col(column))]
        done = [ts for ts in versions
                if all(ts < o.registered_ts or (a is not None and ts < a) for o, a in acks)]
        for ts in done:
            rt.erase(notify_col(column), ts)
        rt.explain(f"clear {table}/{row}.{column}:notify: erase versions {done} acknowledged "
                   f"by every observer; keep {[ts for ts in versions if ts not in done]}")
    return len(done) == len(versions)


def _committed_ack(rt, ack_column: str) -> Optional[int]:
    """The start_ts of the newest committed run (the ack's write record points at it)."""
    found = rt.read(write_col(ack_column))
    return None if found is None else found[1].start_ts


def process_notification(cluster, notification: tuple, *, client: Optional[str] = None,
                         crash_after=None, before_run: Optional[Callable] = None) -> int:
    """Run every observer of ``(table, row, column)`` once if needed, then clear it.

    Returns the number of observer runs that committed. ``client`` shares a
    worker's token among the runs (default: each run is its own client).
    """
    table, row, column = notification
    runs = 0
    for observer in cluster.observers.for_column(table, column):
        runs += run_observer(cluster, observer, row, client=client,
                             crash_after=crash_after, before_run=before_run)
    clear_notification(cluster, table, row, column, client or "observers")
    return runs


# -- the deterministic runner ----------------------------------------------------

def run_observers(cluster, max_runs: Optional[int] = None) -> int:
    """Process notifications in index order until none is pending; the committed runs.

    Single-threaded and deterministic. Runs' writes set new notifications,
    which are processed in a later sweep of the same call. ``max_runs``
    bounds the committed runs: needing one more raises
    :class:`~percolator_ref.errors.ObserverLoopError` (before that run starts).
    """
    if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int)):
        raise TypeError(f"max_runs must be None or an int >= 0, got {max_runs!r}")
    if max_runs is not None and max_runs < 0:
        raise ValueError(f"max_runs must be >= 0, got {max_runs}")
    runs = 0

    def count_run():
        if max_runs is not None and runs >= max_runs:
            raise ObserverLoopError(f"run_observers passed max_runs={max_runs}: "
                                    f"observers keep triggering each other (a loop?)")

    while True:
        pending = list(cluster.bigtable.notifications())
        if not pending:
            return runs
        for notification in pending:
            runs += process_notification(cluster, notification, before_run=count_run)
