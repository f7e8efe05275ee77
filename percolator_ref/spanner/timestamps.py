"""Timestamps from TrueTime instead of the oracle: Spanner's answer to the single oracle.

Percolator asks one server, the oracle, for every start and commit timestamp
(§2.3). Spanner asks no one: each machine takes ``TT.now().latest`` from its
own TrueTime and keeps its timestamps strictly increasing (seed 004: a
timestamp is larger than every one the machine gave before). Two rules make
such timestamps as good as the oracle's:

- **commit wait**: a commit takes ``latest`` as its timestamp and does not
  let the commit become visible (nor tell the client) until ``TT.after`` it,
  that is until ``earliest`` has passed it: at most ``2ε`` (seed 004: 14 ms
  for ``ε`` = 7 ms). Whoever starts after the commit is acknowledged then
  reads on a clock that is past the commit timestamp, so sees the write:
  **external consistency**, real-time order kept;
- **read at a safe time**: a snapshot at ``t`` is read only once ``t`` has
  certainly passed (seed 004: a read-only transaction takes
  ``TT.now().latest`` and waits for the safe time before it reads). The kit's
  stand-in for Spanner's safe time: ``TT.after(start_ts)``. After it, every
  commit timestamp still to be chosen is above ``start_ts`` (it is a later
  ``latest``), and every writer whose commit timestamp is at or below it
  chose it before now, so had written its locks, which the read then meets:
  what the oracle's order guarantees in §2.3.

The kit's choice, not Spanner's: a node hands out only microseconds ``t``
with ``t % len(nodes) == node's index``, so two nodes never hand out the same
timestamp (the kit keys a transaction's data and its client name by
``start_ts``). This costs less than ``len(nodes)`` microseconds.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field


from .truetime import TrueTime, true_us


@dataclass
class Waits:
    """The waits a TrueTime source made, in microseconds of true time."""
    commit: list = field(default_factory=list)      # one per commit timestamp (0: none needed)
    start: list = field(default_factory=list)       # one per start timestamp

    def total_us(self) -> int:
        return sum(self.commit) + sum(self.start)


class TrueTimeTimestamps:
    """A timestamp source over a :class:`~percolator_ref.spanner.truetime.TrueTime`.

    ``commit_wait`` (default True): :meth:`commit_timestamp` waits until
    ``TT.after`` the timestamp before returning it. ``read_at_safe_time``
    (default True): :meth:`start_timestamp` waits likewise. Turning either
    off shows what it is for (notebook 10). Thread-safe; ``waits`` records
    every wait.
    """

    def __init__(self, truetime: TrueTime, *, commit_wait: bool = True,
                 read_at_safe_time: bool = True):
        if not isinstance(truetime, TrueTime):
            raise TypeError(f"truetime must be a TrueTime, got {truetime!r}")
        for name, value in (("commit_wait", commit_wait), ("read_at_safe_time", read_at_safe_time)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        self.truetime = truetime
        self.commit_wait, self.read_at_safe_time = commit_wait, read_at_safe_time
        self.last: dict = {node: None for node in truetime.nodes}
        self.waits = Waits()
        self.calls = 0
        self._lock = threading.Lock()

    def __repr__(self):
        return (f"<TrueTimeTimestamps ε={self.truetime.epsilon_us} us commit_wait="
                f"{self.commit_wait} read_at_safe_time={self.read_at_safe_time}>")

    # -- one node's timestamps -------------------------------------------------------
    def next_on(self, node: str, latest: int) -> int:
        """The smallest timestamp ``>= latest`` that is ``node``'s and above its last one."""
        nodes = self.truetime.nodes
        stride, index = len(nodes), nodes.index(node)
        floor = latest if self.last[node] is None else max(latest, self.last[node] + 1)
        return floor + (index - floor) % stride

    def timestamp(self, node: str) -> int:
        """A timestamp of ``node``: ``TT.now().latest``, raised to keep the node's strictly
        increasing (and its own residue). No wait."""
        self.truetime.check_node(node)
        with self._lock:
            ts = self.next_on(node, self.truetime.now(node).latest)
            self.last[node] = ts
            self.calls += 1
        return ts

    def start_timestamp(self, node: str) -> int:
        """A transaction's ``start_ts`` on ``node``, read at a safe time (if on)."""
        ts = self.timestamp(node)
        waited = self.truetime.wait_until_after(ts, node) if self.read_at_safe_time else 0
        self.waits.start.append(waited)
        return ts

    def commit_timestamp(self, node: str) -> int:
        """A ``commit_ts`` on ``node``, returned after the commit wait (if on)."""
        ts = self.timestamp(node)
        waited = self.truetime.wait_until_after(ts, node) if self.commit_wait else 0
        self.waits.commit.append(waited)
        return ts

    def peek(self) -> int:
        """A lower bound on every timestamp any node hands out from now on."""
        with self._lock:
            return min(self.next_on(n, self.truetime.now(n).latest) for n in self.truetime.nodes)

    def true_us(self) -> int:
        """True time in microseconds (the cluster clock), for comparing with timestamps."""
        return true_us(self.truetime.clock)


