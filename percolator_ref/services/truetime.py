"""TrueTime on simulated machines: a clock reading that is an interval, not a number.

What Spanner's TrueTime API offers (Spanner §3; seed 004, "时间戳API（TrueTime API）"):

==================  ==========================================================
``TT.now()``        an interval ``[earliest, latest]`` that contains true time
``TT.after(t)``     True if ``t`` has certainly passed
``TT.before(t)``    True if ``t`` has certainly not arrived yet
==================  ==========================================================

How Spanner keeps the uncertainty ``ε`` small (Spanner §3, as
``../shared/PAPER_FACTS.md`` "Spanner" carries it; seed 004 is wrong here):
each datacenter has a set of time masters, most with GPS receivers, the
others ("Armageddon masters") with atomic clocks; a daemon on every machine
polls several of them every 30 s. Between polls it advertises an uncertainty
derived from a conservatively applied worst-case local drift of 200 µs per
second (up to 6 ms) plus 1 ms of communication, so ``ε`` is typically a
sawtooth of about 1 to 7 ms, 4 ms on average; it is not a bound (it exceeds
the sawtooth when masters are unavailable or machines and links overloaded).
The interval is ``2ε`` wide.

The kit simulates it, deterministically. True time is the cluster clock (a
:class:`~percolator_ref.ManualClock` in notebooks and tests). Each machine
(node) reads it with a fixed offset, drawn from ``random.Random(seed)`` in
``[-epsilon_us, +epsilon_us]`` unless given: the bounded skew. ``now(node)``
is that node's reading widened by ``ε`` on both sides, so it always contains
true time. Times are integer microseconds.

The kit's simplification (not Spanner's): each offset is constant, where a
real clock drifts between synchronisations and ``ε`` grows and shrinks with
it. The guarantee TrueTime gives, true time inside the interval, is the same.
"""
from __future__ import annotations

import random
from typing import NamedTuple, Optional, Sequence

EPSILON_US = 7_000
"""The kit's fixed clock uncertainty: 7 ms, the top of Spanner's typical sawtooth (Spanner §3:
up to 6 ms of drift + 1 ms of communication). Spanner's own ε varies and is not bounded by it."""

MICROSECONDS = 1_000_000

MAX_EPSILON_US = 60 * MICROSECONDS
"""The largest uncertainty accepted: one minute (Spanner's is milliseconds; past this a
commit wait, or a timestamp of microseconds, stops meaning anything)."""


def true_us(clock) -> int:
    """The cluster clock's time (seconds, float) as whole microseconds."""
    return round(clock.now() * MICROSECONDS)


class TTInterval(NamedTuple):
    """``[earliest, latest]`` in microseconds: true time is inside (both ends included)."""
    earliest: int
    latest: int

    @property
    def width(self) -> int:
        return self.latest - self.earliest


def check_nodes(nodes) -> tuple:
    """``nodes`` as a tuple of distinct non-empty names (an int n means ``"n0".."n<n-1>"``)."""
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        if nodes < 1:
            raise ValueError(f"nodes must be >= 1 when an int, got {nodes}")
        return tuple(f"n{i}" for i in range(nodes))
    if isinstance(nodes, str) or not isinstance(nodes, Sequence) or not nodes:
        raise TypeError(f"nodes must be an int >= 1 or a non-empty list of names, got {nodes!r}")
    if not all(isinstance(n, str) and n for n in nodes) or len(set(nodes)) != len(nodes):
        raise ValueError(f"nodes must be distinct non-empty str names, got {nodes!r}")
    return tuple(nodes)


def check_offsets(offsets: dict, nodes: tuple, epsilon_us: int) -> dict:
    """Every node's offset given, an int within ``[-epsilon_us, epsilon_us]``."""
    if not isinstance(offsets, dict) or set(offsets) != set(nodes):
        raise ValueError(f"offsets must map every node {nodes} to microseconds, got {offsets!r}")
    for node, offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or abs(offset) > epsilon_us:
            raise ValueError(f"offsets[{node!r}] must be an int within +-epsilon_us "
                             f"({epsilon_us}), got {offset!r}")
    return dict(offsets)


class TrueTime:
    """Simulated TrueTime for ``nodes`` machines whose clocks run ``offsets`` off true time.

    ``clock``: true time (the cluster clock). ``epsilon_us``: the uncertainty
    ``ε``, fixed (default 7 ms, the top of Spanner's typical sawtooth). ``nodes``: a count or names.
    ``offsets``: ``{node: microseconds}``, each within ``±ε`` (default: drawn
    with ``seed``). Cheap and deterministic: nothing here sleeps.

    >>> from percolator_ref import ManualClock
    >>> tt = TrueTime(ManualClock(1.0), nodes=["A"], offsets={"A": 2_000})
    >>> tt.now("A")
    TTInterval(earliest=995000, latest=1009000)
    >>> tt.after(994_999, "A"), tt.after(995_000, "A"), tt.before(1_009_001, "A")
    (True, False, True)
    """

    def __init__(self, clock, epsilon_us: int = EPSILON_US, nodes=3,
                 offsets: Optional[dict] = None, seed: int = 0):
        if not callable(getattr(clock, "now", None)) or not callable(getattr(clock, "sleep", None)):
            raise TypeError(f"clock must have now() and sleep(), got {clock!r}")
        if isinstance(epsilon_us, bool) or not isinstance(epsilon_us, int) \
                or not 0 <= epsilon_us <= MAX_EPSILON_US:
            raise ValueError(f"epsilon_us must be an int in [0, {MAX_EPSILON_US}] "
                             f"(microseconds), got {epsilon_us!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.clock, self.epsilon_us = clock, epsilon_us
        self.nodes = check_nodes(nodes)
        if offsets is None:
            rng = random.Random(seed)
            offsets = {n: rng.randint(-epsilon_us, epsilon_us) for n in self.nodes}
        self.offsets = check_offsets(offsets, self.nodes, epsilon_us)

    def __repr__(self):
        return (f"TrueTime(epsilon_us={self.epsilon_us}, offsets={self.offsets}, "
                f"true_us={true_us(self.clock)})")

    def check_node(self, node: str) -> str:
        if node not in self.offsets:
            raise ValueError(f"node must be one of {self.nodes}, got {node!r}")
        return node

    def local_us(self, node: str) -> int:
        """``node``'s clock reading: true time plus its offset (what a plain clock would say)."""
        return true_us(self.clock) + self.offsets[self.check_node(node)]

    def now(self, node: str) -> TTInterval:
        """``TT.now()`` on ``node``: ``[local - ε, local + ε]``, which contains true time."""
        local = self.local_us(node)
        return TTInterval(local - self.epsilon_us, local + self.epsilon_us)

    def after(self, t: int, node: str) -> bool:
        """``TT.after(t)``: ``t`` has certainly passed (``t < earliest``)."""
        return t < self.now(node).earliest

    def before(self, t: int, node: str) -> bool:
        """``TT.before(t)``: ``t`` has certainly not arrived (``t > latest``)."""
        return t > self.now(node).latest

    def wait_until_after(self, t: int, node: str) -> int:
        """Sleep on the clock until ``TT.after(t)`` on ``node``; the microseconds waited."""
        began = true_us(self.clock)
        while not self.after(t, node):
            self.clock.sleep((t + 1 - self.now(node).earliest) / MICROSECONDS)
        return true_us(self.clock) - began
