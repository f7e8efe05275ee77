"""The stores behind the Bigtable interface (harnesses that start servers live in ``percolator_ref.harness``).

``None`` is the embedded in-memory :class:`~percolator_ref.bigtable.Bigtable`.
A URL picks a real server (see the README's backend section);
:func:`~percolator_ref.stores.backend.open_backend` opens either. :mod:`.raw`:
Figure 8's raw Bigtable operations every store offers.
"""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlparse


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
