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
of ``commit(crash_after=...)``). :func:`attach` is the one way to attach and
detach them. The protocol modules know nothing of them.
"""
from __future__ import annotations

import time
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


class Attachment:
    """Interceptors attached to ``target`` (see :func:`attach`): ``detach()`` removes them;
    as a context manager, they are detached when the ``with`` block ends."""

    def __init__(self, target, interceptors: tuple):
        self.target, self.interceptors = target, interceptors

    def detach(self) -> None:
        """Remove these interceptors (idempotent)."""
        for interceptor in self.interceptors:
            if interceptor in self.target.interceptors:
                self.target.interceptors.remove(interceptor)

    def __enter__(self):
        return self.target

    def __exit__(self, *exc) -> None:
        self.detach()


def attach(target, *interceptors, first: bool = False) -> Attachment:
    """THE way to attach interceptors: to ``target.interceptors`` (a store's, every row
    transaction; a session's, one client's), after those already there (``first``:
    before them). Returns the :class:`Attachment`: ``with attach(store, gate): ...``
    or ``handle = attach(store, gate)`` ... ``handle.detach()``."""
    for interceptor in interceptors:
        if not (hasattr(interceptor, "before") or hasattr(interceptor, "after")):
            raise TypeError(f"an interceptor needs before(rt) or after(rt), got {interceptor!r}")
    if first:
        target.interceptors[:0] = interceptors
    else:
        target.interceptors.extend(interceptors)
    return Attachment(target, interceptors)
