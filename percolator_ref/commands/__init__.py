"""Subcommands of ``percolator``: one module each, with ``register(subparsers)``; and the
command line's ``--backend`` (:func:`backend_url`)."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def backend_url(backend):
    """Resolve a command line's ``--backend``: ``"redis"`` starts a throwaway local server.

    Yields the store URL (or None for in memory); the throwaway server is
    stopped (and its files removed) on exit.
    """
    if backend != "redis":
        yield backend
        return
    from ..harness.redis_server import LocalRedisServer
    if not LocalRedisServer.available():
        raise ValueError("--backend redis needs the redis-server binary on PATH "
                         "(apt-get install redis-server), or pass redis://HOST:PORT/DB")
    with LocalRedisServer(persistent=False) as server:
        yield server.url
