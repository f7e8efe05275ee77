"""Fault injection from outside the protocol: a client that dies after a step.

``commit(crash_after=...)`` attaches a :class:`CrashAfter` to the
transaction's session for the duration of the commit. It watches the
session's row transactions (as an interceptor's ``after``) and, once the
named point has applied, marks the client dead in the lock service and
raises :class:`~percolator_ref.errors.ClientCrash`: the store is left exactly
as the client left it. Points (see :mod:`percolator_ref.step`):

- ``"prewrite-primary"``: after the primary's prewrite;
- ``"prewrite"``: after the last prewrite of the commit (every cell locked);
- ``"commit-primary"``: after the commit point;
- an int ``n >= 1``: after the n-th row transaction of this commit (cleanup
  row transactions that the commit runs count too).

A commit that finishes or aborts before the point is reached does not crash.

:class:`StoreFailsAt` makes the *store* fail instead (``StoreUnavailable``)
at a chosen step, before or after the row transaction applies: how a commit
ends in :class:`~percolator_ref.errors.CommitOutcomeUnknown`.
"""
from __future__ import annotations

from typing import Optional

from .errors import ClientCrash, StoreUnavailable
from .step import CRASH_POINTS, PREWRITE_STEPS, Step
from .stores.steps import properties


def check_crash_after(crash_after) -> None:
    """Raise TypeError/ValueError naming ``crash_after`` unless it is a valid point."""
    if crash_after is None or crash_after in CRASH_POINTS:
        return
    if isinstance(crash_after, bool) or not isinstance(crash_after, (int, str)):
        raise TypeError(f"crash_after must be None, one of {CRASH_POINTS} or an int >= 1, "
                        f"got {crash_after!r}")
    if isinstance(crash_after, str):
        raise ValueError(f"crash_after must be one of {CRASH_POINTS} or an int >= 1, "
                         f"got {crash_after!r}")
    if crash_after < 1:
        raise ValueError(f"crash_after must be >= 1 when an int, got {crash_after}")


class CrashAfter:
    """Kill ``session``'s client right after ``point`` (a name or a row-transaction count).

    ``prewrites``: how many prewrites the commit makes (so ``"prewrite"``
    means after the last of them).
    """

    def __init__(self, point, session, prewrites: int = 1):
        check_crash_after(point)
        self.point, self.session, self.prewrites = point, session, prewrites
        self.row_transactions = 0
        self.prewrites_done = 0

    def after(self, rt) -> None:
        self.row_transactions += 1
        self.prewrites_done += rt.step in PREWRITE_STEPS
        if self.reached(rt.step):
            self.session.crash()
            name = self.point if isinstance(self.point, str) else str(rt.step)
            raise ClientCrash(name, self.row_transactions)

    def reached(self, step: str) -> bool:
        """Has the point just been passed by a row transaction of ``step``?"""
        if isinstance(self.point, int):
            return self.row_transactions == self.point
        if self.point == "prewrite":
            return step in PREWRITE_STEPS and self.prewrites_done == self.prewrites
        return step == Step(self.point)


def crash_plan(crash_after, session, prewrites: int) -> Optional[CrashAfter]:
    """The fault plan for ``commit(crash_after=...)``, or None for no crash."""
    check_crash_after(crash_after)
    return None if crash_after is None else CrashAfter(crash_after, session, prewrites)


class StoreFailsAt:
    """The store fails at a row transaction of ``step``: raises :class:`StoreUnavailable`.

    ``step``: a :class:`~percolator_ref.step.Step` or a step a variant declares
    (:func:`~percolator_ref.stores.steps.declare_step`: ``"one-pc"``, ``"check-txn-status"``, ...).

    ``applied=False``: before the row transaction starts (the request never
    reached the store, nothing changes); ``applied=True``: after it applied
    (the store did the work, the reply was lost). Fails ``times`` times, then
    the store works again. ``client`` limits it to one client's row
    transactions (default: any). Attach it to ``cluster.bigtable.interceptors``;
    a commit that meets it at ``"commit-primary"`` raises
    :class:`~percolator_ref.errors.CommitOutcomeUnknown`.
    """

    def __init__(self, step, applied: bool = False, times: int = 1,
                 client: Optional[str] = None):
        properties(step)                   # ValueError naming step unless it is a step
        self.step = Step(step) if step in set(Step) else step
        if not isinstance(applied, bool):
            raise TypeError(f"applied must be True or False, got {applied!r}")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be an int >= 1, got {times!r}")
        self.applied, self.times, self.client = applied, times, client
        self.failures = 0

    def fail_if_due(self, rt, applied: bool) -> None:
        if (applied == self.applied and rt.step == self.step and self.failures < self.times
                and self.client in (None, rt.client)):
            self.failures += 1
            when = "after it applied (reply lost)" if applied else "before it reached the store"
            raise StoreUnavailable(f"store failed at {rt.client}'s {rt.step} of "
                                   f"{rt.table}/{rt.row}, {when}")

    def before(self, rt) -> None:
        self.fail_if_due(rt, applied=False)

    def after(self, rt) -> None:
        self.fail_if_due(rt, applied=True)
