"""TiKV's async commit (percolator_ref.variants.async_commit).

What it changes: the client may answer once every prewrite succeeded (two row
transactions for a two-cell transfer instead of the paper's prewrite, prewrite,
timestamp, commit); the commit timestamp is the largest min_commit_ts. What
keeps it snapshot-isolated: readers raise the store's max_ts before reading.
The anomaly without that (a fractured read), and none with it; a dead client's
transaction resolved by checking every secondary, committed or rolled back.
"""
from __future__ import annotations

import threading

import pytest

from percolator_ref import ClientCrash, Cluster, ManualClock, StoreUnavailable
from percolator_ref.interceptors import attach
from percolator_ref.step import Step
from percolator_ref.stores import url_with
from percolator_ref.stores.redis_max_ts import RedisMaxTs
from percolator_ref.variants.async_commit import (CHECK_SECONDARY, AsyncCommit,
                                                  AsyncCommitWithoutMaxTs, max_ts_of)
from percolator_ref.variants.locks import TiKVLock
from percolator_ref.workloads import tikv

from helpers import all_locks, fresh_view


def memory(variants, lock_ttl=1.0):
    return Cluster(clock=ManualClock(), lock_ttl=lock_ttl, variants=variants)


def setup(cluster, value=0):
    t = cluster.begin()
    t.set("a", "v", value)
    t.set("b", "v", value)
    assert t.commit()


class ReaderStartsInsideTheCommit:
    """On W's session: just before W's first prewrite (W has taken its lower-bound
    timestamp), R begins and reads a."""

    def __init__(self, cluster):
        self.cluster, self.reader, self.seen_a = cluster, None, None

    def before(self, rt):
        if self.reader is None and rt.step is Step.PREWRITE_PRIMARY:
            self.reader = self.cluster.begin()
            self.seen_a = self.reader.get("a", "v")


def fractured_read(make_cluster, variant):
    """W commits a and b; R begins inside W's commit and reads a, then b after W's commit."""
    cluster = make_cluster(lock_ttl=1.0, variants=[variant])
    setup(cluster)
    w = cluster.begin()
    w.set("a", "v", 1)
    w.set("b", "v", 1)
    inside = ReaderStartsInsideTheCommit(cluster)
    with attach(w.session, inside):
        assert w.commit()
    r = inside.reader
    seen_b = r.get("b", "v")
    assert r.commit()
    return cluster, w, r, (inside.seen_a, seen_b)


def test_without_max_ts_a_reader_sees_half_of_an_async_commit(make_cluster):
    cluster, w, r, seen = fractured_read(make_cluster, AsyncCommitWithoutMaxTs())
    assert w.commit_ts <= r.start_ts            # committed "before" the reader's snapshot...
    assert seen == (0, 1)                        # ... but the reader read a before it wrote
    assert not cluster.check_history().ok


def test_with_max_ts_the_commit_lands_after_the_readers_snapshot(make_cluster):
    cluster, w, r, seen = fractured_read(make_cluster, AsyncCommit())
    assert w.commit_ts > r.start_ts and seen == (0, 0)
    assert max_ts_of(cluster).value >= r.start_ts
    assert cluster.check_history().ok


def test_the_primary_lists_the_secondaries_and_every_lock_has_a_min_commit_ts():
    cluster = memory([AsyncCommit()])
    setup(cluster)
    t = cluster.begin()
    for row in "abc":
        t.set(row, "v", 5)
    with pytest.raises(ClientCrash):
        t.commit(crash_after="prewrite")
    locks = {row: cluster.bigtable.versions("default", row, "v:lock")[0][1] for row in "abc"}
    assert all(isinstance(lock, TiKVLock) and lock.min_commit_ts > t.start_ts
               for lock in locks.values())
    assert [str(c) for c in locks["a"].secondaries] == ["b.v", "c.v"]
    assert locks["b"].secondaries == () == locks["c"].secondaries


def test_the_answer_comes_one_round_trip_earlier():
    cost = tikv.cost_table({"paper": list, "async commit": lambda: [AsyncCommit()]},
                           [("a", "v"), ("b", "v")])
    paper, fast = cost.to_dict("records")
    assert (paper["decided after (round trips)"], fast["decided after (round trips)"]) == (4, 3)
    assert (paper["timestamps"], fast["timestamps"]) == (1, 1)
    assert paper["row transactions"] == fast["row transactions"] == 4


def test_a_crash_after_every_prewrite_is_a_commit_resolved_through_the_secondaries():
    cluster = memory([AsyncCommit()])
    setup(cluster)
    t = cluster.begin()
    t.set("a", "v", 7)
    t.set("b", "v", 7)
    with pytest.raises(ClientCrash):
        t.commit(crash_after="prewrite")         # every prewrite succeeded: committed
    cluster.clock.advance(2.0)
    steps = []
    with attach(cluster.bigtable, type("S", (), {"after": lambda s, rt: steps.append(rt.step)})()):
        assert fresh_view(cluster) == {("a", "v"): 7, ("b", "v"): 7}
    assert CHECK_SECONDARY in steps
    assert t.outcome() is True and all_locks(cluster) == []
    assert cluster.check_history().ok


class ResolveBeforeTheSecondary:
    """On the writer's session: before its secondary's prewrite, it pauses past its TTL
    and a reader resolves its primary (the secondary is missing: rolled back)."""

    def __init__(self, cluster):
        self.cluster, self.read = cluster, None

    def before(self, rt):
        if rt.step is Step.PREWRITE_SECONDARY and self.read is None:
            self.cluster.clock.advance(5.0)
            self.read = self.cluster.begin().get("a", "v")


def test_a_missing_secondary_rolls_the_transaction_back_and_its_late_prewrite_is_refused():
    cluster = memory([AsyncCommit()])
    setup(cluster)
    t = cluster.begin()
    t.set("a", "v", 7)
    t.set("b", "v", 7)
    resolver = ResolveBeforeTheSecondary(cluster)
    with attach(t.session, resolver):
        assert t.commit() is False               # its prewrite of b met the rollback record
    assert resolver.read == 0
    assert fresh_view(cluster) == {("a", "v"): 0, ("b", "v"): 0} and all_locks(cluster) == []
    assert cluster.check_history().ok


class Before:
    """On one session: run ``action()`` once, just before its first ``step``."""

    def __init__(self, step, action):
        self.step, self.action, self.done = step, action, False

    def before(self, rt):
        if rt.step is self.step and not self.done:
            self.done = True
            self.action()


def two_commits_after_one_read(cluster):
    """W1 (a, b) and W2 (c, d) have both taken their lower-bound timestamp when R begins
    and reads e; then W2 and W1 prewrite: both find max_ts = R's start_ts."""
    t = cluster.begin()
    for row in "abcde":
        t.set(row, "v", 0)
    assert t.commit()
    w1, w2 = cluster.begin(), cluster.begin()
    w1.set("a", "v", 1)
    w1.set("b", "v", 1)
    w2.set("c", "v", 2)
    w2.set("d", "v", 2)
    readers = []

    def read_e():
        readers.append(cluster.begin())
        assert readers[0].get("e", "v") == 0

    with attach(w1.session, Before(Step.PREWRITE_PRIMARY, w2.commit)):
        with attach(w2.session, Before(Step.PREWRITE_PRIMARY, read_e)):
            assert w1.commit()
    return w1, w2, readers[0]


def test_two_async_commits_after_one_read_share_a_commit_ts_and_keep_snapshot_isolation():
    """The bank's "timestamp order" failure (issue 23), stepped: commit_ts = max_ts + 1
    is not unique, and that is allowed for writers of disjoint cells."""
    cluster = memory([AsyncCommit()])
    w1, w2, r = two_commits_after_one_read(cluster)
    assert w2.status == "committed"
    assert w1.commit_ts == w2.commit_ts == r.start_ts + 1     # the tie
    assert [r.get(row, "v") for row in "abcd"] == [0, 0, 0, 0]     # neither, in R's snapshot
    assert r.commit()
    later = cluster.begin()
    assert [later.get(row, "v") for row in "abcd"] == [1, 1, 2, 2]     # both, after
    assert later.commit()
    report = cluster.check_history()
    assert report.ok, report


class ScanListsRowsThenWaits:
    """On R's session: before the first row of its scan (its rows are listed), let W go
    on, and wait until W has committed."""

    def __init__(self, listed, committed):
        self.listed, self.committed = listed, committed

    def before(self, rt):
        if rt.step is Step.SCAN and not self.listed.is_set():
            self.listed.set()
            assert self.committed.wait(10)


def scan_around_an_insert(cluster):
    """W inserts row n; R begins after W took its lower-bound timestamp, lists the rows
    (a only), and reads them after W's commit. Two threads, in a fixed order (events)."""
    t = cluster.begin()
    t.set("a", "v", 0)
    assert t.commit()
    w = cluster.begin()
    w.set("n", "v", 1)
    listed, committed, seen = threading.Event(), threading.Event(), {}

    def reader():
        seen["r"] = r = cluster.begin()
        with attach(r.session, ScanListsRowsThenWaits(listed, committed)):
            seen["scan"] = r.scan()
        assert r.commit()

    thread = threading.Thread(target=reader)
    start_reader = Before(Step.PREWRITE_PRIMARY, lambda: thread.start() or listed.wait(10))
    with attach(w.session, start_reader):
        assert w.commit()
    committed.set()
    thread.join(10)
    assert not thread.is_alive() and listed.is_set()
    return w, seen["r"], seen["scan"]


def test_a_scan_raises_max_ts_before_it_lists_its_rows():
    """Without it, a row inserted between the listing and the first row read commits
    below the scan's start_ts, and the scan misses it (a phantom)."""
    w, r, scan = scan_around_an_insert(memory([AsyncCommit()]))
    assert w.commit_ts > r.start_ts                  # after R's snapshot ...
    assert scan == [("a", "v", 0)]                   # ... so R rightly does not see n


def test_without_max_ts_a_scan_misses_a_row_committed_before_its_start():
    w, r, scan = scan_around_an_insert(memory([AsyncCommitWithoutMaxTs()]))
    assert w.commit_ts < r.start_ts and scan == [("a", "v", 0)]     # n is missing


def test_on_redis_max_ts_lives_on_the_server(redis_url):
    """Two clusters on one Redis server (two processes' clients): a read by one raises the
    max_ts that the other's prewrite sees (stores/redis_max_ts.py)."""
    writers = Cluster(clock=ManualClock(), backend=redis_url, variants=[AsyncCommit()])
    readers = Cluster(clock=ManualClock(), backend=redis_url, variants=[AsyncCommit()])
    setup(writers)
    w = writers.begin()
    w.set("a", "v", 1)
    w.set("b", "v", 1)
    inside = ReaderStartsInsideTheCommit(readers)
    with attach(w.session, inside):
        assert w.commit()
    r = inside.reader
    assert max_ts_of(writers).value >= r.start_ts
    assert w.commit_ts > r.start_ts
    assert (inside.seen_a, r.get("b", "v")) == (0, 0)        # neither half of W
    assert r.commit() and writers.check_history().ok


def test_on_redis_max_ts_only_rises_and_stays_exact(redis_url):
    max_ts = max_ts_of(Cluster(clock=ManualClock(), backend=redis_url, variants=[AsyncCommit()]))
    assert isinstance(max_ts, RedisMaxTs) and max_ts.value == 0
    max_ts.update(10)
    max_ts.update(4)
    assert max_ts.value == 10
    max_ts.update(2 ** 62 + 1)                   # past 2**53: compared as text, never a double
    assert max_ts.value == 2 ** 62 + 1
    with pytest.raises(TypeError, match="ts"):
        max_ts.update("11")


def test_on_redis_a_read_waits_out_another_clients_row_lease(redis_url):
    """A prewrite reads max_ts while it holds the row's lease: with async commit, a read
    of that row waits until the lease is gone (a plain store's read does not)."""
    writers = Cluster(clock=ManualClock(), backend=redis_url, variants=[AsyncCommit()])
    setup(writers)
    impatient = url_with(redis_url, lease_ms=50)                 # waits at most 150 ms
    readers = Cluster(clock=ManualClock(), backend=impatient, variants=[AsyncCommit()])
    plain = Cluster(clock=ManualClock(), backend=impatient)
    with writers.bigtable.row_transaction("default", "a", step=Step.PREWRITE_PRIMARY) as rt:
        rt.read("v:lock")                                         # holds a's lease
        with plain.bigtable.row_transaction("default", "a", step=Step.GET) as read:
            assert read.read("v:write") is not None               # no wait on a plain store
        with pytest.raises(StoreUnavailable, match="lease"):
            readers.begin().get("a", "v")
    assert readers.begin().get("a", "v") == 0                    # the lease is gone


def test_on_redis_a_prewrite_reads_max_ts_while_it_holds_the_row_lease(redis_url, monkeypatch):
    """The other half of the ordering: the prewrite takes its row (the lease) before it
    reads max_ts, so no read of that row falls between the max_ts read and the lock."""
    cluster = Cluster(clock=ManualClock(), backend=redis_url, variants=[AsyncCommit()])
    setup(cluster)
    store, leased = cluster.bigtable, []
    read_value = RedisMaxTs.value.fget

    def value(max_ts):
        leased.append([row for row in "ab"
                       if store.redis.get(store.row_keys("default", row)[2]) is not None])
        return read_value(max_ts)

    monkeypatch.setattr(RedisMaxTs, "value", property(value))
    t = cluster.begin()
    t.set("a", "v", 1)
    t.set("b", "v", 1)
    assert t.commit()
    assert leased == [["a"], ["b"]]          # each prewrite's max_ts read, under its row's lease


def test_async_commit_refuses_to_compose_with_the_lock_ttl():
    from percolator_ref.variants.lock_ttl import LockTTL
    with pytest.raises(ValueError, match="does not compose with LockTTL"):
        Cluster(clock=ManualClock(), variants=[AsyncCommit(), LockTTL()])
