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


class Session:
    """One client: ``name``, ``bigtable``, ``oracle``, ``lockservice``, ``clock``, ``observers``.

    ``interceptors`` (a list) run around this client's row transactions only,
    after the store's own (see :mod:`percolator_ref.interceptors`).
    ``owns_token``: the session registered the client's token and releases it
    when the transaction ends (a worker sharing one token among its runs
    passes its own name and keeps the token).
    """

    def __init__(self, cluster, name: str, owns_token: bool = True):
        self.name = name
        self.bigtable, self.oracle = cluster.bigtable, cluster.oracle
        self.lockservice, self.clock = cluster.lockservice, cluster.clock
        self.observers = cluster.observers
        self.owns_token = owns_token
        self.interceptors: list = []
        if owns_token:
            self.lockservice.register(name)

    def __repr__(self):
        return f"<Session {self.name}>"

    def row_transaction(self, table: str, row: str, step: str):
        """One single-row transaction of this client: heartbeat, then the store's row transaction."""
        self.lockservice.heartbeat(self.name)
        return self.bigtable.row_transaction(table, row, client=self.name, step=step,
                                             interceptors=self.interceptors)

    def timestamp(self) -> int:
        """A timestamp from the oracle (strictly increasing)."""
        return self.oracle.get_timestamp()

    def is_alive(self, client) -> bool:
        """Does ``client``'s liveness token still stand (not crashed, not older than the TTL)?"""
        return self.lockservice.is_alive(client)

    def backoff(self, attempt: int) -> None:
        """Sleep one exponential-backoff step on the cluster clock."""
        self.clock.sleep(backoff_delay(attempt, self.lockservice.ttl))

    def is_observed(self, table: str, column: str) -> bool:
        """Does a committed write to this column notify an observer?"""
        return self.observers.watches(table, column)

    def crash(self) -> None:
        """The client dies: its locks may be cleaned up at once."""
        self.lockservice.crash(self.name)

    def release(self) -> None:
        """The client is done: release its token (if it owns it)."""
        if self.owns_token:
            self.lockservice.release(self.name)
