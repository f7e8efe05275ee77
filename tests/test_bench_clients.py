"""Figure 8 with concurrent client processes (``percolator bench --clients N``) over Redis.

- the JSON keys, and the exact calls per operation that do not depend on timing
  (row scripts per operation; read-only transactions make no liveness-token call);
- the batching oracle client on the Redis oracle: transactions waiting while a request
  is in flight are served together by the next one (``get_timestamps(n)``), so a
  process's server calls per read fall below 2 as its concurrent transactions grow.
No assertion here is about speed.
"""
import json
import threading
import time

import pytest

from percolator_ref.bench import clients as bench_clients
from percolator_ref.commands import main
from percolator_ref.cluster import Cluster
from percolator_ref.services.oracle import BatchingOracleClient
from redis_fixtures import require_redis

pytestmark = pytest.mark.redis

KEYS = ("clients", "threads_per_client", "read_relative", "write_relative",
        "write_relative_without_conditional_mutations", "server_calls_per_op", "costs_per_op",
        "cpu_relative", "cpu_share", "bigtable_reads_per_s", "percolator_reads_per_s",
        "bigtable_writes_per_s", "percolator_writes_per_s",
        "percolator_writes_per_s_without_conditional_mutations", "paper", "store_cpu",
        "oracle_timestamps_per_s")


def test_bench_clients_json_keys_and_exact_row_scripts(capsys):
    require_redis()
    assert main(["bench", "--backend", "redis", "--clients", "2", "--threads", "2",
                 "--seconds", "0.2", "--rounds", "1", "--json", "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(KEYS) <= set(result)
    assert result["clients"] == 2 and result["threads_per_client"] == 2
    costs = result["costs_per_op"]
    assert {op: c["round_trips"] for op, c in costs.items()} == {
        "bigtable_read": 1, "percolator_get": 1, "bigtable_write": 1, "percolator_write": 2,
        "percolator_write_separate": 4, "oracle_timestamp": 0}
    assert costs["percolator_get"]["token_and_other_calls"] == 0     # read-only: no token call
    # the oracle apart: its phase makes oracle requests only, and its CPU is taken out
    assert 0 < costs["oracle_timestamp"]["oracle_requests"] <= 1
    assert costs["oracle_timestamp"]["server_calls"] == costs["oracle_timestamp"]["oracle_requests"]
    own, oracle = result["store_cpu"]["store_server_cpu_us"], result["store_cpu"]["oracle_server_cpu_us"]
    assert oracle["bigtable_write"] == 0 and oracle["percolator_write"] >= 0
    assert own["percolator_write"] == pytest.approx(
        costs["percolator_write"]["server_cpu_us"] - oracle["percolator_write"], abs=0.2)
    assert costs["bigtable_read"]["oracle_requests"] == 0
    assert 0 < costs["percolator_get"]["oracle_requests"] <= 1
    assert 0 < costs["percolator_write"]["oracle_requests"] <= 2
    for name in ("read_relative", "write_relative",
                 "write_relative_without_conditional_mutations"):
        assert result[name] > 0
    assert result["server_calls_per_op"]["percolator_get"] == pytest.approx(
        1 + costs["percolator_get"]["oracle_requests"], abs=1e-3)


def test_bench_clients_refuses_bad_input(capsys):
    assert main(["bench", "--clients", "2", "--json"]) == 2          # in memory: no processes
    assert "--clients needs a store shared by processes" in capsys.readouterr().err
    require_redis()
    assert main(["bench", "--backend", "redis", "--clients", "0", "--json"]) == 2
    assert "argument --clients: must be in 1..64" in capsys.readouterr().err


class HeldOracle:
    """The Redis oracle, whose first request waits until the test lets it go."""

    def __init__(self, oracle):
        self.oracle, self.release, self.calls = oracle, threading.Event(), []

    def get_timestamps(self, n):
        self.calls.append(n)
        if len(self.calls) == 1:
            self.release.wait(10)
        return self.oracle.get_timestamps(n)


def test_waiting_transactions_share_one_redis_oracle_request(redis_url):
    cluster = Cluster(backend=redis_url, record_history=False)
    held = HeldOracle(cluster.oracle)
    client = BatchingOracleClient(held)
    got = []
    threads = [threading.Thread(target=lambda: got.append(client.get_timestamp()))
               for _ in range(8)]
    threads[0].start()                       # its request is in flight, held
    while not held.calls:
        time.sleep(0.001)
    for t in threads[1:]:
        t.start()                            # these queue behind it
    time.sleep(0.2)
    held.release.set()
    for t in threads:
        t.join(10)
    assert held.calls == [1, 7]              # one request for the seven that waited
    assert client.requests == 2 and sorted(got) == list(range(min(got), min(got) + 8))


def test_server_calls_per_read_fall_with_concurrent_transactions(redis_url):
    store = bench_clients.preload(redis_url)
    try:
        per_op = {}
        for threads in (1, 8):
            client = bench_clients.ClientProcess(redis_url, threads, threads)
            phase = client.run_phase("percolator_get", time.time(), 0.3)
            client.close()
            assert phase["errors"] == [] and phase["ops"] > 0
            per_op[threads] = phase["server_calls"] / phase["ops"]
            if threads == 1:                 # alone: one oracle request per transaction
                assert phase["oracle_requests"] == phase["ops"]
        assert per_op[1] == 2.0
        assert per_op[8] < 2.0               # waiting transactions shared requests
    finally:
        store.close()
