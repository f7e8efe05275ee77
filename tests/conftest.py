"""Shared fixtures.

``make_cluster`` builds a Cluster on each backend the suite runs against.
The in-memory backend always runs; other backends (Redis) are added to
``BACKENDS`` by their own fixtures and skip cleanly where the server binary
is absent.
"""
import pytest

from percolator_ref import Cluster, ManualClock

BACKENDS = ["memory"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend URL for Cluster(backend=...): None for memory."""
    if request.param == "memory":
        return None
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def make_cluster(backend):
    """``make_cluster(first_timestamp=1, **kw)`` on the parametrised backend, manual clock by default."""
    def make(first_timestamp=1, **kwargs):
        kwargs.setdefault("clock", ManualClock())
        return Cluster(first_timestamp=first_timestamp, backend=backend, **kwargs)
    return make
