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


# `make test` runs pytest-xdist. Each test is a unit of work for a test process, except in
# these files, whose tests share a module fixture or a cache (a build, a recording, a server
# started once) or a marker: each of them is one unit. (A scheduler of our own, because xdist 3.8's
# --dist loadgroup marks do not reach pytest 9.2's node ids.)
GROUPED = {"test_scale.py", "test_lite.py", "test_grading.py", "test_grading_submissions.py",
           "test_indexing.py", "test_redis_trace_golden.py", "test_trace_golden.py",
           "test_replay_widget.py",
           # these look for (and kill) processes by a marker their notebooks share: a test of
           # the same file in the other process would be seen, or killed, as a survivor
           "test_grading_privileges.py", "test_grading_hostile.py"}


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.rsplit("/", 1)[-1] in GROUPED else nodeid
    config.option.loadscopereorder = False          # in collection order: no long tail
    return ByFile(config, log)
