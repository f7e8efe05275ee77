"""The Figure 8 benchmark: exact operation counts and the shape of its output (no timing asserts)."""
import json

import pytest

from percolator_ref import bench
from percolator_ref.commands import main
from percolator_ref.interceptors import attach


@pytest.fixture
def store(backend):
    return bench.Figure8Store(n_rows=5, backend=backend)


def test_percolator_get_is_one_row_transaction_and_one_oracle_call(store):
    c = bench.count_operation(store, "percolator_get")
    assert (c["row_transactions"], c["oracle_calls"]) == (1, 1)
    assert c["by_step"] == {"get": 1}
    assert (c["reads"], c["writes"], c["erases"]) == (3, 0, 0)   # lock, write, data


def test_percolator_write_is_two_row_transactions_and_two_oracle_calls(store):
    c = bench.count_operation(store, "percolator_write")
    assert (c["row_transactions"], c["oracle_calls"]) == (2, 2)
    assert c["by_step"] == {"prewrite-primary": 1, "commit-primary": 1}
    # prewrite: read write + lock, write data + lock; commit: read lock, write record, erase lock
    assert (c["reads"], c["writes"], c["erases"]) == (3, 3, 1)


def test_raw_bigtable_operations_are_one_row_transaction_and_no_oracle_call(store):
    for op in ("bigtable_read", "bigtable_write"):
        c = bench.count_operation(store, op)
        assert (c["row_transactions"], c["oracle_calls"], c["column_ops"]) == (1, 0, 1)


def test_without_conditional_mutations_each_check_and_write_costs_two_rpcs(store):
    assert bench.count_operation(store, "percolator_write")[
        "rpcs_without_conditional_mutations"] == 4
    assert bench.count_operation(store, "percolator_get")[
        "rpcs_without_conditional_mutations"] == 1


def test_separate_checks_gate_adds_one_read_rpc_per_check_and_write_step(store):
    attach(store.bigtable, bench.SeparateChecks(store.bigtable))
    c = bench.count_operation(store, "percolator_write")
    assert c["row_transactions"] == 4
    assert c["by_step"]["separate-read"] == 2
    assert store.percolator_get(0) is not None          # values still readable
    assert bench.count_operation(store, "percolator_get")["row_transactions"] == 1


def test_rpc_model_counts_every_round_trip_the_oracle_included():
    counts = bench.operation_counts(n_rows=3)
    # a write: oracle, prewrite, oracle, commit = 4 round trips (a latency model, not §3.2's)
    assert bench.round_trips(counts, "percolator_write") == 4
    assert bench.round_trips(counts, "percolator_write", conditional_mutations=False) == 6
    assert bench.round_trips(counts, "percolator_get") == 2
    assert bench.rpc_model(counts) == {
        "read_relative": 0.5, "write_relative": 0.25,
        "write_relative_without_conditional_mutations": 1 / 6,
        "read_relative_row_transactions_only": 1.0, "write_relative_row_transactions_only": 0.5}


def test_oracle_round_trip_sleeps_before_each_call_and_delegates_the_rest(monkeypatch):
    store = bench.Figure8Store(n_rows=2)
    slept = []
    monkeypatch.setattr(bench.time, "sleep", slept.append)
    store.cluster.oracle = bench.OracleRoundTrip(store.cluster.oracle, 0.001)
    c = bench.count_operation(store, "percolator_write")
    assert c["oracle_calls"] == 2 and slept == [0.001, 0.001]
    assert list(store.cluster.oracle.get_timestamps(2)) == [store.cluster.oracle.peek() - 2,
                                                            store.cluster.oracle.peek() - 1]
    with pytest.raises(ValueError, match="latency"):
        bench.OracleRoundTrip(store.cluster.oracle, -1)


def test_modeled_latency_charges_every_round_trip_the_oracle_included(monkeypatch):
    slept = []
    monkeypatch.setattr(bench.time, "sleep", slept.append)
    bench.run_modeled_latency(0.5, ops=1, rounds=1, n_rows=2, progress=False)
    # raw read 1 + raw write 1 + get (1 + oracle 1) + write (2 + oracle 2)
    # + write without conditional mutations (2 + 2 separate reads + oracle 2)
    assert slept == [0.5] * 14


def test_locked_counter_counts_from_first():
    counter = bench.LockedCounter(first=5)
    assert [counter.next() for _ in range(3)] == [5, 6, 7]


def test_thread_cpu_rate_calls_fn_n_times():
    seen = []
    assert bench.thread_cpu_rate(seen.append, 50) > 0 and seen == list(range(50))


def test_oracle_rates_result_shape_and_bad_input():
    result = bench.run_oracle_rates(ops=200, rounds=1, batch=50, progress=False)
    for key in ("locked_counter_per_s", "oracle_per_s", "oracle_batched_per_s"):
        assert result[key] > 0, key
    assert result["oracle_vs_locked_counter"] > 0 and result["clock"] == "thread CPU time"
    frame = bench.oracle_frame(result)
    assert list(frame["timestamp source"]) == ["LockedCounter.next",
                                               "TimestampOracle.get_timestamp",
                                               "TimestampOracle.get_timestamps(50)"]
    assert list(frame["vs locked counter"]) == [1.0, result["oracle_vs_locked_counter"],
                                                result["oracle_batched_vs_locked_counter"]]
    with pytest.raises(ValueError, match="batch"):
        bench.run_oracle_rates(batch=0, progress=False)


def test_operations_do_what_they_say(store):
    assert store.percolator_write(7) is True
    assert store.percolator_get(7) == 7
    store.bigtable_write(3)
    assert store.bigtable_read(3) == 3


def test_bad_arguments_are_rejected_naming_them():
    with pytest.raises(ValueError, match="ops"):
        bench.run_figure8(ops=0, progress=False)
    with pytest.raises(TypeError, match="latency"):
        bench.run_figure8(ops=1, latency="fast", progress=False)
    with pytest.raises(ValueError, match="operation"):
        bench.count_operation(bench.Figure8Store(2), "scan")


def test_bench_json_has_the_figure8_keys_and_sane_values(capsys):
    assert main(["bench", "--json", "--ops", "50", "--rounds", "1", "--no-progress",
                 "--model-latency", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("bigtable_reads_per_s", "percolator_reads_per_s", "read_relative",
                "bigtable_writes_per_s", "percolator_writes_per_s", "write_relative"):
        assert out[key] > 0, key
    assert out["read_relative"] == pytest.approx(
        out["percolator_reads_per_s"] / out["bigtable_reads_per_s"], abs=1e-3)
    assert out["counts"]["percolator_write"]["row_transactions"] == 2
    assert out["counts"]["percolator_get"]["oracle_calls"] == 1
    assert out["paper"]["write_relative"] == 0.23


def test_store_operations_count_as_section_3_2_does():
    from percolator_ref.bench import store as bench_store
    ops = bench_store.store_operations(n_rows=3)
    w, g = ops["percolator_write"], ops["percolator_get"]
    # the prewrite's lock-check read + the commit's check of its own lock; two writes
    assert (w["store_reads"], w["store_writes"], w["columns_erased"]) == (2, 2, 1)
    assert (g["store_reads"], g["store_writes"], g["columns_read"]) == (1, 0, 3)   # one op, 3 columns
    assert ops["bigtable_write"]["store_writes"] == 1
    # Figure 8's raw rates make a read cost about two writes: 1 read + 2 writes ~ 1/4
    assert bench_store.section32_prediction(1, 2)["write_relative"] == 0.25


def test_store_cpu_over_redis_takes_the_oracle_out():
    from percolator_ref.bench import store as bench_store
    from percolator_ref.harness.redis_server import LocalRedisServer
    if not LocalRedisServer.available():
        pytest.skip("redis-server is not installed")
    server = LocalRedisServer()
    try:
        r = bench_store.run_store_cpu(server.url, ops=50, rounds=1, n_rows=20)
    finally:
        server.stop()
    per_op, own = r["per_op"], r["store_server_cpu_us"]
    assert own["percolator_write"] == pytest.approx(
        per_op["percolator_write"]["server_cpu_us"] - 2 * r["oracle_server_cpu_us"], abs=0.02)
    assert own["bigtable_write"] == per_op["bigtable_write"]["server_cpu_us"]
    assert set(r["write_relative"]) == {"store_cpu", "wall_clock"}
    with pytest.raises(ValueError, match="ops"):
        bench_store.run_store_cpu(server.url, ops=0)


def test_the_store_cpu_command_runs_on_a_throwaway_redis(capsys):
    """``percolator bench --store-cpu --backend redis``: the command's own path (its imports,
    the throwaway server), not only ``run_store_cpu``."""
    from percolator_ref.harness.redis_server import LocalRedisServer
    if not LocalRedisServer.available():
        pytest.skip("redis-server is not installed")
    assert main(["bench", "--store-cpu", "--backend", "redis", "--ops", "20", "--rounds", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ops"] == 20 and set(result["write_relative"]) == {"store_cpu", "wall_clock"}
