"""Redis fixtures: a session ``redis-server`` and a three-node Redis Cluster.

Each test gets its own key prefix (``redis_url``), so tests never see each
other's rows, oracle or tokens on the shared server. Everything skips with a
clear reason only where the ``redis-server`` binary is absent.
"""
import itertools
import shutil
import time

import pytest

from percolator_ref.harness.redis_cluster import node_client
from percolator_ref.harness.redis_server import LocalRedisCluster, LocalRedisServer

SKIP_REASON = ("redis-server is not installed (apt-get install redis-server); "
               "the Redis backend tests need a real server")
_prefixes = itertools.count(1)


def require_redis():
    if not LocalRedisServer.available() or shutil.which("redis-cli") is None:
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="session")
def redis_server():
    """One non-persistent redis-server for the whole session (stopped at the end)."""
    require_redis()
    server = LocalRedisServer(persistent=False)
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """A URL on the session server with a key prefix of this test's own."""
    return f"{redis_server.url}?prefix=t{next(_prefixes)}"


@pytest.fixture(scope="session")
def redis_cluster_server():
    """A three-node Redis Cluster (three masters) for the cluster tests."""
    require_redis()
    cluster = LocalRedisCluster(nodes=3)
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_cluster_url(redis_cluster_server):
    return f"{redis_cluster_server.url}?prefix=c{next(_prefixes)}"


@pytest.fixture
def master_and_replica():
    """A Redis master and one replica following it (both stopped at the end)."""
    require_redis()
    master = LocalRedisServer()
    replica = LocalRedisServer(extra_args=("--replicaof", "127.0.0.1", str(master.port)))
    try:
        client = node_client(replica)
        deadline = time.monotonic() + 10
        while client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not connect"
            time.sleep(0.05)
        client.close()
        yield master, replica
    finally:
        replica.stop()
        master.stop()


def promote(replica):
    """The replica stops following its master and serves on its own (as a partition, then
    a failover, would have it)."""
    client = node_client(replica)
    client.execute_command("REPLICAOF", "NO", "ONE")
    client.close()
