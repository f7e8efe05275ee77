"""Store backends behind the Bigtable interface.

``None`` is the embedded in-memory :class:`~percolator_ref.bigtable.Bigtable`.
A URL picks a real server (see the README's backend section).
"""
from __future__ import annotations

from urllib.parse import urlparse

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
