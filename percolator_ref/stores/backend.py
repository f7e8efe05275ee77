"""Opening a store: one :class:`Backend` carries its Bigtable, timestamp oracle and lock service."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional
from urllib.parse import urlparse

from ..bigtable import Bigtable
from ..services.clock import WallClock
from ..services.lockservice import LockService
from ..services.oracle import TimestampOracle


class Backend(NamedTuple):
    """One opened store: its Bigtable, its timestamp oracle and its lock service.

    In memory, all three live in this process; with Redis, all three live on
    the server, so client processes of one store share them.
    """
    bigtable: Any
    oracle: Any
    lockservice: Any


def open_backend(backend, tracer=None, *, clock=None, lock_ttl: float = 10.0,
                 first_timestamp: int = 1, oracle_state_path: Optional[str] = None) -> Backend:
    """The :class:`Backend` for ``Cluster(backend=...)``: None -> in memory;
    ``redis://host:port/db`` -> Redis. ``clock`` (default: the wall clock) and
    ``lock_ttl`` are the lock service's; ``oracle_state_path`` persists the
    in-memory oracle's high-water mark (refused with Redis)."""
    clock = clock if clock is not None else WallClock()
    if backend is None:
        return Backend(Bigtable(tracer), TimestampOracle(oracle_state_path, first_timestamp),
                       LockService(clock, lock_ttl))
    if not isinstance(backend, str):
        raise TypeError(f"backend must be None or a URL str, got {backend!r}")
    if urlparse(backend).scheme not in ("redis", "redis+cluster"):
        raise ValueError(f"backend must be None or a 'redis://host:port/db' URL, got {backend!r}")
    if oracle_state_path is not None:
        raise ValueError("oracle_state_path is for the in-memory store: with a Redis "
                         "backend the oracle's state lives on the server")
    from .redis_store import RedisBigtable          # optional: needs the redis package
    bigtable = RedisBigtable(backend, tracer)
    return Backend(bigtable, bigtable.make_oracle(first_timestamp),
                   bigtable.make_lockservice(clock, lock_ttl))
