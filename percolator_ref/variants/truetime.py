"""Timestamps from TrueTime instead of the oracle: Spanner's answer to the single oracle.

``Cluster(variants=[SpannerTimestamps()])`` attaches it through the variant
extension point (:mod:`percolator_ref.variants`): the variant's
``timestamps(cluster, oracle)`` supplies the timestamp source (every
``start_ts``), and its ``Transaction`` mixin overrides the one named step
``commit_timestamp`` (the commit timestamp and its commit wait). Figure 6's
functions are untouched. Simulated machines (nodes) come from
:class:`~percolator_ref.services.truetime.TrueTime`; a transaction runs on the
node chosen when it begins (:func:`on_node`, else the next in turn) and takes
its commit timestamp there too.

Percolator asks one server, the oracle, for every start and commit timestamp
(§2.3). Spanner asks no one: each machine takes ``TT.now().latest`` from its
own TrueTime and keeps its timestamps strictly increasing (seed 004: a
timestamp is larger than every one the machine gave before). Two rules make
such timestamps as good as the oracle's:

- **commit wait**: a commit takes ``latest`` as its timestamp and does not
  let the commit become visible (nor tell the client) until ``TT.after`` it,
  that is until ``earliest`` has passed it: in the kit, with its fixed ``ε``
  on a stopped clock, ``2ε`` (14 ms for ``ε`` = 7 ms); Spanner §4.2.1 expects
  at least ``2·ε̄``, overlapped with Paxos communication (seed 004's "at most
  ``2ε``" is wrong). Whoever starts after the commit is acknowledged then
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

import contextvars
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

from ..errors import OracleExhausted
from ..model import MAX_TIMESTAMP
from ..services.clock import ManualClock
from ..services.truetime import EPSILON_US, TrueTime, true_us
from . import Variant, state_of

__all__ = ["SpannerTimestamps", "TrueTimeTimestamps", "TrueTimeTransaction", "Waits",
           "on_node", "truetime_source"]

CURRENT_NODE: contextvars.ContextVar = contextvars.ContextVar("truetime_node", default=None)


@contextmanager
def on_node(node: str):
    """Transactions begun inside the block run on machine ``node`` (checked at begin)."""
    token = CURRENT_NODE.set(node)
    try:
        yield node
    finally:
        CURRENT_NODE.reset(token)


@dataclass
class Waits:
    """The waits a TrueTime source made, in microseconds of true time."""
    commit: list = field(default_factory=list)      # one per commit timestamp (0: none needed)
    start: list = field(default_factory=list)       # one per start timestamp

    def total_us(self) -> int:
        return sum(self.commit) + sum(self.start)


class TrueTimeTimestamps:
    """A timestamp source over a :class:`~percolator_ref.services.truetime.TrueTime`.

    ``get_timestamp()`` is a start timestamp on the current node (``on_node``,
    else what ``placement()`` names, else the next node in turn); ``commit_timestamp(node)`` a commit timestamp.
    ``commit_wait`` (default True): a commit timestamp is returned only once
    ``TT.after`` it. ``read_at_safe_time`` (default True): a start timestamp
    likewise. Turning either off shows what it is for (notebook 10).
    Thread-safe; ``waits`` records every wait; ``node_of(ts)`` names the node
    that handed ``ts`` out.
    """

    def __init__(self, truetime: TrueTime, *, commit_wait: bool = True,
                 read_at_safe_time: bool = True, placement=None):
        if placement is not None and not callable(placement):
            raise TypeError(f"placement must be None or a function, got {placement!r}")
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
        self.turn = 0                     # the next node in turn for a begin outside on_node
        self.placement = placement        # () -> the caller's node, or None
        self.lock = threading.Lock()

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
        with self.lock:
            ts = self.next_on(node, max(1, self.truetime.now(node).latest))  # 0 is no timestamp
            if ts > MAX_TIMESTAMP:
                raise OracleExhausted(f"TrueTime on {node} is past MAX_TIMESTAMP: {ts}")
            self.last[node] = ts
            self.calls += 1
        return ts

    def node_of(self, ts: int) -> str:
        """The node that hands out ``ts`` (its residue modulo the number of nodes)."""
        return self.truetime.nodes[ts % len(self.truetime.nodes)]

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

    # -- the timestamp-source interface (the cluster's oracle) ------------------------
    def current_node(self) -> str:
        """The node a transaction begun now runs on: ``on_node``'s, else ``placement()``'s,
        else the next in turn."""
        node = CURRENT_NODE.get()
        if node is None and self.placement is not None:
            node = self.placement()
        if node is not None:
            return self.truetime.check_node(node)
        with self.lock:
            node = self.truetime.nodes[self.turn % len(self.truetime.nodes)]
            self.turn += 1
        return node

    def get_timestamp(self) -> int:
        """A ``start_ts`` on the current node (what ``cluster.begin()`` asks for)."""
        return self.start_timestamp(self.current_node())

    def peek(self) -> int:
        """A lower bound on every timestamp any node hands out from now on."""
        with self.lock:
            return min(self.next_on(n, self.truetime.now(n).latest) for n in self.truetime.nodes)

    def true_us(self) -> int:
        """True time in microseconds (the cluster clock), for comparing with timestamps."""
        return true_us(self.truetime.clock)


def truetime_source(cluster) -> TrueTimeTimestamps:
    """The TrueTime source of a cluster built with :class:`SpannerTimestamps` (the
    variant's state for that cluster)."""
    try:
        return state_of(cluster, SpannerTimestamps.name)
    except ValueError:
        raise ValueError(f"cluster has no SpannerTimestamps variant: {cluster!r}") from None


class TrueTimeTransaction:
    """Transaction mixin: the commit timestamp from TrueTime on the client's own node."""

    def commit_timestamp(self) -> int:
        """Spanner's commit timestamp: ``TT.now().latest`` on the node this transaction began
        on, taken now that every lock is written; the commit wait follows (if on), so the
        commit point is written, and the client told, only once it has certainly passed.
        The wait is reported to the cluster's tracer (the stepper's notes say so)."""
        source, clock = truetime_source(self.cluster), self.cluster.clock
        before = clock.now()
        ts = source.commit_timestamp(source.node_of(self.start_ts))
        if source.commit_wait:
            self.cluster.tracer.waited(
                self.client, clock.now() - before, "waits",
                f"for its commit wait: until TrueTime's earliest has passed its commit "
                f"timestamp {ts}, so the commit point is written only then")
        return ts


class SpannerTimestamps(Variant):
    """TrueTime instead of the oracle: ``Cluster(variants=[SpannerTimestamps()])``.

    ``epsilon_us`` (default 7 ms), ``nodes``, ``offsets`` and ``seed`` make the
    :class:`~percolator_ref.services.truetime.TrueTime` on the cluster's clock
    (checked here, the offsets drawn once); ``commit_wait`` and
    ``read_at_safe_time`` and ``placement`` as in :class:`TrueTimeTimestamps`
    (the simulator places each client on its machine). The store's oracle is
    not used. ``truetime_source(cluster)`` is the cluster's source.
    """

    name = "truetime"
    Transaction = TrueTimeTransaction

    def __init__(self, epsilon_us: int = EPSILON_US, nodes=3, offsets: Optional[dict] = None,
                 seed: int = 0, *, commit_wait: bool = True, read_at_safe_time: bool = True,
                 placement=None):
        checked = TrueTime(ManualClock(), epsilon_us, nodes, offsets, seed)
        TrueTimeTimestamps(checked, commit_wait=commit_wait, read_at_safe_time=read_at_safe_time,
                           placement=placement)
        self.placement = placement
        self.epsilon_us, self.nodes, self.offsets = epsilon_us, checked.nodes, checked.offsets
        self.commit_wait, self.read_at_safe_time = commit_wait, read_at_safe_time

    def __repr__(self):
        return (f"SpannerTimestamps(epsilon_us={self.epsilon_us}, offsets={self.offsets}, "
                f"commit_wait={self.commit_wait}, read_at_safe_time={self.read_at_safe_time})")

    def attach(self, cluster) -> TrueTimeTimestamps:
        """The cluster's state: its TrueTime source, on the cluster's clock."""
        truetime = TrueTime(cluster.clock, self.epsilon_us, self.nodes, self.offsets)
        return TrueTimeTimestamps(truetime, commit_wait=self.commit_wait,
                                  read_at_safe_time=self.read_at_safe_time,
                                  placement=self.placement)

    def timestamps(self, cluster, oracle) -> TrueTimeTimestamps:
        """The cluster's timestamp source: its TrueTime source (``oracle`` unused)."""
        return truetime_source(cluster)
