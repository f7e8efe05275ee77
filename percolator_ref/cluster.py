"""A Percolator cluster: Bigtable, timestamp oracle, lock service, observers.

``Cluster()`` is the embedded, in-process cluster every notebook and test
uses; see API.md for the contract. Input is validated here, where it enters.
"""
from __future__ import annotations

from typing import Callable, Optional

from .checking.checker import CheckReport, History, check_history
from .cleanup import Cleanup
from .services.clock import WallClock
from .services.lockservice import ttl_seconds
from .model import check_timestamp
from .observers import ObserverRegistry, run_observers
from .stores.backend import open_backend
from .trace import Tracer
from .transaction import Transaction
from .variants import attach_variants, check_variants, compose


def check_arguments(first_timestamp, clock, lock_ttl, record_history, seed) -> None:
    """Raise TypeError/ValueError naming the argument that ``Cluster`` cannot use."""
    check_timestamp(first_timestamp, "first_timestamp")
    if clock is not None and not (callable(getattr(clock, "now", None))
                                  and callable(getattr(clock, "sleep", None))):
        raise TypeError(f"clock must have now() and sleep(), got {clock!r}")
    if isinstance(lock_ttl, bool) or not isinstance(lock_ttl, (int, float)):
        raise TypeError(f"lock_ttl must be a number of seconds, got {lock_ttl!r}")
    ttl_seconds(lock_ttl)      # finite, > 0 and <= MAX_TTL: checked before a store is opened
    if not isinstance(record_history, bool):
        raise TypeError(f"record_history must be True or False, got {record_history!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")


class Cluster:
    """The embedded cluster.

    ``first_timestamp``: the oracle's first timestamp (``Cluster(first_timestamp=5)``
    gives the paper's Figure 4 timestamps). ``clock``: the cluster clock
    (wall clock by default; :class:`~percolator_ref.ManualClock` for
    determinism). ``lock_ttl``: seconds after which a silent client is dead.
    ``backend``: None (in memory) or a store URL; a Redis store keeps the
    oracle and the liveness tokens on the server too, so processes cooperate.
    ``oracle_state_path``: persist the oracle's high-water mark there (in
    memory only: refused with a Redis store, whose oracle lives on the
    server). ``record_history``: keep :class:`~percolator_ref.checking.checker.History`
    records for the checker (turn off for long benchmarks). ``seed``:
    randomness for observers' scanners. ``variants``: protocol variants
    (:mod:`percolator_ref.variants`) that change named steps of the paper's
    protocol, composed in the order given; ``cluster.Transaction`` and
    ``cluster.Cleanup`` are the classes they build, ``cluster.oracle`` the
    timestamp source, ``cluster.variant_states`` the state each keeps for this
    cluster (by family name; :func:`~percolator_ref.variants.state_of`).
    """

    def __init__(self, first_timestamp: int = 1, clock=None, lock_ttl: float = 10.0,
                 backend=None, *, oracle_state_path: Optional[str] = None,
                 record_history: bool = True, seed: int = 0, variants=()):
        check_arguments(first_timestamp, clock, lock_ttl, record_history, seed)
        self.variants = check_variants(variants)
        self.Transaction = compose(Transaction, self.variants, "Transaction")
        self.Cleanup = compose(Cleanup, self.variants, "Cleanup")
        self.clock = clock if clock is not None else WallClock()
        self.tracer = Tracer()
        self.bigtable, self.oracle, self.lockservice = open_backend(
            backend, self.tracer, clock=self.clock, lock_ttl=lock_ttl,
            first_timestamp=first_timestamp, oracle_state_path=oracle_state_path)
        self.oracle = attach_variants(self, self.oracle)   # also sets self.variant_states
        self.history = History() if record_history else None
        self.observers = ObserverRegistry()
        self.seed = seed

    @property
    def lock_ttl(self) -> float:
        return self.lockservice.ttl

    def begin(self, client: Optional[str] = None) -> Transaction:
        """A new transaction; ``start_ts`` from the oracle. ``client`` shares a worker's token."""
        return self.Transaction(self, client)

    # -- observers (§2.4) -------------------------------------------------------
    def observe(self, table: str, column: str, name: Optional[str] = None) -> Callable:
        """Decorator: run ``fn(txn, row, column)`` when ``table``/``column`` is written.

        Only writes committed after registration trigger it (their commit_ts is
        at least the oracle's next timestamp now). ``name`` (default
        ``fn.__name__``) names its ack column ``column:ack_<name>``.
        """
        def register(fn):
            self.observers.add(table, column, fn, name, registered_ts=self.oracle.peek())
            return fn
        return register

    def is_observed(self, table: str, column: str) -> bool:
        """Does a committed write to this column set a notification?"""
        return self.observers.watches(table, column)

    def run_observers(self, max_runs: Optional[int] = None) -> int:
        """Run observers until no notification is pending; the number of committed runs."""
        return run_observers(self, max_runs)

    # -- checking ------------------------------------------------------------
    def check_history(self) -> CheckReport:
        """Resolve crashed transactions by their primaries, then check snapshot isolation."""
        if self.history is None:
            raise ValueError("record_history=False: this cluster keeps no history to check")
        self.history.resolve_crashed(self.bigtable)
        return check_history(self.history.records)

    def __repr__(self):
        return (f"<Cluster next_ts={self.oracle.peek()} tables={self.bigtable.tables()} "
                f"clock={self.clock!r}>")
