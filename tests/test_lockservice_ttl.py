"""``lock_ttl`` must be a finite number of seconds, > 0 and at most MAX_TTL, on every store.

A NaN TTL used to be accepted: every ``age <= ttl`` is then false, so every
client counted as dead at once and any reader rolled back live transactions.
An infinite or huge TTL failed later, at a commit on Redis (a key expiry out
of range). Zero, negatives and non-numbers were already refused
(tests/test_lockservice.py::test_bad_ttl).
"""
import math

import pytest

from percolator_ref import Cluster, LockService, ManualClock
from percolator_ref.services.lockservice import MAX_TTL

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
