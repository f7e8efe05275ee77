"""The stores behind the Bigtable interface (harnesses that start servers live in ``percolator_ref.harness``).

``None`` is the embedded in-memory :class:`~percolator_ref.bigtable.Bigtable`.
A URL picks a real server (see the README's backend section).
"""
from __future__ import annotations

import contextlib
from urllib.parse import parse_qsl, urlencode, urlparse

from ..bigtable import Bigtable


def open_backend(backend, tracer=None):
    """The store for ``Cluster(backend=...)``: None -> in memory; ``redis://host:port/db``."""
    if backend is None:
        return Bigtable(tracer)
    if not isinstance(backend, str):
        raise TypeError(f"backend must be None or a URL str, got {backend!r}")
    scheme = urlparse(backend).scheme
    if scheme in ("redis", "redis+cluster"):
        from .redis_store import RedisBigtable      # optional: needs the redis package
        return RedisBigtable(backend, tracer)
    raise ValueError(f"backend must be None or a 'redis://host:port/db' URL, got {backend!r}")


def url_with(url: str, **options) -> str:
    """``url`` with query options set or replaced, e.g. ``url_with(u, prefix="x", conditional=1)``."""
    parsed = urlparse(url)
    query = dict(parse_qsl(parsed.query))
    query.update({k: str(v) for k, v in options.items()})
    return parsed._replace(query=urlencode(query)).geturl()


def is_redis(backend) -> bool:
    """Is ``backend`` a Redis store: the word ``"redis"`` or a ``redis://`` URL?"""
    return isinstance(backend, str) and (backend == "redis" or
                                         urlparse(backend).scheme in ("redis", "redis+cluster"))


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
