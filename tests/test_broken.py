"""§2.3 shown live: a client that takes its commit timestamp before its locks
(workloads/broken.py) lets a later reader miss a committed write; the real
Transaction, under the same schedule, makes the reader wait and see the write."""
import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.transaction import Transaction
from percolator_ref.workloads.broken import EarlyCommitTimestamp, read_during_commit


def transfer_writer(cls):
    """Bob $10, Joe $2 committed at 2; a writer (start 3) moving $7, of class ``cls``."""
    cluster = Cluster(first_timestamp=1, clock=ManualClock())
    setup = cluster.begin()
    setup.set("Bob", "bal", 10)
    setup.set("Joe", "bal", 2)
    assert setup.commit()
    writer = cls(cluster)
    writer.set("Bob", "bal", 3)
    writer.set("Joe", "bal", 9)
    return cluster, writer


def steps(events, client):
    return [e.step for e in events if e.client == client]


def test_early_commit_timestamp_lets_a_later_reader_miss_a_committed_write():
    cluster, writer = transfer_writer(EarlyCommitTimestamp)
    with cluster.tracer.record() as events:
        race = read_during_commit(cluster, writer, "Bob", "bal")
    assert (writer.start_ts, writer.commit_ts, race.reader.start_ts) == (3, 4, 5)
    assert race.parked_before == "prewrite-primary"       # no lock written yet
    assert race.committed and race.value == 10 and not race.waited
    assert steps(events, "T5") == ["get"]
    report = cluster.check_history()
    assert report.names() == ["stale read"]
    assert "T5 (start 5) read Bob.bal @ 2, but the newest before its start is @ 4" in repr(report)


def test_the_correct_order_makes_the_same_reader_wait_and_see_the_write():
    cluster, writer = transfer_writer(Transaction)
    with cluster.tracer.record() as events:
        race = read_during_commit(cluster, writer, "Bob", "bal")
    assert (writer.start_ts, writer.commit_ts, race.reader.start_ts) == (3, 4, 5)
    assert race.parked_before == "commit-primary"         # every lock already written
    assert race.committed and race.value == 3 and race.waited and race.attempts == 2
    assert [(e.client, e.step) for e in events] == [
        ("T3", "prewrite-primary"), ("T3", "prewrite-secondary"), ("T5", "get"),
        ("T3", "commit-primary"), ("T3", "commit-secondary"), ("T5", "get")]
    assert cluster.check_history().ok


@pytest.mark.parametrize("cls", [EarlyCommitTimestamp, Transaction])
def test_the_schedule_is_deterministic(cls):
    traces = set()
    for _ in range(20):
        cluster, writer = transfer_writer(cls)
        with cluster.tracer.record() as events:
            read_during_commit(cluster, writer, "Bob", "bal")
        traces.add(tuple((e.client, e.step, e.note) for e in events))
    assert len(traces) == 1


def test_early_commit_timestamp_still_aborts_on_a_conflict_and_leaves_no_lock():
    cluster, writer = transfer_writer(EarlyCommitTimestamp)
    rival = cluster.begin()
    rival.set("Bob", "bal", 0)
    assert rival.commit()                                 # commits after the writer's start
    assert writer.commit() is False and writer.commit_ts is None
    assert cluster.bigtable.versions("default", "Bob", "bal:lock") == []
    assert cluster.bigtable.versions("default", "Joe", "bal:lock") == []


def test_bad_input_is_named():
    cluster, writer = transfer_writer(Transaction)
    with pytest.raises(ValueError, match="row"):
        read_during_commit(cluster, writer, "", "bal")
    empty = cluster.begin()
    with pytest.raises(ValueError, match="writer"):
        read_during_commit(cluster, empty, "Bob", "bal")
    assert writer.commit()
    with pytest.raises(ValueError, match="writer"):
        read_during_commit(cluster, writer, "Bob", "bal")
