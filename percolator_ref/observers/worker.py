"""The paper's worker (§2.4): scanner threads over the notify index, a pool of observer runs.

The protocol of one observer run lives in :mod:`percolator_ref.observers`;
this module is the runtime around it: where notifications are found and
which thread runs them.
"""
from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from .notifications import process_notification


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
