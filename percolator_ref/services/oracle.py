"""The timestamp oracle (paper section 2.3).

Hands out strictly increasing integer timestamps. To scale, it allocates
*ranges*: before serving any timestamp of a new range it persists the range's
end (the high-water mark) to ``state_path``; timestamps inside the range come
from memory. After a crash the new oracle starts at the persisted mark, so it
skips what the old one had not handed out yet and never goes back.

:class:`BatchingOracleClient` is the client side of the paper's other trick:
each worker keeps at most one request to the oracle in flight, and callers
that arrive meanwhile share the next request (one RPC for many timestamps).

The state file's format and its durable writing live in
:mod:`percolator_ref.oracle_state`.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

from ..errors import OracleExhausted
from ..model import MAX_TIMESTAMP
from .oracle_state import (STATE_MAGIC, format_high_water_mark, parse_high_water_mark,
                           read_high_water_mark, write_high_water_mark)

__all__ = ["BatchingOracleClient", "TimestampOracle", "STATE_MAGIC", "format_high_water_mark",
           "parse_high_water_mark", "read_high_water_mark", "write_high_water_mark"]

DEFAULT_RANGE = 100_000


class TimestampOracle:
    """Strictly increasing timestamps, with a persisted high-water mark.

    ``get_timestamp()`` returns the next integer; without a restart the
    numbers are consecutive from ``first_timestamp``. ``get_timestamps(n)``
    returns ``n`` consecutive ones as a ``range`` in one call. Thread-safe.
    ``calls`` counts oracle calls (RPCs), ``range_writes`` counts how often
    the high-water mark was persisted. A damaged ``state_path`` file raises
    :class:`~percolator_ref.errors.OracleStateCorrupt` here, at construction.
    """

    def __init__(self, state_path: Optional[str] = None, first_timestamp: int = 1,
                 range_size: int = DEFAULT_RANGE):
        if isinstance(first_timestamp, bool) or not isinstance(first_timestamp, int):
            raise TypeError(f"first_timestamp must be an int, got {first_timestamp!r}")
        if first_timestamp < 0:
            raise ValueError(f"first_timestamp must be >= 0, got {first_timestamp}")
        if isinstance(range_size, bool) or not isinstance(range_size, int) or range_size < 1:
            raise ValueError(f"range_size must be a positive int, got {range_size!r}")
        if state_path is not None and not isinstance(state_path, (str, os.PathLike)):
            raise TypeError(f"state_path must be a path or None, got {state_path!r}")
        self.state_path = os.fspath(state_path) if state_path is not None else None
        self.range_size = range_size
        self.calls = 0
        self.range_writes = 0
        self._lock = threading.Lock()
        self._next = max(first_timestamp, self._read_high_water_mark())
        self._limit = self._next            # first timestamp NOT yet covered by a persisted range

    # -- the high-water mark ---------------------------------------------
    def _read_high_water_mark(self) -> int:
        """The persisted mark (0 if none): no timestamp below it is ever reissued.

        An old-format file is rewritten in the v1 format at once (same mark).
        """
        if self.state_path is None or not os.path.exists(self.state_path):
            return 0
        with open(self.state_path, "rb") as f:
            raw = f.read()
        mark, old_format = parse_high_water_mark(self.state_path, raw)
        if old_format:
            write_high_water_mark(self.state_path, mark)
        return mark

    def _persist_high_water_mark(self, mark: int) -> None:
        """Durably record ``mark`` before any timestamp of its range is served."""
        if self.state_path is not None:
            write_high_water_mark(self.state_path, mark)
        self.range_writes += 1

    def _allocate_range(self, needed: int) -> None:
        """Persist a new range end covering at least ``needed`` more timestamps."""
        mark = self._next + max(self.range_size, needed)
        self._persist_high_water_mark(mark)
        self._limit = mark

    def _check_left(self, n: int) -> None:
        if self._next + n - 1 > MAX_TIMESTAMP:
            raise OracleExhausted(f"the oracle cannot hand out {n} more timestamp(s): the next "
                                  f"is {self._next} and MAX_TIMESTAMP is {MAX_TIMESTAMP}")

    # -- serving ---------------------------------------------------------
    def get_timestamp(self) -> int:
        """The next timestamp: larger than every one handed out before."""
        with self._lock:
            self.calls += 1
            self._check_left(1)
            if self._next >= self._limit:
                self._allocate_range(1)
            ts = self._next
            self._next += 1
            return ts

    def get_timestamps(self, n: int) -> range:
        """``n`` consecutive timestamps in one oracle call."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        with self._lock:
            self.calls += 1
            self._check_left(n)
            if self._next + n > self._limit:
                self._allocate_range(n)
            first = self._next
            self._next += n
            return range(first, first + n)

    @property
    def high_water_mark(self) -> int:
        """The end of the persisted range: a restart resumes here."""
        return self._limit

    def peek(self) -> int:
        """The timestamp the next call would return (for display only)."""
        return self._next

    def __repr__(self):
        return f"TimestampOracle(next={self._next}, high_water_mark={self._limit})"


class BatchingOracleClient:
    """One worker's oracle client: at most one request in flight.

    Threads calling ``get_timestamp()`` while a request is outstanding wait
    and are served together by the next request (``oracle.get_timestamps(k)``).
    ``requests`` counts the oracle calls this client made; ``served`` the
    timestamps it returned. Each caller gets a unique timestamp, and a
    caller's timestamps increase. If the request fails in any way (any
    ``BaseException``, an interrupt included), every caller of its batch
    raises that failure; later callers form a new batch.
    """

    def __init__(self, oracle: TimestampOracle):
        self.oracle = oracle
        self.requests = 0
        self.served = 0
        self._cond = threading.Condition()
        self._waiting = 0           # callers queued for the next request
        self._in_flight = False
        self._batch_id = 0          # id of the batch now being collected
        self._results: dict[int, list] = {}

    def get_timestamp(self) -> int:
        with self._cond:
            batch = self._batch_id
            self._waiting += 1
            while self._in_flight and batch == self._batch_id:
                self._cond.wait()
            if batch == self._batch_id:          # we lead this batch
                return self._lead_batch(batch)
            while batch not in self._results:   # a leader is fetching ours
                self._cond.wait()
            return self._take(batch)

    def _lead_batch(self, batch: int) -> int:
        count, self._waiting = self._waiting, 0
        self._in_flight = True
        self._batch_id += 1                       # later arrivals form the next batch
        self._cond.release()
        try:
            stamps = list(self.oracle.get_timestamps(count))
        except BaseException as error:           # every caller of this batch gets the error
            stamps = [error] * count             # (an interrupt too: nobody waits forever)
        finally:
            self._cond.acquire()
        self.requests += 1
        self._in_flight = False
        self._results[batch] = stamps
        self._cond.notify_all()
        return self._take(batch)

    def _take(self, batch: int) -> int:
        stamps = self._results[batch]
        ts = stamps.pop(0)
        if not stamps:
            del self._results[batch]
        if isinstance(ts, BaseException):
            raise ts
        self.served += 1
        return ts
