"""``percolator soak``: a short run on each store reports zeros, and its audit can fail."""
import json
import random

import pytest

from percolator_ref import Cluster, Lock
from percolator_ref.commands import main
from percolator_ref.model import Cell, ack_col, lock_col, write_col
from percolator_ref.workloads.soak import (LEDGER, TOUCH, Soak, SoakReport, audit,
                                           register_observers, run_soak, settle)


def test_a_short_soak_in_memory_finds_nothing_wrong():
    report = run_soak(Cluster(lock_ttl=0.5), 2.0, seed=3)
    assert report.transactions > 100 and report.crashes > 0 and report.committed > 0
    assert report.observer_runs > 0 and report.snapshots_read > 0
    assert (report.anomalies, report.lost_commits, report.stuck_locks,
            report.unobserved_notifications) == (0, 0, 0, 0), report.problems


@pytest.mark.redis
def test_a_short_soak_on_redis_with_server_kills_finds_nothing_wrong(capsys):
    from percolator_ref.harness.redis_server import LocalRedisServer
    if not LocalRedisServer.available():
        pytest.skip("redis-server is not installed")
    assert main(["soak", "--seconds", "4", "--backend", "redis", "--kill-every", "1.5",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["server_kills"] >= 1 and out["transactions"] > 20
    assert (out["anomalies"], out["lost_commits"], out["stuck_locks"],
            out["unobserved_notifications"]) == (0, 0, 0, 0), out["problems"]


@pytest.fixture
def audited():
    c = Cluster(lock_ttl=0.5)
    register_observers(c)
    soak = Soak(c, 0, 4, 0.0, None, 1.0)
    rng = random.Random(1)
    for _ in range(15):
        soak.transfer(rng)
    settle(soak)
    audit(soak)
    assert soak.report.ok and soak.report.committed > 0
    soak.report = SoakReport()
    return c, soak


def test_the_audit_counts_a_lost_commit(audited):
    c, soak = audited
    t, _ = soak.decided[-1]
    cell = next(iter(t.writes))
    c.bigtable.erase(cell.table, cell.row, write_col(cell.column), t.commit_ts)
    audit(soak)
    assert soak.report.lost_commits >= 1


def test_the_audit_counts_a_stuck_lock(audited):
    c, soak = audited
    c.bigtable.write("bank", "acct00", lock_col("balance"),
                     Lock(999, Cell("bank", "acct00", "balance"), True, "ghost"), 999)
    audit(soak)
    assert soak.report.stuck_locks == 1


def test_the_audit_counts_an_unobserved_weak_notification(audited):
    c, soak = audited
    _, ledger = soak.decided[-1]
    for ts, _ in c.bigtable.versions(LEDGER, ledger, write_col(ack_col(TOUCH, "touched"))):
        c.bigtable.erase(LEDGER, ledger, write_col(ack_col(TOUCH, "touched")), ts)
    audit(soak)
    assert soak.report.unobserved_notifications >= 1


def test_soak_arguments_are_checked():
    with pytest.raises(ValueError, match="seconds"):
        run_soak(Cluster(), 0)
    with pytest.raises(ValueError, match="threads"):
        run_soak(Cluster(), 1, threads=0)


def test_the_audit_counts_a_timestamp_handed_out_twice(audited):
    c, soak = audited
    assert soak.oracle.handed_out and soak.oracle.reissued() == []
    soak.oracle.handed_out.append(soak.oracle.handed_out[3])      # as a rolled-back oracle would
    audit(soak)
    assert soak.report.reissued_timestamps == 1 and not soak.report.ok
    assert any("handed out twice" in p for p in soak.report.problems)


def test_every_timestamp_a_soak_uses_is_recorded():
    c = Cluster(lock_ttl=0.5)
    register_observers(c)
    soak = Soak(c, 0, 4, 0.0, None, 1.0)
    t = c.begin()
    t.set("a0", "balance", 1, table="bank")
    assert t.commit() is True
    assert {t.start_ts, t.commit_ts} <= set(soak.oracle.handed_out)
