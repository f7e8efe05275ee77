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


# `make test` runs pytest-xdist. A file's tests share module fixtures and caches (a
# self-check computed once, a server started once), so each file is one unit of work for a
# test process, except these files, whose tests are independent gradings (each up to a
# minute): each of their tests is a unit of its own. (A scheduler of our own, because
# xdist 3.8's --dist loadgroup marks do not reach pytest 9.2's node ids.)
SPREAD = {"test_grading_catalogue.py", "test_grading_hidden_reference.py",
          "test_grading_hostile.py"}


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            spread = path.rsplit("/", 1)[-1] in SPREAD or "100_secrets" in nodeid  # the sweep
            return nodeid if spread else path
    return ByFile(config, log)
