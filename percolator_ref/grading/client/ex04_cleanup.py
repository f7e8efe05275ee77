"""Exercise 4 (lock cleanup), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex04_cleanup`'s."""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager

from percolator_ref import Transaction, cleanup
from percolator_ref.session import Session

from ..framework import Exercise
from .roles import record_intent


exercise = Exercise(
    4, "lock cleanup: roll forward, roll back, only for dead clients",
    answer="backoff_and_maybe_cleanup_lock", graded={"backoff_and_maybe_cleanup_lock": ()},
    hidden=tuple(f"percolator_ref.cleanup:{name}" for name in (
        "backoff_and_maybe_cleanup_lock", "cleanup_lock", "resolve_primary",
        "Cleanup.backoff_and_maybe_cleanup_lock", "Cleanup.cleanup_lock",
        "Cleanup.resolve_primary", "Cleanup.roll_forward", "Cleanup.roll_back")))


_PLUGGED = threading.local()


@contextmanager
def plugged(fn):
    """Readers (the reference ``get``) of this thread call ``fn`` when they meet a lock.

    The module's function becomes a dispatcher (installed at the first use, so
    after the sandbox hid the reference) that calls this thread's ``fn``, or
    what was there before for every other thread.
    """
    if not getattr(cleanup.backoff_and_maybe_cleanup_lock, "plugged_dispatcher", False):
        cleanup.backoff_and_maybe_cleanup_lock = _dispatcher(cleanup.backoff_and_maybe_cleanup_lock)
    saved = getattr(_PLUGGED, "fn", None)
    _PLUGGED.fn = fn
    try:
        yield
    finally:
        _PLUGGED.fn = saved


def _dispatcher(original):
    # wraps: still the step of percolator_ref.cleanup to whoever asks where it is defined
    # (release/build.py lists the modules that ship as bytecode by that)
    @functools.wraps(original)
    def backoff_and_maybe_cleanup_lock(session, cell, lock, attempt):
        return (getattr(_PLUGGED, "fn", None) or original)(session, cell, lock, attempt)
    backoff_and_maybe_cleanup_lock.plugged_dispatcher = True
    return backoff_and_maybe_cleanup_lock


@exercise.role("call")
def _call_role(fn, cluster, cell, lock, attempt, client="R"):
    """One call of the answer, as the client ``client`` meeting ``lock`` on ``cell``."""
    return fn(Session(cluster, client), cell, lock, attempt)


@exercise.role("reader")
def _reader_role(fn, cluster, cells):
    """A reference transaction whose Get calls the answer on a lock: the values it reads."""
    with plugged(fn):
        txn = Transaction(cluster)
        values = [txn.get(row, column) for row, column in cells]
        txn.abandon()
        return values


@exercise.role("writer")
def _writer_role(answer, cluster, values):
    """A reference transaction writing ``[[row, column, value]]`` (it reads nothing)."""
    txn = Transaction(cluster)
    for row, column, value in values:
        txn.set(row, column, value) if value is not None else txn.delete(row, column)
    record_intent(txn)
    return txn.commit()
