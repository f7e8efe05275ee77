"""Shared fixtures.

``make_cluster`` builds a Cluster on each backend the suite runs against.
The in-memory backend always runs; other backends (Redis) are added to
``BACKENDS`` by their own fixtures and skip cleanly where the server binary
is absent.
"""
import pytest

from percolator_ref import Cluster, ManualClock
from redis_fixtures import (redis_cluster_server, redis_cluster_url,  # noqa: F401 (fixtures)
                            redis_server, redis_url)

BACKENDS = ["memory", "redis"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend URL for Cluster(backend=...): None for memory."""
    if request.param == "memory":
        return None
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def make_cluster(backend):
    """``make_cluster(first_timestamp=1, **kw)`` on the parametrised backend, manual clock by default."""
    made = []

    def make(first_timestamp=1, **kwargs):
        kwargs.setdefault("clock", ManualClock())
        url = backend
        if url is not None and made:          # each cluster of a test gets its own store
            url = f"{backend}-{len(made)}"
        made.append(url)
        return Cluster(first_timestamp=first_timestamp, backend=url, **kwargs)
    return make


# `make test` runs pytest-xdist with --dist loadgroup. A file's tests share module fixtures
# and caches (a self-check computed once, a server started once), so each file runs in one
# test process, except these, whose tests are independent gradings (each minutes long).
SPREAD = {"test_grading_catalogue.py", "test_grading_hidden_reference.py",
          "test_grading_hostile.py"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
