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
- ``attach(cluster)``: the state the variant keeps for one cluster (TiKV passes
  such state explicitly too: its ``TransactionProperties``, its concurrency
  manager), made once when the cluster is built, after its store is open. The
  cluster keeps it (:func:`state_of`); state every client of the store must see
  (async commit's ``max_ts``) lives on the store (for Redis, on the server). No
  variant keeps per-cluster state in a module global;
- ``timestamps(cluster, oracle)``: the timestamp source the cluster uses, given
  the one it would use (the store's oracle, or the previous variant's source).
  It must offer ``get_timestamp()`` and ``peek()``;
- its own steps, each declared once with its properties
  (:func:`~percolator_ref.stores.steps.declare_step`): fault injection, the crash points,
  the stores and the grader treat them as they treat the paper's.

Not every combination is sound. :data:`REFUSED` lists the pairs the kit refuses
and why; ``Cluster(variants=...)`` refuses them before it opens the store.
Every other combination of the kit's variants (:func:`accepted_combinations`)
is run by :mod:`percolator_ref.workloads.variant_audit` under crashes after
every step, store faults at every step, late duplicated prewrites, readers
that die mid-cleanup and a bank workload with tiny TTLs. The kit's own
variants are composed in one order, :data:`KIT_ORDER` (the order those runs
explore), whatever order they are listed in; another variant (a test's hook,
a benchmark's counter) keeps its place in the list.

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
single-row transaction labelled with a :class:`~percolator_ref.step.Step` or a
step the variant declared, so
interceptors, the stepper, crash points (``commit(crash_after=...)``), the
tracer and the snapshot-isolation checker see a variant's row transactions as
they see the paper's. A variant that writes something the paper does not
(a rollback record) uses :mod:`percolator_ref.model`'s vocabulary for it, which
every reader understands.

Variants here (TiKV's; notebook 09): :class:`~percolator_ref.variants.rollback_records.RollbackRecords`
(rollback records), :class:`~percolator_ref.variants.lock_ttl.LockTTL` (the lock's own
TTL and ``CheckTxnStatus``), :class:`~percolator_ref.variants.one_pc.OnePC` (one-phase
commit), :class:`~percolator_ref.variants.async_commit.AsyncCommit` (async commit)
and :class:`~percolator_ref.variants.pessimistic.PessimisticLocks`
(pessimistic locks, deadlock detection). The lock fields they add live in
:mod:`percolator_ref.variants.locks`. Spanner's:
:class:`~percolator_ref.variants.truetime.SpannerTimestamps` (TrueTime instead of the
oracle, with commit wait: a timestamp source and the ``commit_timestamp`` step; notebook 10).
"""
from __future__ import annotations

import itertools
from typing import Iterable


class Variant:
    """A change to the paper's protocol, attached to one cluster (see the module doc)."""

    name = "variant"
    Transaction: type | None = None      # mixin over percolator_ref.transaction.Transaction
    Cleanup: type | None = None          # mixin over percolator_ref.cleanup.Cleanup

    def attach(self, cluster):
        """The state this variant keeps for ``cluster`` (default: none), made once the
        cluster's store is open; read back with :func:`state_of`."""
        return None

    def timestamps(self, cluster, oracle):
        """The timestamp source to use instead of ``oracle`` (default: ``oracle`` itself)."""
        return oracle

    @property
    def family(self) -> str:
        """The name of the kit's variant this one is (a broken-on-purpose subclass of
        :class:`AsyncCommit` is still ``"async-commit"``)."""
        kit = [c for c in type(self).__mro__ if Variant in c.__bases__]
        return kit[0].name if kit else self.name

    def __repr__(self):
        return f"{type(self).__name__}()"


KIT_ORDER = ("pessimistic-locks", "one-pc", "async-commit", "lock-ttl", "rollback-records",
             "truetime")
"""The kit's variants (by family), outermost first: how they are composed. One-phase commit
comes before async commit (a one-row transaction commits in one row transaction)."""

REFUSED = {
    frozenset({"async-commit", "lock-ttl"}):
        "LockTTL's status check would roll back an expired async-commit primary, which "
        "only a check of every secondary may decide",
    frozenset({"async-commit", "truetime"}):
        "async commit computes commit_ts from the store's max_ts (max_ts + 1), not from "
        "TrueTime, so its commit timestamps skip TrueTime's commit wait (external order is "
        "lost), can fall below a transaction's own start_ts when it sets a notification "
        "(the paper's path takes TrueTime's timestamp) and, with epsilon 0, equal another "
        "transaction's start_ts",
}
"""Pairs of variants (by :attr:`Variant.family`) the kit refuses, with the reason."""


def accepted_combinations() -> list:
    """Every combination of the kit's variants that ``Cluster`` accepts, as tuples of
    family names in :data:`KIT_ORDER` (the empty one is the paper's protocol)."""
    found = []
    for size in range(len(KIT_ORDER) + 1):
        for combination in itertools.combinations(KIT_ORDER, size):
            if not any(pair <= set(combination) for pair in REFUSED):
                found.append(combination)
    return found


def in_kit_order(variants: tuple) -> tuple:
    """``variants`` with the kit's own refilled into their places in :data:`KIT_ORDER`."""
    kit = sorted((v for v in variants if v.family in KIT_ORDER),
                 key=lambda v: KIT_ORDER.index(v.family))
    return tuple(kit.pop(0) if v.family in KIT_ORDER else v for v in variants)


def check_combination(variants: tuple) -> None:
    """ValueError naming ``variants`` if two of them are a pair the kit refuses."""
    families = [v.family for v in variants]
    for pair, reason in REFUSED.items():
        if pair <= set(families):
            first, second = sorted((v for v in variants if v.family in pair), key=variants.index)
            raise ValueError(f"variants: {type(first).__name__} does not compose with "
                             f"{type(second).__name__} here: {reason}")


def check_variants(variants) -> tuple:
    """``variants`` as a tuple in the order they compose (:func:`in_kit_order`);
    TypeError/ValueError naming the argument if unusable or a refused combination."""
    if isinstance(variants, (str, bytes, Variant)) or not isinstance(variants, Iterable):
        raise TypeError(f"variants must be a list of Variant objects, got {variants!r}")
    variants = tuple(variants)
    for variant in variants:
        if not isinstance(variant, Variant):
            raise TypeError(f"variants must hold Variant objects, got {variant!r}")
    mixins = [m for v in variants for m in (v.Transaction, v.Cleanup) if m is not None]
    if len({id(v) for v in variants}) != len(variants) or len(set(mixins)) != len(mixins):
        raise ValueError(f"variants holds the same variant twice: {list(variants)!r}")
    check_combination(variants)
    return in_kit_order(variants)


def compose(base: type, variants: tuple, part: str) -> type:
    """``base`` extended by each variant's ``part`` mixin, the first variant's outermost."""
    mixins = tuple(getattr(v, part) for v in variants if getattr(v, part) is not None)
    if not mixins:
        return base
    return type(base.__name__, mixins + (base,), {})


def attach_all(variants: tuple, cluster) -> dict:
    """Each variant's state for ``cluster`` (:meth:`Variant.attach`), by family name."""
    states = {}
    for variant in variants:
        state = variant.attach(cluster)
        if state is not None:
            states[variant.family] = state
    return states


def attach_variants(cluster, oracle):
    """Attach ``cluster.variants`` to ``cluster`` once its store is open: each one's state
    (:meth:`Variant.attach`) in ``cluster.variant_states``; returns the timestamp source."""
    cluster.variant_states = attach_all(cluster.variants, cluster)
    return timestamp_source(cluster.variants, cluster, oracle)


def state_of(cluster, family: str):
    """The state variant ``family`` keeps for ``cluster``; ValueError if it keeps none there
    (the cluster runs no such variant)."""
    states = getattr(cluster, "variant_states", {})
    if family not in states:
        raise ValueError(f"cluster runs no {family} variant (it keeps no {family} state): "
                         f"{cluster!r}")
    return states[family]


def timestamp_source(variants: tuple, cluster, oracle):
    """The cluster's timestamp source: ``oracle`` passed through each variant in turn."""
    for variant in variants:
        oracle = variant.timestamps(cluster, oracle)
    return oracle
