"""The lock service: liveness tokens with a TTL on the cluster clock, and named locks."""
import math

import pytest

from percolator_ref import ClientCrash, Cluster, LockService, ManualClock
from percolator_ref.interceptors import Gate, attach
from percolator_ref.services.lockservice import MAX_TTL


def service(ttl=1.0):
    clock = ManualClock()
    return clock, LockService(clock, ttl)


def test_registered_client_is_alive_until_the_ttl_passes():
    clock, ls = service(ttl=1.0)
    ls.register("w")
    assert ls.is_alive("w") and ls.status("w") == "alive"
    clock.advance(1.0)
    assert ls.is_alive("w")                      # exactly the TTL old: still alive
    clock.advance(0.001)
    assert not ls.is_alive("w") and ls.status("w") == "expired"


def test_heartbeat_keeps_a_client_alive():
    clock, ls = service(ttl=1.0)
    ls.register("w")
    for _ in range(5):
        clock.advance(0.9)
        ls.heartbeat("w")
    assert ls.is_alive("w")
    assert ls.tokens() == {"w": (0.0, "alive")}


def test_crashed_client_is_dead_at_once_and_heartbeats_do_not_revive_it():
    clock, ls = service()
    ls.register("w")
    ls.crash("w")
    ls.heartbeat("w")
    assert not ls.is_alive("w") and ls.status("w") == "crashed"
    ls.register("w")                             # a new incarnation may register again
    assert ls.is_alive("w")


def test_released_or_unknown_clients_are_dead():
    clock, ls = service()
    ls.register("w")
    ls.release("w")
    assert not ls.is_alive("w") and ls.status("w") == "gone"
    assert not ls.is_alive("never-seen") and not ls.is_alive(None)
    ls.heartbeat("never-seen")                   # ignored
    assert ls.status("never-seen") == "gone"


def test_named_locks_exclusive_reentrant_and_taken_over_from_the_dead():
    clock, ls = service(ttl=1.0)
    ls.register("a")
    ls.register("b")
    assert ls.try_acquire("region-1", "a")
    assert ls.try_acquire("region-1", "a")       # re-entrant for its owner
    assert not ls.try_acquire("region-1", "b")
    assert ls.holder("region-1") == "a"
    ls.release_lock("region-1", "b")             # not the owner: no effect
    assert ls.holder("region-1") == "a"
    clock.advance(2.0)
    ls.heartbeat("b")
    assert ls.try_acquire("region-1", "b")       # a went quiet: b takes over
    ls.release_lock("region-1", "b")
    assert ls.holder("region-1") is None


@pytest.mark.parametrize("ttl, error", [(0, ValueError), (-1.0, ValueError), ("1", TypeError),
                                        (None, TypeError), (True, TypeError)])
def test_bad_ttl(ttl, error):
    with pytest.raises(error, match="lock_ttl"):
        LockService(ManualClock(), ttl)


def test_transactions_own_their_tokens(make_cluster):
    cluster = make_cluster(lock_ttl=5.0)
    t = cluster.begin()
    assert t.get("x", "c") is None
    assert cluster.lockservice.status(t.client) == "gone"     # no token before it writes
    seen = []
    with attach(cluster.bigtable, Gate(
            lambda client, table, row, step: seen.append(cluster.lockservice.status(client)))):
        t.set("x", "c", 1)
        assert t.commit()
    assert seen == ["alive", "alive"]                           # held from its first prewrite
    assert cluster.lockservice.status(t.client) == "gone"     # released at the end
    t = cluster.begin()
    t.set("x", "c", 2)
    with pytest.raises(ClientCrash):
        t.commit(crash_after=1)
    assert cluster.lockservice.status(t.client) == "crashed"


def test_a_read_only_transaction_makes_no_token_calls(make_cluster):
    cluster = make_cluster(lock_ttl=5.0)
    calls = []
    for name in ("register", "heartbeat", "release", "crash"):
        original = getattr(cluster.lockservice, name)
        setattr(cluster.lockservice, name,
                lambda *a, _n=name, _f=original: (calls.append(_n), _f(*a))[1])
    t = cluster.begin()
    t.get("x", "c")
    t.scan()
    assert t.commit() and calls == []
    t = cluster.begin()
    t.set("x", "c", 1)
    assert t.commit() and calls == ["register", "heartbeat", "release"]


def test_each_writing_row_transaction_of_a_transaction_heartbeats(make_cluster):
    cluster = make_cluster(lock_ttl=5.0)
    t = cluster.begin()
    t.set("x", "c", 1)
    t.set("y", "c", 1)
    ages = []

    def slow_network(client, table, row, step):
        if client == t.client:
            cluster.clock.advance(4.0)      # 4 s pass before each of its row transactions
            ages.append(cluster.lockservice.is_alive(client))
    attach(cluster.bigtable, Gate(slow_network))
    assert t.commit()                       # 4 steps, 16 s: each refreshed the token
    assert ages == [True, True, True, True]   # registered at the first prewrite, then heartbeats


def test_workers_share_a_token(make_cluster):
    cluster = make_cluster()
    cluster.lockservice.register("worker-1")
    t1, t2 = cluster.begin(client="worker-1"), cluster.begin(client="worker-1")
    assert t1.client == t2.client == "worker-1"
    t1.set("x", "c", 1)
    assert t1.commit()
    assert cluster.lockservice.status("worker-1") == "alive"  # not released by a transaction


# ---------------------------------------------------------------------------
# The TTL is finite, > 0 and at most MAX_TTL (was test_lockservice_ttl.py).
#
# ``lock_ttl`` must be a finite number of seconds, > 0 and at most MAX_TTL, on every store.
#
# A NaN TTL used to be accepted: every ``age <= ttl`` is then false, so every
# client counted as dead at once and any reader rolled back live transactions.
# An infinite or huge TTL failed later, at a commit on Redis (a key expiry out
# of range). Zero, negatives and non-numbers were already refused
# (tests/test_lockservice.py::test_bad_ttl).
# ---------------------------------------------------------------------------

NEWLY_REFUSED = [math.nan, -math.nan, math.inf, MAX_TTL * 2, 1e15, 1e300, 10 ** 400]
NEWLY_REFUSED_IDS = ["nan", "-nan", "inf", "2*MAX_TTL", "1e15", "1e300", "10**400"]


@pytest.mark.parametrize("ttl", NEWLY_REFUSED, ids=NEWLY_REFUSED_IDS)
def test_lockservice_refuses_a_ttl_that_is_not_finite_or_too_large(ttl):
    with pytest.raises(ValueError, match="lock_ttl") as caught:
        LockService(ManualClock(), ttl)
    assert "finite" in str(caught.value) or "bits" in str(caught.value)


@pytest.mark.parametrize("ttl", [math.nan, math.inf, MAX_TTL * 2], ids=repr)
def test_cluster_refuses_a_bad_lock_ttl(ttl):
    with pytest.raises(ValueError, match="lock_ttl"):
        Cluster(clock=ManualClock(), lock_ttl=ttl)


@pytest.mark.parametrize("ttl", [math.nan, math.inf, MAX_TTL * 2], ids=repr)
def test_cluster_refuses_a_bad_lock_ttl_on_redis(redis_url, ttl):
    with pytest.raises(ValueError, match="lock_ttl"):
        Cluster(backend=redis_url, clock=ManualClock(), lock_ttl=ttl)


def test_redis_takes_the_largest_ttl_and_refuses_one_it_cannot_hold(redis_url):
    cluster = Cluster(backend=redis_url, clock=ManualClock(), lock_ttl=MAX_TTL)
    t = cluster.begin()
    t.set("r", "c", 1)
    assert t.commit() and cluster.lock_ttl == MAX_TTL
    # 1e15 s used to be accepted here and to fail at the commit with a raw ResponseError
    with pytest.raises(ValueError, match="lock_ttl"):
        Cluster(backend=redis_url, clock=ManualClock(), lock_ttl=1e15)
