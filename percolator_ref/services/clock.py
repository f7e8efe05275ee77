"""Clocks: the wall clock, and a manual clock for deterministic notebooks and tests.

The lock service judges liveness on the cluster clock, and a transaction that
waits for a live lock sleeps on it. ``ManualClock.sleep`` advances simulated
time instead of blocking, so a single-threaded scenario that waits on a lock
reaches the lock TTL deterministically.
"""
import threading
import time


class WallClock:
    """Real time: ``now()`` is ``time.monotonic()``; ``sleep`` blocks."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def __repr__(self):
        return "WallClock()"


class ManualClock:
    """A clock that moves only when told to.

    >>> c = ManualClock()
    >>> c.now()
    0.0
    >>> c.advance(2.5); c.now()
    2.5
    """

    def __init__(self, start: float = 0.0):
        if isinstance(start, bool) or not isinstance(start, (int, float)):
            raise TypeError(f"start must be a number, got {start!r}")
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"seconds must be a number, got {seconds!r}")
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        """Simulated waiting: advance the clock and yield the thread once."""
        self.advance(seconds)
        time.sleep(0)

    def __repr__(self):
        return f"ManualClock(now={self._now})"
