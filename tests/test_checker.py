"""The snapshot-isolation checker: hand-made bad histories are caught by name, good ones pass."""
import math

import pytest

from percolator_ref import ClientCrash, Cluster, ManualClock
from percolator_ref.checking.checker import TxnRecord, check_history, same_value
from percolator_ref.model import Cell

X = Cell("default", "x", "c")
Y = Cell("default", "y", "c")


def txn(client, start, commit=None, status="committed", reads=(), writes=()):
    return TxnRecord(client, start, commit, status, list(reads), list(writes))


def setup_x(value=10):
    """T1 [1, 2] writes x = value."""
    return txn("T1", 1, 2, writes=[(X, "PUT", value)])


def names(records):
    return check_history(records).names()


# -- histories that must fail ----------------------------------------------------

def test_g1a_read_of_an_aborted_write():
    aborted = txn("T3", 3, 4, status="aborted", writes=[(X, "PUT", 99)])
    reader = txn("T5", 5, reads=[(X, 4, 99)])
    assert names([setup_x(), aborted, reader]) == ["G1a aborted read"]


def test_g1a_read_of_a_version_nobody_committed():
    reader = txn("T5", 5, reads=[(X, 4, 99)])
    report = check_history([setup_x(), reader])
    assert report.names() == ["G1a aborted read"] and not report.ok
    assert "G1a" in repr(report)


def test_g1b_intermediate_read():
    writer = txn("T3", 3, 4, writes=[(X, "PUT", 11)])
    reader = txn("T5", 5, reads=[(X, 4, 101)])                 # the right version, wrong value
    assert names([setup_x(), writer, reader]) == ["G1b intermediate read"]


def test_future_read():
    reader = txn("T3", 3, reads=[(X, 5, 11)])
    writer = txn("T4", 4, 5, writes=[(X, "PUT", 11)])
    assert names([setup_x(), reader, writer]) == ["future read"]


def test_stale_read_g_single_read_skew():
    # T3 moves 2 from y to x; T5 sees the new x but the old y: read skew
    setup = txn("T1", 1, 2, writes=[(X, "PUT", 10), (Y, "PUT", 20)])
    mover = txn("T3", 3, 4, writes=[(X, "PUT", 12), (Y, "PUT", 18)])
    reader = txn("T5", 5, reads=[(X, 4, 12), (Y, 2, 20)])
    assert names([setup, mover, reader]) == ["stale read"]


def test_stale_read_of_absent():
    reader = txn("T3", 3, reads=[(X, None, None)])
    assert names([setup_x(), reader]) == ["stale read"]


def test_lost_update_p4():
    t3 = txn("T3", 3, 5, reads=[(X, 2, 10)], writes=[(X, "PUT", 11)])
    t4 = txn("T4", 4, 6, reads=[(X, 2, 10)], writes=[(X, "PUT", 11)])
    assert names([setup_x(), t3, t4]) == ["lost update (P4)"]


def test_g0_concurrent_blind_writers():
    t3 = txn("T3", 3, 5, writes=[(X, "PUT", 1), (Y, "PUT", 1)])
    t4 = txn("T4", 4, 6, writes=[(X, "PUT", 2), (Y, "PUT", 2)])
    report = check_history([setup_x(), t3, t4])
    assert report.names() == ["G0 concurrent writers"]
    assert len(report.anomalies) == 2                           # one per shared cell


def test_timestamp_order():
    assert names([txn("T3", 3, 3, writes=[(X, "PUT", 1)])]) == ["timestamp order"]
    assert names([txn("T3", 3, 5), txn("T5", 5, 6)]) == ["timestamp order"]


def test_a_start_ts_given_twice_or_equal_to_a_commit_ts_is_a_timestamp_clash():
    assert names([txn("T3", 3, 5), txn("U3", 3, 6)]) == ["timestamp order"]       # two starts
    assert names([txn("T3", 3, 5), txn("U3", 3, status="aborted")]) == ["timestamp order"]
    assert names([txn("T3", 3, 6), txn("T4", 4), txn("T6", 6)]) == ["timestamp order"]


def test_a_commit_ts_shared_by_two_writers_of_one_cell_is_a_timestamp_clash():
    t3 = txn("T3", 3, 5, writes=[(X, "PUT", 1)])
    t4 = txn("T4", 4, 5, writes=[(X, "PUT", 2), (Y, "PUT", 2)])
    report = check_history([t3, t4])
    assert "timestamp order" in report.names()
    assert "commit_ts 5 given to both T3 and T4, which both write x.c" in repr(report)


def test_several_anomalies_are_all_named():
    t3 = txn("T3", 3, 5, reads=[(X, 2, 10)], writes=[(X, "PUT", 11)])
    t4 = txn("T4", 4, 6, reads=[(X, 2, 10), (Y, 9, 0)], writes=[(X, "PUT", 11)])
    assert names([setup_x(), t3, t4]) == ["G1a aborted read", "lost update (P4)"]


# -- histories that must pass ----------------------------------------------------

def test_two_writers_of_disjoint_cells_may_share_a_commit_ts():
    """Async commit's computed commit_ts (max_ts + 1) is not unique (TiKV's
    globally-non-unique-timestamps.md): a tie of disjoint writers is no anomaly,
    every snapshot holds both or neither."""
    t3 = txn("T3", 3, 7, writes=[(X, "PUT", 1)])
    t4 = txn("T4", 4, 7, writes=[(Y, "PUT", 2)])
    before = txn("T6", 6, reads=[(X, None, None), (Y, None, None)])
    after = txn("T8", 8, reads=[(X, 7, 1), (Y, 7, 2)])
    report = check_history([t3, t4, before, after])
    assert report.ok, report
    half = txn("T9", 9, reads=[(X, 7, 1), (Y, None, None)])       # one without the other
    assert check_history([t3, t4, half]).names() == ["stale read"]


def test_serial_history_passes():
    t3 = txn("T3", 3, 4, reads=[(X, 2, 10)], writes=[(X, "PUT", 11)])
    t5 = txn("T5", 5, 6, reads=[(X, 4, 11), (Y, None, None)], writes=[(X, "DELETE", None)])
    t7 = txn("T7", 7, reads=[(X, 6, None)])                      # reads the delete
    t8 = txn("T8", 8, status="aborted", reads=[(X, 6, None)], writes=[(X, "PUT", 0)])
    report = check_history([setup_x(), t3, t5, t7, t8])
    assert report.ok, report
    assert (report.transactions, report.committed, report.reads) == (5, 4, 5)
    assert "OK" in repr(report)


def test_snapshot_reads_of_older_versions_pass():
    writer = txn("T4", 4, 5, writes=[(X, "PUT", 11)])
    reader = txn("T3", 3, reads=[(X, 2, 10)])                   # started before T4 committed
    assert check_history([setup_x(), reader, writer]).ok


def test_write_skew_g2_item_is_allowed():
    setup = txn("T1", 1, 2, writes=[(X, "PUT", 10), (Y, "PUT", 20)])
    t3 = txn("T3", 3, 5, reads=[(X, 2, 10), (Y, 2, 20)], writes=[(X, "PUT", 0)])
    t4 = txn("T4", 4, 6, reads=[(X, 2, 10), (Y, 2, 20)], writes=[(Y, "PUT", 0)])
    assert check_history([setup, t3, t4]).ok


def test_first_committer_wins_history_passes():
    t3 = txn("T3", 3, 5, reads=[(X, 2, 10)], writes=[(X, "PUT", 11)])
    t4 = txn("T4", 4, None, status="aborted", reads=[(X, 2, 10)], writes=[(X, "PUT", 11)])
    assert check_history([setup_x(), t3, t4]).ok


# -- the cluster's recorded history ----------------------------------------------

def test_cluster_history_resolves_crashed_transactions(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    t.set("x", "c", 1)
    t.set("y", "c", 1)
    with pytest.raises(ClientCrash):
        t.commit(crash_after="commit-primary")            # committed, secondary locked
    u = cluster.begin()
    u.set("x", "c", 2)
    with pytest.raises(ClientCrash):
        u.commit(crash_after="prewrite")                  # aborted
    r = cluster.begin()
    assert (r.get("x", "c"), r.get("y", "c")) == (1, 1)
    assert r.commit()
    report = cluster.check_history()
    assert report.ok, report
    status = {rec.client: (rec.status, rec.commit_ts) for rec in cluster.history.records}
    assert status[t.client] == ("committed", t.commit_ts)
    assert status[u.client] == ("aborted", None)


def test_tampered_cluster_history_is_caught(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    for value in (1, 2):
        t = cluster.begin()
        t.set("x", "c", value)
        assert t.commit()
    r = cluster.begin()
    assert r.get("x", "c") == 2
    assert cluster.check_history().ok
    cell, version, value = r.record.reads[0]
    r.record.reads[0] = (cell, 2, 1)                      # pretend it read the first version
    assert cluster.check_history().names() == ["stale read"]


def test_history_off(make_cluster):
    cluster = make_cluster(record_history=False)
    cluster.begin().commit()
    with pytest.raises(ValueError, match="record_history"):
        cluster.check_history()


# ---------------------------------------------------------------------------
# Exact values (was test_checker_nan.py).
#
# The checker compares values exactly: a NaN read back is the NaN committed (nan != nan in
# Python), and 1, 1.0 and True are different values (stores keep a value's type).
# ---------------------------------------------------------------------------


def history(committed, read):
    writer = TxnRecord("T1", 1, 2, "committed", [], [(X, "PUT", committed)])
    reader = TxnRecord("T3", 3, 4, "committed", [(X, 2, read)], [])
    return [writer, reader]


@pytest.mark.parametrize("value", [math.nan, -math.nan, float("nan")])
def test_nan_read_back_is_not_g1b(value):
    report = check_history(history(value, float("nan")))
    assert report.ok, report


@pytest.mark.parametrize("committed, read", [
    (1, True), (True, 1), (1, 1.0), (1.0, True), (0, False), (0.0, -0.0),
], ids=repr)
def test_a_value_of_another_type_or_sign_is_g1b(committed, read):
    assert check_history(history(committed, read)).names() == ["G1b intermediate read"]


def test_same_value_is_exact_yet_nan_equals_nan():
    class Meters(float):                  # a subclass is stored as its base type
        pass

    assert same_value(math.nan, math.nan) and same_value(Meters(math.nan), math.nan)
    assert same_value(Meters(1.5), 1.5) and same_value(7, 7) and same_value("s", "s")
    assert not same_value(math.nan, 0.0) and not same_value(1.0, math.nan)
    assert not same_value(b"a", "a") and not same_value(math.inf, -math.inf)
    assert not same_value(1, True) and not same_value(1, 1.0)


@pytest.fixture(params=["memory", "redis"])
def backend(request):
    if request.param == "memory":
        return None
    return request.getfixturevalue("redis_url")


def test_committed_nan_read_back_through_a_cluster(backend):
    cluster = Cluster(backend=backend, clock=ManualClock())
    t = cluster.begin()
    t.set("x", "c", math.nan)
    t.set("y", "c", 1)
    assert t.commit()
    reader = cluster.begin()
    assert math.isnan(reader.get("x", "c")) and reader.get("y", "c") == 1
    assert reader.commit()
    report = cluster.check_history()
    assert report.ok and report.reads == 2, report
