"""Protocol edge cases with tiny integer timestamps, one test per case, exact cells.

The first group reproduces the paper's Figure 4 (Bob transfers $7 to Joe)
state by state with ``Cluster(first_timestamp=5)``: the initial balances are
written by a transaction with start 5 / commit 6, the transfer has start 7 /
commit 8.
"""
import pytest

from percolator_ref import ClientCrash, ManualClock, TransactionClosed, WriteKind
from percolator_ref.model import Cell, lock_col

from helpers import PausedCommit, all_locks, cell_state, fresh_view

# ---------------------------------------------------------------------------
# Figure 4, the five states
# ---------------------------------------------------------------------------

STATE_1 = {  # initial: Joe $2, Bob $10, committed at 6 by start 5
    "Bob": {"data": [(5, 10)], "lock": [], "write": [(6, "data @ 5")]},
    "Joe": {"data": [(5, 2)], "lock": [], "write": [(6, "data @ 5")]},
}
STATE_2 = {  # prewrite of the primary Bob.bal at start 7
    "Bob": {"data": [(7, 3), (5, 10)], "lock": [(7, "I am primary")], "write": [(6, "data @ 5")]},
    "Joe": STATE_1["Joe"],
}
STATE_3 = {  # prewrite of the secondary Joe.bal
    "Bob": STATE_2["Bob"],
    "Joe": {"data": [(7, 9), (5, 2)], "lock": [(7, "primary @ Bob.bal")],
            "write": [(6, "data @ 5")]},
}
STATE_4 = {  # commit point: the primary's write record at 8, its lock erased
    "Bob": {"data": [(7, 3), (5, 10)], "lock": [], "write": [(8, "data @ 7"), (6, "data @ 5")]},
    "Joe": STATE_3["Joe"],
}
STATE_5 = {  # the secondary committed too
    "Bob": STATE_4["Bob"],
    "Joe": {"data": [(7, 9), (5, 2)], "lock": [], "write": [(8, "data @ 7"), (6, "data @ 5")]},
}
FIGURE_4 = [STATE_1, STATE_2, STATE_3, STATE_4, STATE_5]


def figure4_state(cluster):
    return {who: cell_state(cluster, who, "bal") for who in ("Bob", "Joe")}


def initial_balances(make_cluster):
    cluster = make_cluster(first_timestamp=5)
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    t.set("Joe", "bal", 2)
    assert t.commit() is True
    assert (t.start_ts, t.commit_ts) == (5, 6)
    return cluster


def transfer(cluster, amount=7, **commit_kw):
    """Bob sends ``amount`` to Joe; Bob.bal is written first, so it is the primary."""
    t = cluster.begin()
    bob, joe = t.get("Bob", "bal"), t.get("Joe", "bal")
    t.set("Bob", "bal", bob - amount)
    t.set("Joe", "bal", joe + amount)
    return t, t.commit(**commit_kw)


def test_figure4_state1_initial_balances(make_cluster):
    assert figure4_state(initial_balances(make_cluster)) == STATE_1


@pytest.mark.parametrize("crash_after, state", [(1, STATE_2), (2, STATE_3), (3, STATE_4)])
def test_figure4_states_2_to_4_by_crash_after(make_cluster, crash_after, state):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        transfer(cluster, crash_after=crash_after)
    assert figure4_state(cluster) == state


@pytest.mark.parametrize("name, state", [("prewrite-primary", STATE_2), ("prewrite", STATE_3),
                                         ("commit-primary", STATE_4)])
def test_figure4_named_crash_points(make_cluster, name, state):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash) as crash:
        transfer(cluster, crash_after=name)
    assert crash.value.step == name
    assert figure4_state(cluster) == state


def test_figure4_state5_committed(make_cluster):
    cluster = initial_balances(make_cluster)
    t, ok = transfer(cluster)
    assert ok is True and (t.start_ts, t.commit_ts) == (7, 8)
    assert figure4_state(cluster) == STATE_5
    assert fresh_view(cluster) == {("Bob", "bal"): 3, ("Joe", "bal"): 9}


def test_figure4_crash_after_4_is_after_the_last_row_transaction(make_cluster):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        transfer(cluster, crash_after=4)
    assert figure4_state(cluster) == STATE_5


def test_figure4_states_from_the_tracer_stream(make_cluster):
    """Replaying the recorded row transactions step by step walks through the five states."""
    cluster = initial_balances(make_cluster)
    with cluster.tracer.record() as events:
        transfer(cluster)
    assert [(e.step, e.row) for e in events] == [
        ("get", "Bob"), ("get", "Joe"), ("prewrite-primary", "Bob"),
        ("prewrite-secondary", "Joe"), ("commit-primary", "Bob"), ("commit-secondary", "Joe")]
    assert {e.client for e in events} == {"T7"}
    assert all(e.note for e in events)
    # apply the commit's changes one event at a time onto state 1
    state = {who: {k: list(v) for k, v in cols.items()} for who, cols in STATE_1.items()}
    seen = []
    for event in events[2:]:
        for ch in event.changes:
            kind = ch.column.split(":")[1]
            versions = state[event.row][kind]
            versions[:] = [(ts, v) for ts, v in versions if ts != ch.ts]
            if not ch.erased:
                shown = ch.new if kind == "data" else str(ch.new)
                versions.append((ch.ts, shown))
                versions.sort(reverse=True)
        seen.append({who: {k: list(v) for k, v in cols.items()} for who, cols in state.items()})
    assert seen == FIGURE_4[1:]


def test_figure4_lock_points_at_primary(make_cluster):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        transfer(cluster, crash_after="prewrite")
    [(ts, lock)] = cluster.bigtable.versions("default", "Joe", lock_col("bal"))
    assert ts == 7 and lock.start_ts == 7 and not lock.is_primary
    assert tuple(lock.primary) == ("default", "Bob", "bal")
    [(_, primary)] = cluster.bigtable.versions("default", "Bob", lock_col("bal"))
    assert primary.is_primary and tuple(primary.primary) == ("default", "Bob", "bal")
    assert primary.client == "T7"


# ---------------------------------------------------------------------------
# Edge cases
# ---------------------------------------------------------------------------

def test_no_read_your_own_writes(make_cluster):
    cluster = initial_balances(make_cluster)
    t = cluster.begin()
    t.set("Bob", "bal", 99)
    t.set("Ann", "bal", 1)
    t.delete("Joe", "bal")
    assert t.get("Bob", "bal") == 10          # the snapshot, not the buffer
    assert t.get("Ann", "bal") is None
    assert t.get("Joe", "bal") == 2
    assert t.scan() == [("Bob", "bal", 10), ("Joe", "bal", 2)]
    assert t.commit() is True


def test_primary_is_first_cell_written(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    t.set("z", "c", "first")     # sorts last, but written first: the primary
    t.delete("a", "c")
    t.set("m", "c", "third")
    assert list(t.writes)[0] == Cell("default", "z", "c")          # the primary: first written
    assert list(t.writes)[1:] == [Cell("default", "a", "c"), Cell("default", "m", "c")]
    with pytest.raises(ClientCrash):
        t.commit(crash_after="prewrite")
    assert cell_state(cluster, "z", "c")["lock"] == [(1, "I am primary")]
    assert cell_state(cluster, "a", "c") == {"data": [], "lock": [(1, "primary @ z.c")], "write": []}
    assert cell_state(cluster, "m", "c")["lock"] == [(1, "primary @ z.c")]


def test_rewriting_a_cell_keeps_it_primary_with_the_last_value(make_cluster):
    cluster = make_cluster()
    t = cluster.begin()
    t.set("p", "c", 1)
    t.set("q", "c", 2)
    t.set("p", "c", 3)
    assert list(t.writes)[0] == Cell("default", "p", "c")
    assert t.commit() is True
    assert fresh_view(cluster) == {("p", "c"): 3, ("q", "c"): 2}


def test_empty_commit_returns_true_without_commit_ts(make_cluster):
    cluster = make_cluster(first_timestamp=5)
    t = cluster.begin()
    assert t.get("x", "c") is None
    before, next_ts = cluster.bigtable.dump(), cluster.oracle.peek()
    assert t.commit() is True
    assert t.commit_ts is None
    assert cluster.bigtable.dump() == before == {}
    assert cluster.oracle.peek() == next_ts == 6      # no commit timestamp taken


def test_write_write_conflict_loser_returns_false_and_leaves_nothing(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t1, t2 = cluster.begin(), cluster.begin()        # start 1 and 2
    t1.set("x", "c", "one")
    t2.set("y", "c", "two-y")                       # t2's primary, locked before the conflict
    t2.set("x", "c", "two-x")
    assert t1.commit() is True and t1.commit_ts == 3
    assert t2.commit() is False and t2.commit_ts is None
    assert cell_state(cluster, "x", "c") == {"data": [(1, "one")], "lock": [],
                                            "write": [(3, "data @ 1")]}
    # t2's primary lock and data were rolled back
    assert cell_state(cluster, "y", "c") == {"data": [], "lock": [], "write": []}
    assert fresh_view(cluster) == {("x", "c"): "one"}
    assert cluster.check_history().ok


def test_write_write_conflict_with_a_live_lock_aborts_without_cleaning(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set("x", "c", "one")
    t2.set("x", "c", "two")
    paused = PausedCommit(cluster, t1, "commit-primary")   # t1 holds a live lock on x
    assert t2.commit() is False
    assert cell_state(cluster, "x", "c")["lock"] == [(1, "I am primary")]   # untouched
    assert paused.resume() is True
    assert cell_state(cluster, "x", "c") == {"data": [(1, "one")], "lock": [],
                                            "write": [(3, "data @ 1")]}
    assert cluster.check_history().ok


def test_lock_above_start_ts_is_ignored_by_get(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    w0 = cluster.begin()
    w0.set("x", "c", "old")
    assert w0.commit() is True                     # 1 / 2
    reader = cluster.begin()                       # start 3
    writer = cluster.begin()                       # start 4
    writer.set("x", "c", "new")
    paused = PausedCommit(cluster, writer, "commit-primary")   # live lock at 4 > 3
    assert reader.get("x", "c") == "old"
    assert reader.scan() == [("x", "c", "old")]
    assert cluster.clock.now() == 0.0              # no waiting at all
    assert cell_state(cluster, "x", "c")["lock"] == [(4, "I am primary")]
    assert paused.resume() is True
    assert reader.get("x", "c") == "old"           # still the snapshot at 3
    assert reader.commit() is True


def test_dead_lock_above_start_ts_is_left_alone(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    reader = cluster.begin()                       # start 1
    writer = cluster.begin()                       # start 2
    writer.set("x", "c", "new")
    with pytest.raises(ClientCrash):
        writer.commit(crash_after="prewrite")
    with cluster.tracer.record() as events:
        assert reader.get("x", "c") is None
    assert [e.step for e in events] == ["get"]     # no cleanup row transaction
    assert cell_state(cluster, "x", "c")["lock"] == [(2, "I am primary")]


def test_get_waits_for_a_live_holder_then_cleans_up_after_the_ttl(make_cluster):
    cluster = make_cluster(first_timestamp=1, clock=ManualClock(), lock_ttl=1.0)
    holder = cluster.begin()                       # start 1
    holder.set("x", "c", "h-x")
    holder.set("y", "c", "h-y")
    paused = PausedCommit(cluster, holder, "commit-primary")   # both cells locked, alive
    reader = cluster.begin()                       # start 2: the locks are below it
    with cluster.tracer.record() as events:
        assert reader.get("y", "c") is None
    # the reader waited on the clock (ManualClock.sleep advances it) past the TTL ...
    assert cluster.clock.now() > cluster.lock_ttl
    gets = [e for e in events if e.step == "get"]
    assert len(gets) > 2                           # it retried several times (backoff)
    # ... then judged the silent holder dead and rolled it back through the primary
    assert [e.step for e in events if e.step != "get"] == ["cleanup-primary", "roll-back"]
    assert cluster.lockservice.status(holder.client) == "expired"
    assert all_locks(cluster) == []
    # the holder wakes up: its primary lock is gone, so it cannot commit
    assert paused.resume() is False
    assert holder.commit_ts is None
    assert fresh_view(cluster) == {}
    assert cluster.check_history().ok


def test_get_cleans_a_dead_holders_lock_immediately(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    holder = cluster.begin()
    holder.set("x", "c", "h")
    with pytest.raises(ClientCrash):
        holder.commit(crash_after="prewrite")
    assert cluster.lockservice.status(holder.client) == "crashed"
    reader = cluster.begin()
    with cluster.tracer.record() as events:
        assert reader.get("x", "c") is None
    assert cluster.clock.now() == 0.0              # no waiting
    assert [e.step for e in events] == ["get", "cleanup-primary", "get"]
    assert cell_state(cluster, "x", "c") == {"data": [], "lock": [], "write": []}


def test_roll_forward_a_secondary_whose_primary_committed(make_cluster):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        t, _ = transfer(cluster, crash_after="commit-primary")
    reader = cluster.begin()                       # start 9
    with cluster.tracer.record() as events:
        assert reader.get("Joe", "bal") == 9
    assert [e.step for e in events] == ["get", "cleanup-primary", "roll-forward", "get"]
    assert figure4_state(cluster) == STATE_5       # exactly as if T7 had finished
    assert cluster.check_history().ok


def test_roll_back_a_secondary_whose_primary_did_not_commit(make_cluster):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        transfer(cluster, crash_after="prewrite")
    reader = cluster.begin()
    with cluster.tracer.record() as events:
        assert reader.get("Joe", "bal") == 2
    assert [e.step for e in events] == ["get", "cleanup-primary", "roll-back", "get"]
    assert figure4_state(cluster) == STATE_1       # every trace of T7 is gone
    assert cluster.check_history().ok


def test_reading_the_primary_of_a_crashed_committed_transaction(make_cluster):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        transfer(cluster, crash_after="commit-primary")
    reader = cluster.begin()
    assert reader.get("Bob", "bal") == 3           # the primary is already committed
    assert figure4_state(cluster) == STATE_4       # Joe's lock waits for its own reader


def test_prewrite_meeting_a_dead_lock_cleans_it_and_still_aborts(make_cluster):
    cluster = initial_balances(make_cluster)
    with pytest.raises(ClientCrash):
        transfer(cluster, crash_after="prewrite")  # T7 dead, both cells locked
    t = cluster.begin()                            # start 9
    t.set("Joe", "bal", 100)
    with cluster.tracer.record() as events:
        assert t.commit() is False
    assert [e.step for e in events] == ["prewrite-primary", "cleanup-primary", "roll-back"]
    assert figure4_state(cluster) == STATE_1       # T7 rolled back, T9 left nothing
    again = cluster.begin()
    again.set("Joe", "bal", 100)
    assert again.commit() is True
    assert fresh_view(cluster) == {("Bob", "bal"): 10, ("Joe", "bal"): 100}


def test_commit_primary_fails_if_a_cleaner_rolled_it_back(make_cluster):
    cluster = make_cluster(first_timestamp=1, lock_ttl=1.0)
    holder = cluster.begin()
    holder.set("x", "c", 1)
    paused = PausedCommit(cluster, holder, "commit-primary")
    cluster.clock.advance(2.0)                     # the holder's token expires
    other = cluster.begin()
    other.set("x", "c", 2)
    assert other.commit() is False                 # meets the expired lock: cleans it, aborts
    assert all_locks(cluster) == []
    assert paused.resume() is False
    assert fresh_view(cluster) == {}


def test_delete_commits_a_delete_record_and_no_data(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    t.set("x", "c", "v")
    t.set("y", "c", "w")
    assert t.commit() is True                      # 1 / 2
    old_reader = cluster.begin()                   # 3
    d = cluster.begin()                            # 4
    d.delete("x", "c")
    assert d.commit() is True                      # commit 5
    assert cell_state(cluster, "x", "c") == {"data": [(1, "v")], "lock": [],
                                            "write": [(5, "delete @ 4"), (2, "data @ 1")]}
    [(_, record)] = cluster.bigtable.versions("default", "x", "c:write")[:1]
    assert record.kind is WriteKind.DELETE
    assert old_reader.get("x", "c") == "v"         # older snapshots still see it
    new_reader = cluster.begin()
    assert new_reader.get("x", "c") is None
    assert new_reader.scan() == [("y", "c", "w")]  # deleted cells are not scanned
    again = cluster.begin()
    again.set("x", "c", "back")
    assert again.commit() is True
    assert fresh_view(cluster) == {("x", "c"): "back", ("y", "c"): "w"}
    assert cluster.check_history().ok


def test_delete_of_an_absent_cell_commits(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    t.delete("x", "c")
    assert t.commit() is True
    assert cell_state(cluster, "x", "c") == {"data": [], "lock": [], "write": [(2, "delete @ 1")]}
    assert fresh_view(cluster) == {}


def test_delete_rolls_forward_as_a_delete(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    t.set("x", "c", "v")
    t.set("y", "c", "w")
    assert t.commit() is True                      # 1 / 2
    d = cluster.begin()                            # 3
    d.set("y", "c", "w2")                          # primary
    d.delete("x", "c")                             # secondary delete
    with pytest.raises(ClientCrash):
        d.commit(crash_after="commit-primary")     # commit 4
    assert cell_state(cluster, "x", "c")["lock"] == [(3, "primary @ y.c")]
    assert fresh_view(cluster) == {("y", "c"): "w2"}
    assert cell_state(cluster, "x", "c") == {"data": [(1, "v")], "lock": [],
                                            "write": [(4, "delete @ 3"), (2, "data @ 1")]}


def test_reader_started_before_a_commit_does_not_see_it(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    reader = cluster.begin()
    w = cluster.begin()
    w.set("x", "c", 1)
    assert w.commit() is True
    assert reader.get("x", "c") is None
    assert cluster.begin().get("x", "c") == 1


def test_scan_returns_sorted_rows_in_the_half_open_range(make_cluster):
    cluster = make_cluster()
    t = cluster.begin()
    for row in ("d", "a", "c", "b"):
        t.set(row, "v", row.upper())
        t.set(row, "u", row)
    t.set("b", "v", "other table", table="other")
    assert t.commit() is True
    r = cluster.begin()
    assert r.scan(start_row="b", end_row="d") == [
        ("b", "u", "b"), ("b", "v", "B"), ("c", "u", "c"), ("c", "v", "C")]
    assert r.scan("other") == [("b", "v", "other table")]
    assert r.scan(start_row="e") == []


@pytest.mark.parametrize("outcome", ["committed", "aborted", "crashed", "empty"])
def test_use_after_commit_or_crash_raises_transaction_closed(make_cluster, outcome):
    cluster = make_cluster()
    if outcome == "aborted":
        winner = cluster.begin()
        winner.set("x", "c", 0)
    t = cluster.begin()
    if outcome != "empty":
        t.set("x", "c", 1)
    if outcome == "aborted":
        assert winner.commit() is True
        assert t.commit() is False
    elif outcome == "crashed":
        with pytest.raises(ClientCrash):
            t.commit(crash_after=1)
    else:
        assert t.commit() is True
    before = cluster.bigtable.dump()
    for call in (lambda: t.get("x", "c"), lambda: t.set("x", "c", 2), lambda: t.delete("x", "c"),
                 lambda: t.scan(), lambda: t.notify("x", "c"), lambda: t.commit()):
        with pytest.raises(TransactionClosed):
            call()
    assert cluster.bigtable.dump() == before


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), ("prewrite-all", ValueError),
                                        ("", ValueError), (1.5, TypeError), (True, TypeError),
                                        ([1], TypeError)])
def test_crash_after_validation(make_cluster, bad, error):
    cluster = make_cluster()
    t = cluster.begin()
    t.set("x", "c", 1)
    with pytest.raises(error, match="crash_after"):
        t.commit(crash_after=bad)
    assert cluster.bigtable.dump() == {}
    assert t.commit() is True                      # still open: nothing happened


def test_crash_after_beyond_the_last_step_commits_normally(make_cluster):
    cluster = make_cluster(first_timestamp=1)
    t = cluster.begin()
    t.set("x", "c", 1)
    t.set("y", "c", 2)
    assert t.commit(crash_after=5) is True         # 4 row transactions only
    assert cluster.lockservice.status(t.client) == "gone"
    assert fresh_view(cluster) == {("x", "c"): 1, ("y", "c"): 2}


def test_conflict_before_the_crash_point_returns_false_without_crash(make_cluster):
    cluster = make_cluster()
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set("x", "c", 1)
    t2.set("x", "c", 2)
    assert t1.commit() is True
    assert t2.commit(crash_after="commit-primary") is False
    assert t2.status == "aborted"


def test_commit_ts_after_a_crash(make_cluster):
    cluster = initial_balances(make_cluster)
    t = cluster.begin()
    t.set("Bob", "bal", 0)
    with pytest.raises(ClientCrash):
        t.commit(crash_after="prewrite")
    assert t.commit_ts is None
    t = cluster.begin()
    t.set("Joe", "bal", 0)
    with pytest.raises(ClientCrash):
        t.commit(crash_after="commit-primary")
    assert t.commit_ts is not None and t.commit_ts > t.start_ts
