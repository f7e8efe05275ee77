"""The Redis backend: same behaviour as the in-memory Bigtable, shared services, atomicity.

The protocol suites (Hermitage, scenarios, bank, observers...) run on both
backends through ``make_cluster``; this file pins what is specific to Redis:
exact value round trips, identical trace streams, single-row atomicity under
concurrent *processes*, the oracle and tokens shared between processes, a
three-node Redis Cluster, bad input, and the round trips per row transaction.
"""
import math
import time

import pytest

from percolator_ref import (Bigtable, Cluster, Lock, ManualClock, StoreUnavailable, Write,
                            WriteKind)
from percolator_ref.harness.multiprocess import run_processes
from percolator_ref.stores.redis_codec import decode, encode
from percolator_ref.stores import url_with
from percolator_ref.stores.redis_store import RedisBigtable
from percolator_ref.model import Cell
from percolator_ref.workloads import bank

VALUES = ["", "héllo\x00", b"", b"\x00\xffraw", True, False, 0, -7, 2 ** 80, 1.5, -0.0,
          float("inf"), Lock(3, Cell("t", "r", "c"), False, "T3", WriteKind.DELETE),
          Write(4, WriteKind.DELETE), None, [1, "a"], {"k": 2}, (1, b"x")]

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_codec_round_trips_value_and_type_exactly(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


def test_codec_nan_and_unsupported():
    assert math.isnan(decode(encode(float("nan"))))
    with pytest.raises(TypeError, match="value"):
        encode(object())
    with pytest.raises(TypeError, match="value"):
        encode({"k": object()})


def _raw_ops(bt):
    bt.write("t", "r2", "a:data", "x", 5)
    bt.write("t", "r1", "a:data", b"y", 3)
    bt.write("t", "r1", "a:data", 7, 9)
    bt.write("t", "r1", "a:notify", True, 9)
    bt.write("u", "r", "b:write", Write(2), 4)
    bt.erase("t", "r2", "a:data", 5)
    bt.erase("t", "r2", "a:data", 5)            # absent: no change
    with bt.row_transaction("t", "r3", client="C", step="custom") as rt:
        assert rt.read("z:data") is None
        rt.write("z:data", 1, 1.25)
        rt.write("z:lock", 1, Lock(1, Cell("t", "r3", "z"), True, "C"))
        rt.explain("why")
    return [bt.read("t", "r1", "a:data"), bt.read("t", "r1", "a:data", 4),
            bt.read("t", "r1", "a:data", 2), bt.versions("t", "r1", "a:data"),
            bt.tables(), bt.rows("t"), bt.rows("t", "r1", "r3"), bt.rows("t", "r2"),
            bt.columns("t", "r1"), list(bt.notifications()),
            list(bt.notifications(("t", "r2", ""))), bt.dump()]


def test_raw_operations_match_the_in_memory_bigtable(redis_url):
    memory = Bigtable()
    redis_bt = RedisBigtable(redis_url)
    with memory.tracer.record() as mem_events, redis_bt.tracer.record() as red_events:
        expected = _raw_ops(memory)
        got = _raw_ops(redis_bt)
    assert got == expected
    assert [(type(v), v) for v in redis_bt.dump()["t"]["r1"]["a:data"]] == \
           [(type(v), v) for v in expected[-1]["t"]["r1"]["a:data"]]
    assert red_events == mem_events
    assert redis_bt.tracer.counts.snapshot() == memory.tracer.counts.snapshot()


def _protocol_story(cluster):
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    t.set("Joe", "bal", 2)
    t.notify("Joe", "bal")
    assert t.commit()
    t = cluster.begin()
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    t.delete("Ann", "bal")
    with pytest.raises(Exception):
        t.commit(crash_after="commit-primary")
    reader = cluster.begin()
    seen = reader.scan()
    loser = cluster.begin()
    loser.set("Bob", "bal", 0)
    writer = cluster.begin()
    writer.set("Bob", "bal", 1)
    assert writer.commit() and not loser.commit()
    return seen


def test_protocol_trace_is_identical_on_both_backends(redis_url):
    memory = Cluster(first_timestamp=5, clock=ManualClock())
    redis_cluster = Cluster(first_timestamp=5, clock=ManualClock(), backend=redis_url)
    with memory.tracer.record() as mem_events, redis_cluster.tracer.record() as red_events:
        assert _protocol_story(memory) == _protocol_story(redis_cluster)
    assert red_events == mem_events              # every step, read, change and note
    assert redis_cluster.bigtable.dump() == memory.bigtable.dump()
    assert list(redis_cluster.bigtable.notifications()) == list(memory.bigtable.notifications())
    assert redis_cluster.check_history().ok


def _increment(cluster, index, times):
    """``times`` read-modify-write row transactions on one shared counter row."""
    bt = cluster.bigtable
    for _ in range(times):
        with bt.row_transaction("c", "counter", client=f"P{index}", step="increment") as rt:
            found = rt.read("n:data")
            rt.write("n:data", 1, (found[1] if found else 0) + 1)
    return index


def test_row_transactions_are_atomic_across_processes(redis_url):
    run = run_processes(redis_url, _increment, 4, (40,), cluster_options={"record_history": False})
    assert run.ok, [w.error for w in run.workers]
    assert RedisBigtable(redis_url).read("c", "counter", "n:data") == 160


def _timestamps(cluster, index, n):
    return [cluster.oracle.get_timestamp() for _ in range(n)] + list(cluster.oracle.get_timestamps(5))


def test_oracle_is_shared_between_processes(redis_url):
    first = Cluster(first_timestamp=1000, backend=redis_url, clock=ManualClock())
    assert first.begin().start_ts == 1000
    run = run_processes(redis_url, _timestamps, 3, (30,))
    stamps = [w.result for w in run.workers]
    assert all(s == sorted(s) and len(set(s)) == len(s) for s in stamps)
    everything = [ts for s in stamps for ts in s]
    assert len(set(everything)) == len(everything) == 105
    assert min(everything) == 1001 and max(everything) == 1105   # ranges allocated atomically


def test_liveness_tokens_are_shared(redis_url):
    clock_a, clock_b = ManualClock(), ManualClock()
    a = Cluster(backend=redis_url, clock=clock_a, lock_ttl=5.0)
    b = Cluster(backend=redis_url, clock=clock_b, lock_ttl=5.0)
    t = a.begin()
    assert b.lockservice.status(t.client) == "gone"       # no token before it writes
    t.session.keep_alive()                                # what its first writing step does
    assert b.lockservice.status(t.client) == "alive"
    clock_b.advance(6.0)
    assert b.lockservice.status(t.client) == "expired"    # judged on b's clock
    t.set("r", "c", 1)
    with pytest.raises(Exception):
        t.commit(crash_after="prewrite")
    assert b.lockservice.status(t.client) == "crashed"
    reader = b.begin()
    assert reader.get("r", "c") is None                   # b cleans up a's dead lock
    assert b.bigtable.versions("default", "r", "c:lock") == []
    a.lockservice.register("W1")
    b2 = Cluster(backend=redis_url, clock=clock_a, lock_ttl=5.0)     # same clock as a
    assert a.lockservice.try_acquire("region", "W1") and not b2.lockservice.try_acquire("region", "W2")
    assert b2.lockservice.holder("region") == "W1"
    a.lockservice.crash("W1")                             # a dead holder loses the region
    assert b2.lockservice.try_acquire("region", "W2") and b2.lockservice.holder("region") == "W2"


def test_bank_on_a_three_node_redis_cluster(redis_cluster_url, redis_cluster_server):
    cluster = Cluster(backend=redis_cluster_url, clock=ManualClock())
    result = bank.run_bank(cluster, threads=2, transfers=40, crash_rate=0.2, seed=3)
    assert result.ok, result
    assert set(result.totals_seen) == {800}
    assert cluster.bigtable.rows("bank") == [bank.account_name(i) for i in range(8)]
    import redis
    sizes = [redis.Redis(port=s.port).dbsize() for s in redis_cluster_server.servers]
    assert sum(1 for n in sizes if n > 0) >= 2, sizes    # rows spread over the nodes


def test_protocol_trace_on_redis_cluster_matches_memory(redis_cluster_url):
    memory = Cluster(first_timestamp=5, clock=ManualClock())
    rc = Cluster(first_timestamp=5, clock=ManualClock(), backend=redis_cluster_url)
    with memory.tracer.record() as mem_events, rc.tracer.record() as red_events:
        assert _protocol_story(memory) == _protocol_story(rc)
    assert red_events == mem_events
    assert rc.bigtable.dump() == memory.bigtable.dump()
    assert list(rc.bigtable.notifications()) == list(memory.bigtable.notifications())


def test_bad_backend_input(redis_url):
    with pytest.raises(TypeError, match="backend"):
        Cluster(backend=42)
    with pytest.raises(ValueError, match="backend"):
        Cluster(backend="mysql://x")
    with pytest.raises(ValueError, match="prefix"):
        Cluster(backend=redis_url + "&prefix={bad}")
    with pytest.raises(ValueError, match="lease_ms"):
        Cluster(backend=redis_url + "&lease_ms=soon")
    bt = RedisBigtable(redis_url)
    with pytest.raises(ValueError, match="row"):
        bt.write("t", "a\x00b", "c:data", 1, 1)
    with pytest.raises(TypeError, match="value"):
        bt.write("t", "r", "c:data", object(), 1)
    with pytest.raises(TypeError, match="ts"):
        bt.write("t", "r", "c:data", 1, "1")
    assert bt.dump() == {}


def test_unreachable_server_is_a_clear_error():
    from percolator_ref.harness.redis_server import free_port
    with pytest.raises(StoreUnavailable, match="unavailable"):
        Cluster(backend=f"redis://127.0.0.1:{free_port()}/0?timeout=0.5")


def test_an_expired_row_lease_applies_nothing(redis_url):
    bt = RedisBigtable(redis_url + "&lease_ms=50")
    with pytest.raises(StoreUnavailable, match="lease expired"):
        with bt.row_transaction("t", "r", step="slow") as rt:
            rt.read("a:data")
            time.sleep(0.2)                       # longer than the lease
            rt.write("a:data", 1, "x")
            rt.write("b:data", 1, "y")
    assert bt.dump() == {}


def test_round_trips_per_row_transaction(redis_url):
    bt = RedisBigtable(redis_url)

    def trips(fn):
        before = bt.round_trips
        fn()
        return bt.round_trips - before

    assert trips(lambda: bt.write("t", "r", "a:data", 1, 1)) == 1     # blind write
    assert trips(lambda: bt.read("t", "r", "a:data")) == 1            # read-only snapshot

    def read_modify_write():
        with bt.row_transaction("t", "r", step="prewrite-primary") as rt:
            if rt.read("a:lock") is None:
                rt.write("a:lock", 2, "L")
    assert trips(read_modify_write) == 2                               # lease+read, apply


def test_in_memory_erase_of_an_absent_version_leaves_no_phantom_row():
    """Pins a core fix: erasing nothing must not create an empty column or row."""
    bt = Bigtable()
    bt.erase("t", "r", "a:lock", 3)
    assert bt.rows("t") == [] and bt.columns("t", "r") == [] and bt.tables() == []


@pytest.mark.parametrize("conditional, commit_trips, conflict_trips", [(0, 7, 6), (1, 4, 3)])
def test_round_trips_of_commits_in_both_modes(redis_url, conditional, commit_trips,
                                              conflict_trips):
    """A two-cell commit: prewrite x2, commit-primary (2 trips each, or 1 in one script),
    commit-secondary 1. A conflict pair: one single-cell commit, one refused prewrite."""
    cluster = Cluster(first_timestamp=5, clock=ManualClock(),
                      backend=url_with(redis_url, conditional=conditional))
    bt = cluster.bigtable
    before = bt.round_trips
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    t.set("Joe", "bal", 2)
    assert t.commit() is True
    assert bt.round_trips - before == commit_trips
    before = bt.round_trips
    t = cluster.begin()
    assert t.get("Bob", "bal") == 10
    assert t.commit() is True
    assert bt.round_trips - before == 1
    before = bt.round_trips
    a, b = cluster.begin(), cluster.begin()
    a.set("Bob", "bal", 1)
    b.set("Bob", "bal", 2)
    assert a.commit() is True and b.commit() is False
    assert bt.round_trips - before == conflict_trips


def test_a_notify_entry_left_listing_an_empty_column_is_unlisted_on_a_redis_cluster(
        redis_cluster_url, monkeypatch):
    """On a Redis Cluster the notify index lives on another node than the row: its entry is
    added before the row is written, so a row write that is then refused, or an unlisting
    that fails, leaves it listing an empty column. The observers' clearing step unlists it;
    before, ``run_observers`` met it again in every sweep, for ever (a nemesis soak hung
    in its settling phase this way)."""
    import threading
    from percolator_ref.observers.notifications import clear_notification
    cluster = Cluster(backend=redis_cluster_url, clock=ManualClock())
    seen = []

    @cluster.observe("ledger", "touch", name="touched")
    def touched(txn, row, column):
        seen.append(row)

    t = cluster.begin()
    t.notify("L1", "touch", table="ledger")
    assert t.commit()
    bt = cluster.bigtable
    index = bt.index_keys("ledger")[2]
    bt.redis.zadd(index, {"ledger\x00L2\x00touch": 0})             # no notify version behind it
    assert list(bt.notifications()) == [("ledger", "L1", "touch"), ("ledger", "L2", "touch")]
    runs = []
    sweep = threading.Thread(target=lambda: runs.append(cluster.run_observers()), daemon=True)
    sweep.start()
    sweep.join(30)
    assert not sweep.is_alive(), "run_observers is still sweeping a stale entry"
    assert runs == [1] and seen == ["L1"]
    assert list(bt.notifications()) == []
    # the lease lost between the read and the ZREM: the entry goes back (never miss one)
    bt.redis.zadd(index, {"ledger\x00L3\x00touch": 0})
    zrem = bt.redis.zrem

    def zrem_then_lose_the_lease(key, *members):
        out = zrem(key, *members)
        bt.redis.set(bt.row_keys("ledger", "L3")[2], "another client's token")
        return out

    monkeypatch.setattr(bt.redis, "zrem", zrem_then_lose_the_lease)
    assert clear_notification(cluster, "ledger", "L3", "touch") is True
    assert list(bt.notifications()) == [("ledger", "L3", "touch")]
