"""``outcome()`` with ``wait=N`` reports only decisions a failover keeps (issue 21, finding 2).

A Redis master with one replica. The replica is cut off (``REPLICAOF NO ONE``)
just before the commit point, so the commit's ``WAIT`` fails and it ends in
``CommitOutcomeUnknown``. On the master the primary's write record is there;
promoted, the replica never saw it. ``outcome()`` must not answer True then:
it says it cannot know yet. With the replica connected, it answers True and
the promoted replica agrees.
"""

import pytest

from percolator_ref import (Cluster, CommitOutcomeUnknown, ManualClock, Step, StoreUnavailable,
                            TransactionClosed)
from percolator_ref.interceptors import attach

from redis_fixtures import master_and_replica, promote  # noqa: F401 (a fixture)


class Before:
    """Run ``action`` once, before the first row transaction of ``step``."""

    def __init__(self, step, action):
        self.step, self.action, self.done = step, action, False

    def before(self, rt):
        if rt.step == self.step and not self.done:
            self.done = True
            self.action()


def transfer(c):
    t = c.begin()
    t.set("x", "v", 1)
    t.set("y", "v", 1)
    return t


def test_outcome_never_reports_a_commit_point_the_replica_lacks(master_and_replica):
    master, replica = master_and_replica
    clock = ManualClock()
    c = Cluster(backend=f"{master.url}?prefix=od&wait=1&wait_timeout=200", clock=clock)
    t = transfer(c)
    attach(t.session, Before(Step.COMMIT_PRIMARY, lambda: promote(replica)))
    with pytest.raises(CommitOutcomeUnknown):
        t.commit()
    with pytest.raises(TransactionClosed):
        t.commit()
    with pytest.raises(StoreUnavailable, match="not yet known to be on 1 replica"):
        t.outcome()                      # on the master the write record is there: not enough
    master.kill()                        # the failover: the replica (promoted) is the store
    after = Cluster(backend=f"{replica.url}?prefix=od", clock=clock)
    clock.advance(after.lock_ttl + 1)
    reader = after.begin()
    assert reader.get("x", "v") is None and reader.get("y", "v") is None


def test_outcome_reports_a_commit_point_the_replica_holds(master_and_replica):
    master, replica = master_and_replica
    clock = ManualClock()
    c = Cluster(backend=f"{master.url}?prefix=od&wait=1&wait_timeout=2000", clock=clock)
    t = transfer(c)

    class LoseReply:
        def after(self, rt):
            if rt.step == Step.COMMIT_PRIMARY:
                raise StoreUnavailable("the reply to the commit point was lost")
    attach(t.session, LoseReply())
    with pytest.raises(CommitOutcomeUnknown):
        t.commit()
    assert t.outcome() is True
    promote(replica)
    master.kill()
    after = Cluster(backend=f"{replica.url}?prefix=od", clock=clock)
    clock.advance(after.lock_ttl + 1)
    reader = after.begin()
    assert reader.get("x", "v") == 1 and reader.get("y", "v") == 1
