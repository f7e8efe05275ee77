"""Protocol variants: where a change to the paper's protocol attaches.

The paper's protocol (Figure 6 in :mod:`percolator_ref.transaction`, lazy
cleanup in :mod:`percolator_ref.cleanup`) is the default and reads top to
bottom with no option in it. A *variant* changes named steps of it for one
cluster, and several variants compose::

    cluster = Cluster(variants=[RollbackRecords(), OtherVariant()])

A :class:`Variant` may supply any of:

- ``Transaction``: a mixin class whose methods override
  :class:`~percolator_ref.transaction.Transaction`'s named steps
  (``snapshot_read``, ``prewrite``, ``prewrite_writes``, ``commit_timestamp``,
  ``write_notifications``, ``commit_primary``, ``commit_secondary``,
  ``roll_back_own``, ``two_phase_commit``, ...);
- ``Cleanup``: a mixin class whose methods override
  :class:`~percolator_ref.cleanup.Cleanup`'s steps
  (``backoff_and_maybe_cleanup_lock``, ``cleanup_lock``, ``resolve_primary``,
  ``roll_forward``, ``roll_back``, ``rollback_writes``); a ``Cleanup`` runs as
  one client, ``self.session``;
- ``timestamps(cluster, oracle)``: the timestamp source the cluster uses, given
  the one it would use (the store's oracle, or the previous variant's source).
  It must offer ``get_timestamp()`` and ``peek()``.

The cluster builds its classes once: ``cluster.Transaction`` is
``type("Transaction", (*mixins, Transaction), {})`` with the variants' mixins in
the order given (the first variant's method runs first), and likewise
``cluster.Cleanup``. A mixin method calls ``super().step(...)`` to run the next
variant's version of the step and, last, the paper's; a mixin that does not
call ``super()`` replaces the step. ``cluster.begin()`` returns a
``cluster.Transaction``; every session's ``session.cleanup`` is a
``cluster.Cleanup``; the module functions of :mod:`percolator_ref.cleanup`
(the entry points the transaction, the observers and exercise 4 call) run the
calling session's.

Everything outside the protocol is untouched by a variant: a step is still one
single-row transaction labelled with a :class:`~percolator_ref.step.Step`, so
interceptors, the stepper, crash points (``commit(crash_after=...)``), the
tracer and the snapshot-isolation checker see a variant's row transactions as
they see the paper's. A variant that writes something the paper does not
(a rollback record) uses :mod:`percolator_ref.model`'s vocabulary for it, which
every reader understands.

Variants here (TiKV's; notebook 09): :class:`~percolator_ref.variants.rollback_records.RollbackRecords`
(rollback records), :class:`~percolator_ref.variants.lock_ttl.LockTTL` (the lock's own
TTL and ``CheckTxnStatus``), :class:`~percolator_ref.variants.one_pc.OnePC` (one-phase
commit), :class:`~percolator_ref.variants.async_commit.AsyncCommit` (async commit,
in-memory store) and :class:`~percolator_ref.variants.pessimistic.PessimisticLocks`
(pessimistic locks, deadlock detection). The lock fields they add live in
:mod:`percolator_ref.variants.locks`. Spanner's:
:class:`~percolator_ref.variants.truetime.SpannerTimestamps` (TrueTime instead of the
oracle, with commit wait: a timestamp source and the ``commit_timestamp`` step; notebook 10).
"""
from __future__ import annotations

import threading
import weakref
from typing import Iterable


class Variant:
    """A change to the paper's protocol, attached to one cluster (see the module doc)."""

    name = "variant"
    Transaction: type | None = None      # mixin over percolator_ref.transaction.Transaction
    Cleanup: type | None = None          # mixin over percolator_ref.cleanup.Cleanup

    def timestamps(self, cluster, oracle):
        """The timestamp source to use instead of ``oracle`` (default: ``oracle`` itself)."""
        return oracle

    def __repr__(self):
        return f"{type(self).__name__}()"


def check_variants(variants) -> tuple:
    """``variants`` as a tuple; TypeError/ValueError naming the argument if unusable."""
    if isinstance(variants, (str, bytes, Variant)) or not isinstance(variants, Iterable):
        raise TypeError(f"variants must be a list of Variant objects, got {variants!r}")
    variants = tuple(variants)
    for variant in variants:
        if not isinstance(variant, Variant):
            raise TypeError(f"variants must hold Variant objects, got {variant!r}")
    mixins = [m for v in variants for m in (v.Transaction, v.Cleanup) if m is not None]
    if len({id(v) for v in variants}) != len(variants) or len(set(mixins)) != len(mixins):
        raise ValueError(f"variants holds the same variant twice: {list(variants)!r}")
    return variants


def compose(base: type, variants: tuple, part: str) -> type:
    """``base`` extended by each variant's ``part`` mixin, the first variant's outermost."""
    mixins = tuple(getattr(v, part) for v in variants if getattr(v, part) is not None)
    if not mixins:
        return base
    return type(base.__name__, mixins + (base,), {})


def timestamp_source(variants: tuple, cluster, oracle):
    """The cluster's timestamp source: ``oracle`` passed through each variant in turn."""
    for variant in variants:
        oracle = variant.timestamps(cluster, oracle)
    return oracle


class PerStore:
    """State a variant keeps beside one store (TiKV's ``max_ts``, a wait-for graph).

    ``per_store(store)`` returns the store's state, made by ``factory()`` (or
    ``factory(store)`` with ``takes_store=True``) on first use; it goes away with
    the store.
    """

    def __init__(self, factory, takes_store: bool = False):
        self.factory, self.takes_store = factory, takes_store
        self.states: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self.mutex = threading.Lock()       # two threads' first calls make one state

    def __call__(self, store):
        with self.mutex:
            state = self.states.get(store)
            if state is None:
                state = self.factory(store) if self.takes_store else self.factory()
                self.states[store] = state
            return state
