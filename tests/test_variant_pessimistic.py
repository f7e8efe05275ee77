"""TiKV's pessimistic locks (percolator_ref.variants.pessimistic).

The anomaly-without-it here is the optimistic abort storm: notebook 01's six
concurrent transfers among three accounts, one commits and five abort. With
get_for_update the conflicts become waits; the aborts left are deadlocks, which
the wait-for graph DETECTS (it does not avoid them): without the detector two
crossing transfers wait for each other forever; with it one is aborted and the
other commits; locking in one global order avoids them (no abort at all).
"""
from __future__ import annotations

from functools import partial

import pytest

from percolator_ref import ClientCrash
from percolator_ref.variants.pessimistic import (ACQUIRE, PessimisticLocks,
                                                 PessimisticLocksWithoutDetector, WaitForGraph)
from percolator_ref.variants.rollback_records import RollbackRecords
from percolator_ref.workloads import hermitage, tikv

from helpers import all_locks, fresh_view


def test_without_pessimistic_locks_five_of_six_concurrent_transfers_abort():
    found = tikv.contention(list, seed=7)
    assert (found["committed"], found["aborted"]) == (1, 5)


@pytest.mark.parametrize("seed", range(4))
def test_with_them_conflicts_become_waits_and_only_deadlocks_abort(seed):
    paper = tikv.contention(list, seed=seed)
    found = tikv.contention(lambda: [PessimisticLocks()], seed, tikv.pessimistic_transfer)
    assert found["committed"] > paper["committed"]
    assert found["aborted"] == found["deadlocks"]         # no abort but a detected deadlock
    assert found["waits"] > 0
    cluster = found["stepper"].cluster
    assert cluster.check_history().ok and all_locks(cluster) == []
    total = sum(v for (row, col), v in fresh_view(cluster).items())
    assert total == 300                                  # money is conserved


def test_locking_in_one_global_order_avoids_every_deadlock():
    found = tikv.contention(lambda: [PessimisticLocks()], 7,
                            partial(tikv.pessimistic_transfer, ordered=True))
    assert (found["committed"], found["aborted"]) == (6, 0)
    assert found["stepper"].cluster.check_history().ok


def test_without_the_detector_crossing_transfers_wait_forever():
    s = tikv.drive_crossing(tikv.crossing_transfers_stepper(
        lambda: [PessimisticLocksWithoutDetector()]), max_moves=60)
    assert all(r.runnable for r in s.runners)           # both still waiting after 120 moves
    assert all(e.step == ACQUIRE for f in s.frames[-10:] for e in f.events)


def test_with_the_detector_one_crossing_transfer_is_aborted_and_the_other_commits():
    s = tikv.drive_crossing(tikv.crossing_transfers_stepper(lambda: [PessimisticLocks()]))
    assert sorted(map(str, (r.result for r in s.runners))) == ["True", "deadlock"]
    assert s.cluster.check_history().ok and all_locks(s.cluster) == []


def test_the_wait_for_graph_refuses_the_edge_that_closes_a_cycle():
    g = WaitForGraph()
    assert g.wait("T1", "T2") and g.wait("T2", "T3")
    assert not g.wait("T3", "T1")                        # T3 -> T1 -> T2 -> T3
    g.done("T1")
    assert g.wait("T3", "T1")


def test_a_reader_is_not_blocked_by_a_live_pessimistic_lock(make_cluster):
    cluster = make_cluster(variants=[PessimisticLocks()])
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    assert t.commit()
    holder = cluster.begin()
    assert holder.get_for_update("Bob", "bal") == 10
    assert cluster.begin().get("Bob", "bal") == 10        # no wait: the lock holds no data
    writer = cluster.begin()
    writer.set("Bob", "bal", 0)
    assert writer.commit() is False                       # a writer does conflict
    holder.set("Bob", "bal", 11)
    assert holder.commit()
    assert fresh_view(cluster) == {("Bob", "bal"): 11} and all_locks(cluster) == []


def test_get_for_update_after_a_plain_get_is_refused():
    cluster = tikv.make(lambda: [PessimisticLocks()])
    t = cluster.begin()
    t.get("Bob", "bal")
    with pytest.raises(ValueError, match="get_for_update must come before"):
        t.get_for_update("Joe", "bal")


@pytest.mark.parametrize("crash_after", range(1, 5))
def test_a_crash_after_every_step_of_a_pessimistic_transfer(make_cluster, crash_after):
    cluster = make_cluster(lock_ttl=1.0, variants=[PessimisticLocks(), RollbackRecords()])
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    t.set("Joe", "bal", 2)
    assert t.commit()
    t = cluster.begin()
    bob, joe = t.get_for_update("Bob", "bal"), t.get_for_update("Joe", "bal")
    t.set("Bob", "bal", bob - 7)
    t.set("Joe", "bal", joe + 7)
    with pytest.raises(ClientCrash):
        t.commit(crash_after=crash_after)
    cluster.clock.advance(2.0)
    expected = {("Bob", "bal"): 3, ("Joe", "bal"): 9} if crash_after >= 3 else \
        {("Bob", "bal"): 10, ("Joe", "bal"): 2}
    assert fresh_view(cluster) == expected
    after = cluster.begin()                     # a writer cleans the crashed client's locks up
    assert (after.get_for_update("Bob", "bal"), after.get_for_update("Joe", "bal")) == \
        (expected[("Bob", "bal")], expected[("Joe", "bal")])
    assert after.commit()
    assert fresh_view(cluster) == expected and all_locks(cluster) == []
    assert cluster.check_history().ok


@pytest.mark.parametrize("scenario", hermitage.SCENARIOS, ids=lambda s: s.__name__)
def test_hermitage_scenarios_pass_with_pessimistic_locks(make_cluster, scenario):
    cluster = make_cluster(variants=[PessimisticLocks()])
    result = scenario(cluster)
    assert result.observed == result.expected and result.ok and cluster.check_history().ok
