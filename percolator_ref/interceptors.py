"""Interceptors: what attaches to row transactions from outside the protocol.

An interceptor is any object with ``before(rt)`` and/or ``after(rt)``.
``before`` runs before a row transaction starts (the stepper's scheduler parks
a client there; a modeled round trip sleeps there); ``after`` runs once it has
applied (fault injection raises :class:`~percolator_ref.errors.ClientCrash`
there; a benchmark counts there). Both run outside the store's row lock and
see ``rt.client``, ``rt.table``, ``rt.row`` and ``rt.step``.

They live in lists, so a stepper, a fault plan and a benchmark can be attached
at once: ``store.interceptors`` (every row transaction of the store) and
``session.interceptors`` (one client's row transactions, e.g. the fault plan
of ``commit(crash_after=...)``). The protocol modules know nothing of them.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable


class Latency:
    """A modeled network round trip: sleep ``seconds`` (wall time) before each row transaction."""

    def __init__(self, seconds: float):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            raise ValueError(f"seconds must be a number >= 0, got {seconds!r}")
        self.seconds = float(seconds)

    def before(self, rt) -> None:
        if self.seconds:
            time.sleep(self.seconds)

    def __repr__(self):
        return f"Latency({self.seconds})"


class Gate:
    """Adapt a function ``gate(client, table, row, step)`` called before each row transaction."""

    def __init__(self, gate: Callable):
        if not callable(gate):
            raise TypeError(f"gate must be callable, got {gate!r}")
        self.gate = gate

    def before(self, rt) -> None:
        self.gate(rt.client, rt.table, rt.row, rt.step)


class Counter:
    """Count row transactions by step (``counts``: ``{step: n}``), e.g. for a benchmark."""

    def __init__(self):
        self.counts: dict = {}

    def after(self, rt) -> None:
        self.counts[rt.step] = self.counts.get(rt.step, 0) + 1


@contextmanager
def attached(target, *interceptors):
    """Attach ``interceptors`` to ``target.interceptors`` for the ``with`` block."""
    for interceptor in interceptors:
        if not (hasattr(interceptor, "before") or hasattr(interceptor, "after")):
            raise TypeError(f"an interceptor needs before(rt) or after(rt), got {interceptor!r}")
    target.interceptors.extend(interceptors)
    try:
        yield target
    finally:
        for interceptor in interceptors:
            if interceptor in target.interceptors:
                target.interceptors.remove(interceptor)
