"""The TPC-E-style workload: invariants after short runs, the broker fix, JSON output."""
import json
import random

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.cli import main
from percolator_ref.workloads import tpce


def small(make_cluster=None, **kw):
    cluster = (make_cluster or (lambda **k: Cluster(clock=ManualClock(), **k)))(
        record_history=True)
    kw.setdefault("customers", 40)
    kw.setdefault("securities", 8)
    kw.setdefault("brokers", 2)
    return cluster, tpce.Tpce(cluster, tpce.TpceConfig(**kw))


@pytest.mark.parametrize("broker_fix,aggregation", [(False, "observer"), (True, "observer"),
                                                    (True, "periodic")])
def test_invariants_hold_after_a_concurrent_deterministic_run(make_cluster, broker_fix,
                                                              aggregation):
    cluster, w = small(make_cluster, broker_fix=broker_fix, aggregation=aggregation)
    assert w.aggregation == (aggregation if broker_fix else None)
    w.run_rounds(clients=6, rounds=40)
    assert w.stats.trade_results > 10
    assert set(w.stats.committed) >= {"trade_order", "trade_result", "customer_position",
                                      "trade_status"}
    assert w.check_invariants() == []
    assert cluster.check_history().ok


def test_rounds_are_reproducible():
    runs = []
    for _ in range(2):
        _, w = small()
        w.run_rounds(clients=4, rounds=40)
        runs.append((dict(w.stats.committed), dict(w.stats.aborted), w.stats.trade_results))
    assert runs[0] == runs[1]


def test_broker_hotspot_conflicts_and_the_fix_removes_them():
    rates = {}
    for fix in (False, True):
        _, w = small(broker_fix=fix, brokers=1)
        w.run_rounds(clients=8, rounds=60)
        assert w.check_invariants() == []
        rates[fix] = w.stats.abort_rate(["trade_result"])
    assert rates[False] > 0.1
    assert rates[True] < rates[False] / 3


@pytest.mark.parametrize("aggregation", ["observer", "periodic"])
def test_broker_fix_leaves_side_rows_until_aggregated(aggregation):
    cluster, w = small(broker_fix=True, aggregation=aggregation)
    w.run_rounds(clients=2, rounds=30, aggregate_every=1000)   # drain aggregates at the end
    assert w.check_invariants() == []
    w.pending.clear()
    # A Trade-Result after the last aggregation: the side row is pending, and said so.
    t = cluster.begin()
    tpce.trade_order(t, "A0000", "S00", 10, True, None, "T99999999")
    assert t.commit()
    assert w.execute("trade_result", ("T99999999", True), random.Random(0))
    w.stats.committed["trade_order"] += 1
    assert any("not aggregated" in v for v in w.check_invariants())
    w.aggregate()
    assert w.check_invariants() == []


def test_invariant_checker_catches_a_corrupted_database():
    cluster, w = small()
    w.run_rounds(clients=2, rounds=30)
    t = cluster.begin()
    t.set("A0001", "cash", t.get("A0001", "cash", table="account") + 1, table="account")
    t.set("B00", "num_trades", 10**6, table="broker")
    assert t.commit()
    found = "\n".join(w.check_invariants())
    assert "account A0001: cash" in found and "broker B00" in found


def test_read_only_transactions_report_an_inconsistent_view():
    cluster, w = small()
    t = cluster.begin()
    t.set("A0000/S00/X", "qty", 5, table="holding")        # a lot without its summary update
    assert t.commit()
    result = tpce.customer_position(cluster.begin(), "A0000")
    assert result["violations"]


def test_same_transactions_run_on_sqlite_with_the_same_outcome():
    outcomes = []
    for store in (tpce.PercolatorStore(Cluster(clock=ManualClock(), record_history=False)),
                  tpce.SqliteStore()):
        w = tpce.Tpce(store, tpce.TpceConfig(customers=30, securities=6, brokers=2))
        w.run_rounds(clients=1, rounds=80)
        assert w.check_invariants() == []
        outcomes.append((dict(w.stats.committed), w.stats.trade_results))
    assert outcomes[0] == outcomes[1]


def test_threaded_run_keeps_the_invariants():
    w = tpce.Tpce(tpce.new_cluster(), tpce.TpceConfig(customers=30, securities=6, brokers=1,
                                                      broker_fix=True))
    summary = w.run_threads(threads=3, seconds=0.5)
    assert summary["threads"] == 3 and summary["trade_results"] >= 0
    assert w.check_invariants() == []


def test_bad_settings_are_rejected_naming_them():
    with pytest.raises(ValueError, match="customers"):
        tpce.TpceConfig(customers=0)
    with pytest.raises(TypeError, match="broker_fix"):
        tpce.TpceConfig(broker_fix="yes")
    _, w = small()
    with pytest.raises(ValueError, match="clients"):
        w.run_rounds(clients=0)
    with pytest.raises(ValueError, match="seconds"):
        w.run_threads(seconds=0)


def test_percentile_nearest_rank():
    assert tpce.percentile([], 50) == 0.0
    assert tpce.percentile([3, 1, 2], 50) == 2
    assert tpce.percentile(list(range(1, 101)), 99) == 99


def test_tpce_json_keys(capsys):
    assert main(["tpce", "--seconds", "0.5", "--threads", "2", "--customers", "30",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("tpsE", "trade_results", "aborts", "abort_rate", "latency_ms_p50",
                "latency_ms_p99", "invariants_ok", "violations"):
        assert key in out, key
    assert out["invariants_ok"] is True and out["violations"] == []
    assert 0 <= out["abort_rate"] <= 1
    assert out["latency_ms_p50"] <= out["latency_ms_p99"]
    assert out["tpsE"] == pytest.approx(out["trade_results"] / out["seconds"], rel=0.01)
