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
notebooks and tests; :class:`Worker` is the paper's worker process: scanner
threads over the notify index and a thread pool running the transactions.
"""
from __future__ import annotations

import itertools
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Optional

from . import cleanup
from .errors import ObserverLoopError
from .model import Cell, ack_col, check_cell, check_name, notify_col, write_col
from .step import Step
from .transaction import snapshot_read

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


# -- the worker: scanner threads and a thread pool -------------------------------

class Worker:
    """A Percolator worker (section 2.4): scanners over the notify index, a pool of runs.

    ``scanners`` threads each start at a random notification (``seed``) and
    scan forward, wrapping around. Before handing a row's notifications to
    the pool a scanner claims the row in the lock service
    (``scan:<table>/<row>``); finding it claimed by another scanner, it jumps
    to a random place instead of queueing behind it (the paper's cure for
    "bus clumping"). The observer transactions run in a pool of ``threads``
    and share the worker's liveness token. Use as a context manager, or
    ``start()`` / ``stop()``; ``runs`` counts committed observer runs,
    ``jumps`` the scanners' jumps, ``errors`` exceptions from observers.
    """

    def __init__(self, cluster, scanners: int = 2, threads: int = 4, seed: int = 0,
                 idle_sleep: float = 0.002):
        for argument, value in (("scanners", scanners), ("threads", threads)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{argument} must be an int >= 1, got {value!r}")
            if value < 1:
                raise ValueError(f"{argument} must be >= 1, got {value}")
        self.cluster, self.seed, self.idle_sleep = cluster, seed, idle_sleep
        self.name = cluster.observers.next_worker_name()
        self.n_scanners, self.n_threads = scanners, threads
        self.runs = self.jumps = self.submitted = 0
        self.errors: list = []
        self._inflight: set = set()
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(2 * threads)
        self._stop = threading.Event()
        self._threads: list = []
        self._pool: Optional[ThreadPoolExecutor] = None

    def __repr__(self):
        return f"<Worker {self.name} runs={self.runs} jumps={self.jumps}>"

    def start(self) -> "Worker":
        self.cluster.lockservice.register(self.name)
        self._pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix=self.name)
        for i in range(self.n_scanners):
            thread = threading.Thread(target=self._scan, args=(i,), daemon=True,
                                      name=f"{self.name}/scanner{i}")
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        """Stop scanning, finish the runs in flight, and release the worker's token."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.cluster.lockservice.release(self.name)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def idle(self) -> bool:
        """No observer run in flight."""
        with self._lock:
            return not self._inflight

    # -- a scanner thread --------------------------------------------------
    def _scan(self, i: int) -> None:
        me = f"{self.name}/scanner{i}"
        ls = self.cluster.lockservice
        ls.register(me)
        rng = random.Random(f"{self.seed}/{self.name}/{i}")
        position = self._random_position(rng)
        while not self._stop.is_set():
            ls.heartbeat(me)
            ls.heartbeat(self.name)
            found, wrapped = self._next_after(position)
            if found is None or wrapped:
                self._stop.wait(self.idle_sleep)   # swept the whole index: rest a moment
            if found is None:
                position = None
                continue
            region = found[:2]
            position = (found[0], found[1] + "\0")          # just past this row
            if self._claimed_here(region):
                continue                           # our own pool is already on it
            lock_name = f"scan:{region[0]}/{region[1]}"
            if not ls.try_acquire(lock_name, me):
                with self._lock:
                    self.jumps += 1                # bus clumping: jump, don't queue behind
                position = self._random_position(rng)
                continue
            self._submit(region, lock_name, me)
        ls.release(me)

    def _next_after(self, position):
        """The first notification at or after ``position``, wrapping around once."""
        found = next(self.cluster.bigtable.notifications(position), None)
        if found is None and position is not None:
            return next(self.cluster.bigtable.notifications(), None), True
        return found, False

    def _random_position(self, rng: random.Random):
        pending = list(self.cluster.bigtable.notifications())
        return rng.choice(pending) if pending else None

    def _claimed_here(self, region) -> bool:
        with self._lock:
            return region in self._inflight

    def _submit(self, region, lock_name: str, owner: str) -> None:
        while not self._slots.acquire(timeout=0.05):
            if self._stop.is_set():
                self.cluster.lockservice.release_lock(lock_name, owner)
                return
        with self._lock:
            self._inflight.add(region)
            self.submitted += 1
        self._pool.submit(self._process_row, region, lock_name, owner)

    # -- a pool thread -------------------------------------------------------
    def _process_row(self, region, lock_name: str, owner: str) -> None:
        table, row = region
        try:
            for notification in self.cluster.bigtable.notifications((table, row)):
                if notification[:2] != region:
                    break
                runs = process_notification(self.cluster, notification, client=self.name)
                with self._lock:
                    self.runs += runs
        except Exception as e:        # an observer raised: the notification stays pending
            with self._lock:
                self.errors.append(e)
        finally:
            with self._lock:
                self._inflight.discard(region)
            self.cluster.lockservice.release_lock(lock_name, owner)
            self._slots.release()


def wait_until_quiet(cluster, workers, timeout: float = 60.0, poll: float = 0.005) -> bool:
    """Wait (wall time) until no notification is pending and every worker is idle."""
    import time
    deadline = time.monotonic() + timeout
    quiet_polls = 0
    while time.monotonic() < deadline:
        quiet = (next(cluster.bigtable.notifications(), None) is None
                 and all(w.idle() for w in workers))
        quiet_polls = quiet_polls + 1 if quiet else 0
        if quiet_polls >= 3:
            return True
        time.sleep(poll)
    return False
