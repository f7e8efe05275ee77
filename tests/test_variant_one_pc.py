"""TiKV's one-phase commit (percolator_ref.variants.one_pc).

What it removes: a transaction that writes two cells of one row costs the
paper four row transactions (two prewrites, two commits), and a crash between
them leaves locks that every reader must wait on or clean up. With 1PC it is
one row transaction that writes no lock: a crash leaves nothing to clean.
"""
from __future__ import annotations

import pytest

from percolator_ref import ClientCrash, Write, WriteKind
from percolator_ref.interceptors import Counter, attach
from percolator_ref.variants.one_pc import ONE_PC, OnePC
from percolator_ref.variants.rollback_records import RollbackRecords
from percolator_ref.workloads import hermitage

from helpers import all_locks, cell_state, fresh_view


def one_row_transfer(cluster, amount=7, crash_after=None):
    """Move ``amount`` from column Bob to column Joe of the one row ``acct``."""
    t = cluster.begin()
    bob, joe = t.get("acct", "Bob"), t.get("acct", "Joe")
    t.set("acct", "Bob", bob - amount)
    t.set("acct", "Joe", joe + amount)
    try:
        return t, t.commit(crash_after=crash_after)
    except ClientCrash:
        return t, "crashed"


def setup(cluster):
    t = cluster.begin()
    t.set("acct", "Bob", 10)
    t.set("acct", "Joe", 2)
    assert t.commit()


def counted(cluster, fn):
    counter = Counter()
    with attach(cluster.bigtable, counter):
        result = fn()
    return result, counter.counts


def test_without_one_pc_a_one_row_transaction_takes_four_row_transactions_and_leaves_locks(
        make_cluster):
    cluster = make_cluster(lock_ttl=1.0)
    setup(cluster)
    (t, ok), counts = counted(cluster, lambda: one_row_transfer(cluster))
    assert ok and sum(v for k, v in counts.items() if k != "get") == 4
    t, outcome = one_row_transfer(cluster, crash_after="prewrite")
    assert outcome == "crashed" and len(all_locks(cluster)) == 2     # readers must clean up


def test_with_one_pc_it_is_one_row_transaction_and_a_crash_leaves_no_lock(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[OnePC()])
    setup(cluster)
    (t, ok), counts = counted(cluster, lambda: one_row_transfer(cluster))
    assert ok and {k: v for k, v in counts.items() if k != "get"} == {ONE_PC: 1}
    bob = cell_state(cluster, "acct", "Bob")
    assert bob["data"][0] == (t.start_ts, 3) and bob["lock"] == []
    assert bob["write"][0] == (t.commit_ts, f"data @ {t.start_ts}")
    assert t.start_ts < t.commit_ts
    t, outcome = one_row_transfer(cluster, crash_after=1)
    assert outcome == "crashed" and all_locks(cluster) == []         # committed, nothing to clean
    assert t.outcome() is True
    assert fresh_view(cluster) == {("acct", "Bob"): -4, ("acct", "Joe"): 16}
    assert cluster.check_history().ok


def test_one_pc_refuses_a_write_write_conflict_and_leaves_only_rollback_records(make_cluster):
    cluster = make_cluster(variants=[OnePC()])
    setup(cluster)
    first, second = cluster.begin(), cluster.begin()
    for t, value in ((first, 1), (second, 2)):
        t.set("acct", "Bob", value)
        t.set("acct", "Joe", value)
    assert second.commit()
    before = cluster.bigtable.dump()
    assert first.commit() is False              # a write record after its start: abort
    after = cluster.bigtable.dump()["default"]["acct"]
    for column in ("Bob", "Joe"):               # no data, no lock: a rollback record only
        assert after[f"{column}:write"] == sorted(
            before["default"]["acct"][f"{column}:write"]
            + [(first.start_ts, Write(first.start_ts, WriteKind.ROLLBACK))], reverse=True)
    assert {c: v for c, v in after.items() if not c.endswith(":write")} == {
        c: v for c, v in before["default"]["acct"].items() if not c.endswith(":write")}
    assert fresh_view(cluster) == {("acct", "Bob"): 2, ("acct", "Joe"): 2}
    assert cluster.check_history().ok


def test_one_pc_waits_for_no_one_and_a_two_pc_lock_still_blocks_it(make_cluster):
    cluster = make_cluster(lock_ttl=1.0, variants=[OnePC()])
    setup(cluster)
    holder = cluster.begin()
    holder.set("acct", "Bob", 0)
    holder.set("other", "x", 0)                 # two rows: two-phase commit
    with pytest.raises(ClientCrash):
        holder.commit(crash_after="prewrite")
    t = cluster.begin()
    t.set("acct", "Joe", 99)
    t.set("acct", "Bob", 99)
    assert t.commit() is False                  # the lock on acct.Bob: conflict
    assert fresh_view(cluster) == {("acct", "Bob"): 10, ("acct", "Joe"): 2}


@pytest.mark.parametrize("variants", [[OnePC()], [OnePC(), RollbackRecords()]],
                         ids=["one-pc", "one-pc+rollback-records"])
@pytest.mark.parametrize("scenario", hermitage.SCENARIOS, ids=lambda s: s.__name__)
def test_one_row_hermitage_style_histories_pass(make_cluster, scenario, variants):
    cluster = make_cluster(variants=variants)
    result = scenario(cluster)
    assert result.ok and cluster.check_history().ok
