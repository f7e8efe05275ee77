"""The TPC-E-style workload: invariants after short runs, the broker fix, JSON output."""
import json
import random

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.commands import main
from percolator_ref.workloads import tpce


def small(make_cluster=None, **kw):
    cluster = (make_cluster or (lambda **k: Cluster(clock=ManualClock(), **k)))(
        record_history=True)
    kw.setdefault("customers", 40)
    kw.setdefault("securities", 8)
    kw.setdefault("brokers", 2)
    return cluster, tpce.Tpce(cluster, tpce.TpceConfig(**kw))


@pytest.mark.parametrize("broker_fix,aggregation", [(False, "observer"), (True, "observer"),
                                                    (True, "observer-per-trade"),
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


@pytest.mark.parametrize("aggregation", ["observer", "observer-per-trade", "periodic"])
def test_broker_fix_leaves_side_rows_until_aggregated(aggregation):
    cluster, w = small(broker_fix=True, aggregation=aggregation)
    w.run_rounds(clients=2, rounds=30, aggregate_every=1000)   # drain aggregates at the end
    assert w.check_invariants() == []
    w.pending.clear()
    # A Trade-Result after the last aggregation: the side row is pending, and said so.
    t = cluster.begin()
    tpce.trade_order(t, "A0000", "S00", 10, True, None, "T99999999")
    assert t.commit()
    assert w.execute("trade_result", w.trade_result_args("T99999999"), random.Random(0))
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


# -- the broker fix's aggregation, the window measurement, the stats frame ------------------

def rows_per_trade(aggregation):
    """Row transactions of the aggregation per Trade-Result, and its runs, in a fixed run."""
    from percolator_ref.interceptors import Counter, attach
    cluster, w = small(broker_fix=True, aggregation=aggregation)
    counter, aggregate = Counter(), w.aggregate

    def counted(*args, **kwargs):
        with attach(cluster.bigtable, counter):
            aggregate(*args, **kwargs)
    w.aggregate = counted
    w.run_rounds(clients=6, rounds=60)
    assert w.check_invariants() == []
    n = w.stats.trade_results
    return sum(counter.counts.values()) / n, w.stats.committed["aggregate"], n, counter.counts


def test_fold_per_group_collapses_notifications_and_costs_less_than_per_trade():
    per_trade, runs_per_trade, n, counts = rows_per_trade("observer-per-trade")
    assert runs_per_trade == 2 * n                 # a run per trade, and one woken by its delete
    assert per_trade == 19 and counts["notify"] == n
    per_group, runs_per_group, n2, _ = rows_per_trade("observer")
    assert n2 == n
    assert runs_per_group < n / 2                  # several trades' notifications, one run
    assert per_group < per_trade / 2


def test_weak_notifications_do_not_conflict():
    cluster, w = small(broker_fix=True, brokers=1)
    ids = []
    for i, acct in enumerate(("A0001", "A0002")):  # same broker, same side-row group
        t = cluster.begin()
        tpce.trade_order(t, acct, "S00", 10, True, None, f"T0000001{i}")
        assert t.commit()
        ids.append(f"T0000001{i}")
    assert tpce.side_group("B00", ids[0]) == tpce.side_group("B00", ids[1]) == "B00/T0000001"
    txns = [cluster.begin(), cluster.begin()]
    for t, trade_id in zip(txns, ids):
        assert tpce.trade_result(t, trade_id, True, notify=True)["completed"]
    assert [t.commit() for t in txns] == [True, True]
    assert cluster.run_observers() == 1            # both notifications collapse into one run
    w.stats.trade_results += 2
    w.stats.committed["trade_order"] += 2
    assert w.check_invariants() == []


def test_threads_are_measured_over_the_window_only():
    w = tpce.Tpce(tpce.new_cluster(), tpce.TpceConfig(customers=30, securities=6, brokers=1,
                                                      broker_fix=True))
    summary = w.run_threads(threads=3, seconds=0.4, latency=0.001, drain=False)
    assert summary["seconds"] == pytest.approx(0.4, abs=0.3)
    assert summary["tpsE"] == pytest.approx(summary["trade_results"] / summary["seconds"],
                                            rel=0.01)
    assert summary["stop_seconds"] >= 0
    assert summary["side_rows_unfolded"] == tpce.count_side_rows(w)
    assert w.stats.trade_results >= summary["trade_results"]   # in-flight ones finish later
    w.drain()
    assert tpce.count_side_rows(w) == 0 and w.check_invariants() == []
    plain = tpce.Tpce(tpce.new_cluster(), tpce.TpceConfig(customers=30, securities=6))
    assert plain.run_threads(threads=2, seconds=0.2)["side_rows_unfolded"] is None


def test_observer_sweep_stops_when_told():
    import threading
    cluster, w = small(broker_fix=True)
    w.run_rounds(clients=2, rounds=10, aggregate_every=1000)
    t = cluster.begin()
    tpce.trade_order(t, "A0000", "S00", 10, True, None, "T99999999")
    assert t.commit()
    assert w.execute("trade_result", w.trade_result_args("T99999999"), random.Random(0))
    stop = threading.Event()
    stop.set()
    assert tpce.observer_sweep(cluster, stop) == 0 and tpce.count_side_rows(w) == 1
    assert tpce.observer_sweep(cluster, threading.Event()) == 1
    assert tpce.count_side_rows(w) == 0


def test_stats_frame_matches_the_counts():
    _, w = small(brokers=1)
    w.run_rounds(clients=6, rounds=30)
    frame = w.stats.to_frame()
    assert list(frame.columns) == ["committed", "aborted", "gave_up", "abort_rate"]
    for name in w.stats.committed:
        assert frame.loc[name, "committed"] == w.stats.committed[name]
        assert frame.loc[name, "aborted"] == w.stats.aborted[name]
    assert frame.loc["trade_result", "abort_rate"] == round(
        w.stats.abort_rate(["trade_result"]), 4) > 0


def test_bad_aggregation_is_rejected_naming_it():
    with pytest.raises(ValueError, match="aggregation"):
        tpce.TpceConfig(broker_fix=True, aggregation="sometimes")


def test_cpu_per_trade_compares_the_same_work_on_both_stores():
    out = tpce.cpu_per_trade(rounds=60, customers=30, repeats=3)
    assert out["percolator"]["trade_results"] == out["sqlite"]["trade_results"] > 0
    assert out["percolator"]["violations"] == out["sqlite"]["violations"] == 0
    assert out["ratio"] > 1                        # Percolator's protocol costs CPU
    with pytest.raises(ValueError, match="repeats"):
        tpce.cpu_per_trade(rounds=10, repeats=0)


def test_a_trade_missing_a_column_is_a_violation_not_a_crash():
    """Data damaged by a lost write (e.g. a failover without WAIT) is reported, never raised."""
    from percolator_ref.workloads.tpce.invariants import check_trade
    order = '{"acct": "A0000", "broker": "B00", "buy": true, "limit": null, "qty": 5, "symbol": "S1"}'
    assert check_trade("T1", {"order": order, "status": "completed"}, {}, None) == \
        ["trade T1: columns ['exec'] missing (a lost write?)"]
    assert check_trade("T2", {"status": "completed"}, {}, None) == \
        ["trade T2: columns ['order'] missing (a lost write?)"]
