"""A client's session: what the protocol code talks to.

Each transaction runs as one client (paper §2.2: every worker has a liveness
token in the lock service). Its :class:`Session` bundles the client's name
with the services it uses: the Bigtable store, the timestamp oracle, the lock
service, the cluster clock and the observer registry. The transaction, the
lazy cleanup and the observers all reach the cluster only through it, and
every row transaction of the client goes through :meth:`Session.row_transaction`.
"""
from __future__ import annotations

from .cleanup import backoff_delay
from .stores.steps import is_read_only


class Session:
    """One client: ``name``, ``bigtable``, ``oracle``, ``lockservice``, ``clock``, ``observers``.

    ``cleanup``: this client's :class:`~percolator_ref.cleanup.Cleanup` (the
    cluster's class: the paper's, or one a protocol variant extends).

    ``interceptors`` (a list) run around this client's row transactions only,
    after the store's own (see :mod:`percolator_ref.interceptors`).
    ``owns_token``: the session registers the client's token and releases it
    when the transaction ends (a worker sharing one token among its runs
    passes its own name and keeps the token).

    The token matters only to a client that holds locks, so the lock service
    is touched only by row transactions that may write (steps that are not
    read-only: :func:`~percolator_ref.stores.steps.is_read_only`): the first one registers the
    token, later ones heartbeat it. A read-only transaction makes no
    liveness-token call at all (no register, heartbeat or release).
    """

    def __init__(self, cluster, name: str, owns_token: bool = True):
        self.name = name
        self.bigtable, self.oracle = cluster.bigtable, cluster.oracle
        self.lockservice, self.clock = cluster.lockservice, cluster.clock
        self.observers, self.tracer = cluster.observers, cluster.tracer
        self.owns_token = owns_token
        self.interceptors: list = []
        self.registered = False           # owns_token: registered at the first writing step
        self.cleanup = cluster.Cleanup(self)   # the cluster's cleanup steps, run by this client

    def __repr__(self):
        return f"<Session {self.name}>"

    def row_transaction(self, table: str, row: str, step: str):
        """One single-row transaction of this client: keep the token alive (writing steps
        only), then the store's row transaction."""
        if not is_read_only(step):
            self.keep_alive()
        return self.bigtable.row_transaction(table, row, client=self.name, step=step,
                                             interceptors=self.interceptors)

    def keep_alive(self) -> None:
        """Register the client's token (first time, if the session owns it) or heartbeat it."""
        if self.owns_token and not self.registered:
            self.lockservice.register(self.name)
            self.registered = True
        else:
            self.lockservice.heartbeat(self.name)

    def timestamp(self) -> int:
        """A timestamp from the oracle (strictly increasing)."""
        return self.oracle.get_timestamp()

    def is_alive(self, client) -> bool:
        """Does ``client``'s liveness token still stand (not crashed, not older than the TTL)?"""
        return self.lockservice.is_alive(client)

    def backoff(self, attempt: int) -> None:
        """Sleep one exponential-backoff step on the cluster clock (reported to the tracer)."""
        delay = backoff_delay(attempt, self.lockservice.ttl)
        self.clock.sleep(delay)
        self.tracer.waited(self.name, delay, "backs off", "before trying again")

    def is_observed(self, table: str, column: str) -> bool:
        """Does a committed write to this column notify an observer?"""
        return self.observers.watches(table, column)

    def crash(self) -> None:
        """The client dies: its locks may be cleaned up at once."""
        self.lockservice.crash(self.name)

    def release(self) -> None:
        """The client is done: release its token (if it owns it and registered it)."""
        if self.owns_token and self.registered:
            self.lockservice.release(self.name)
