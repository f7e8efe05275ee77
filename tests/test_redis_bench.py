"""Figure 8 and TPC-E over Redis; conditional mutations (one script) against the two-trip path.

- ``percolator bench --backend redis``: the JSON keys, and the exact round trips and
  server calls per operation in both modes (combined: the check and the writes in one
  script; separate: read under a lease, then a conditional write).
- The combined mode changes round trips only: the cells and the whole trace (steps,
  reads, changes, notes) equal the separate mode's on the same scenario, conflicts,
  crashes and cleanup included.
- ``percolator tpce --backend redis --processes 2`` keeps TPC-E's invariants.
- A client process SIGKILLed mid-commit (``harness.crash``), right after a crash point as
  ``commit(crash_after=...)`` means it, is cleaned up by the next reader.
"""
import json

import pytest

from percolator_ref import Bigtable, ClientCrash, Cluster, ManualClock, bench
from percolator_ref.bigtable import Condition
from percolator_ref.stores import url_with
from percolator_ref.stores.redis_store import RedisBigtable
from percolator_ref.harness.crash import kill_mid_commit
from percolator_ref.commands import main
from redis_fixtures import require_redis

pytestmark = pytest.mark.redis

KEYS = ("bigtable_reads_per_s", "percolator_reads_per_s", "read_relative",
        "bigtable_writes_per_s", "percolator_writes_per_s", "write_relative",
        "write_relative_without_conditional_mutations", "counts", "backend", "mode",
        "round_trips_per_op", "server_calls_per_op", "modes", "rpc_model")
TRIPS = {"combined": {"bigtable_read": 1, "bigtable_write": 1, "percolator_get": 1,
                      "percolator_write": 2},
         "separate": {"bigtable_read": 1, "bigtable_write": 1, "percolator_get": 1,
                      "percolator_write": 4}}
CALLS = {"combined": {"bigtable_read": 1, "bigtable_write": 1, "percolator_get": 2,
                      "percolator_write": 4},
         "separate": {"bigtable_read": 1, "bigtable_write": 1, "percolator_get": 2,
                      "percolator_write": 6}}


def test_bench_backend_redis_quick_json_keys_and_exact_round_trips(capsys):
    require_redis()
    assert main(["bench", "--backend", "redis", "--quick", "--json", "--ops", "20",
                 "--rounds", "1", "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(KEYS) <= set(result)
    assert result["mode"] == "both" and result["backend"].startswith("redis")
    assert "modeled_latency" not in result                 # real round trips instead
    assert result["round_trips_per_op"] == TRIPS
    assert result["server_calls_per_op"] == CALLS
    for mode in ("combined", "separate"):
        m = result["modes"][mode]
        assert m["round_trips_per_op"] == TRIPS[mode]
        assert m["read_relative"] > 0 and m["write_relative"] > 0
    assert result["counts"]["percolator_write"]["by_step"] == {"prewrite-primary": 1,
                                                               "commit-primary": 1}


@pytest.mark.parametrize("mode", ["combined", "separate"])
def test_round_trips_per_operation_are_exact(redis_url, mode):
    counts = bench.operation_counts(backend=redis_url, mode=mode)
    assert bench.per_op(counts, "round_trips") == TRIPS[mode]
    assert bench.per_op(counts, "server_calls") == CALLS[mode]
    assert bench.per_op(counts, "oracle_calls") == {"bigtable_read": 0, "bigtable_write": 0,
                                                    "percolator_get": 1, "percolator_write": 2}


def _scenario(url: str):
    """Commits, a write-write conflict, a lock conflict, crashes and lazy cleanup."""
    clock = ManualClock()
    c = Cluster(first_timestamp=5, clock=clock, backend=url, lock_ttl=1.0)
    with c.tracer.record() as events:
        t = c.begin()
        t.set("Bob", "bal", 10)
        t.set("Joe", "bal", 2)
        assert t.commit()
        a, b = c.begin(), c.begin()
        a.set("Bob", "bal", 3)
        a.set("Joe", "bal", 9)
        b.set("Joe", "bal", 1)
        assert b.commit() and a.commit() is False              # write after a's start
        d = c.begin()
        d.delete("Joe", "bal")
        d.set("Bob", "bal", 1)
        with pytest.raises(ClientCrash):
            d.commit(crash_after="prewrite")
        e = c.begin()
        e.set("Bob", "bal", 4)
        assert e.commit() is False                             # a dead client's lock
        clock.advance(2)
        r = c.begin()
        assert (r.get("Bob", "bal"), r.get("Joe", "bal")) == (10, 1)
        f = c.begin()
        f.set("Bob", "bal", 5)
        f.set("Ann", "bal", 5)
        with pytest.raises(ClientCrash):
            f.commit(crash_after="commit-primary")
        assert c.begin().scan() == [("Ann", "bal", 5), ("Bob", "bal", 5), ("Joe", "bal", 1)]
    trace = [(x.seq, x.client, x.table, x.row, x.step, x.reads, x.changes, x.note)
             for x in events]
    return c.bigtable.dump(), trace, c.bigtable.round_trips


def test_one_script_mode_gives_the_same_cells_and_trace_in_fewer_round_trips(redis_url):
    separate = _scenario(url_with(redis_url, prefix=redis_url.rsplit("=", 1)[1] + "s"))
    combined = _scenario(url_with(redis_url, prefix=redis_url.rsplit("=", 1)[1] + "c",
                                  conditional=1))
    assert combined[0] == separate[0]                          # the cells
    assert [e[4] for e in combined[1]] == [e[4] for e in separate[1]]   # step names
    assert combined[1] == separate[1]                          # reads, changes, notes too
    assert combined[2] < separate[2]


def _check_and_write_story(bt):
    """One conditional mutation that fails (a lock), one that passes; what each returned."""
    bt.write("t", "r", "x:lock", "held", 3)
    bt.write("t", "r", "x:write", "old", 2)
    checks = [Condition("x:write", min_ts=4), Condition("x:lock")]
    with bt.row_transaction("t", "r", step="prewrite-primary") as rt:
        refused = rt.check_and_write(checks, [("x:data", 4, "v"), ("x:lock", 4, "mine")])
    bt.erase("t", "r", "x:lock", 3)
    with bt.row_transaction("t", "r", step="prewrite-primary") as rt:
        passed = rt.check_and_write(checks, [("x:data", 4, "v"), ("x:lock", 4, "mine")])
    with bt.row_transaction("t", "r", step="commit-primary") as rt:
        absent = rt.check_and_write([Condition("x:lock", 9, 9, present=True)], [("x:write", 9, 1)])
    return refused, passed, absent, bt.dump()


def test_check_and_write_in_one_script_returns_and_writes_what_memory_does(redis_url):
    memory = Bigtable()
    store = RedisBigtable(url_with(redis_url, conditional=1))
    with memory.tracer.record() as mem_events, store.tracer.record() as red_events:
        expected = _check_and_write_story(memory)
        trips = store.round_trips
        got = _check_and_write_story(store)
    assert expected[:3] == ((False, [None, (3, "held")]), (True, [None, None]), (False, [None]))
    assert got == expected
    assert red_events == mem_events              # reads in the same order, changes, notes
    assert store.round_trips - trips == 2 + 3 + 1      # 2 raw writes, 3 one-script checks, 1 erase


def test_writes_after_a_one_script_check_and_write_are_refused_loudly(redis_url):
    store = RedisBigtable(url_with(redis_url, conditional=1))
    with pytest.raises(RuntimeError, match="check_and_write last"):
        with store.row_transaction("t", "r", step="prewrite-primary") as rt:
            assert rt.check_and_write([Condition("x:lock")], [("x:lock", 4, "mine")]) == (True, [None])
            rt.write("x:data", 4, "late")
    assert store.dump() == {"t": {"r": {"x:lock": [(4, "mine")]}}}     # what the script applied


def test_tpce_two_processes_on_redis_keep_the_invariants(capsys):
    require_redis()
    code = main(["tpce", "--backend", "redis", "--processes", "2", "--threads", "1",
                 "--seconds", "1.5", "--customers", "30", "--json", "--no-progress"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0, result["violations"]
    assert result["invariants_ok"] is True and result["violations"] == []
    assert result["processes"] == 2 and len(result["per_process"]) == 2
    assert all(p["committed"] > 0 for p in result["per_process"])
    for key in ("tpsE", "trade_results", "aborts", "abort_rate", "latency_ms_p50",
                "latency_ms_p99", "violations", "backend"):
        assert key in result


def test_tpce_processes_need_a_shared_store(capsys):
    assert main(["tpce", "--processes", "2", "--seconds", "1"]) == 2
    assert "--processes needs" in capsys.readouterr().err


def test_sigkilled_client_process_is_cleaned_up_by_the_next_reader(redis_url):
    from percolator_ref.viz import figure4_setup
    cluster = Cluster(first_timestamp=5, clock=ManualClock(), lock_ttl=1.0, backend=redis_url)
    figure4_setup(cluster)
    killed = kill_mid_commit(redis_url, "commit-primary",
                             cluster_options={"clock": ManualClock(), "lock_ttl": 1.0})
    assert killed.exitcode == -9 and (killed.start_ts, killed.commit_ts) == (7, 8)
    assert "killed with SIGKILL right after its commit point (commit-primary)" in str(killed)
    assert cluster.bigtable.versions("default", "Joe", "bal:lock")      # left behind
    cluster.clock.advance(2.0)
    reader = cluster.begin()
    with cluster.tracer.record() as events:
        assert (reader.get("Bob", "bal"), reader.get("Joe", "bal")) == (3, 9)
    assert [e.step for e in events] == ["get", "get", "cleanup-primary", "roll-forward", "get"]
    assert cluster.bigtable.versions("default", "Joe", "bal:lock") == []
