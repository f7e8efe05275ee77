"""Observers always run once a transaction passes its commit point (issue 13, item 1).

A transaction writes three observed cells (a primary and two secondaries) and
sends a weak notification; its client crashes after each named point and after
each row transaction of the commit. Once it passed its commit point, one
``run_observers()`` call must run the observer for every cell it wrote (seeing
the committed value) and the weakly notified observer. Before the commit point
an extra run is allowed, but it never sees the uncommitted value.
"""
import pytest

from percolator_ref import ClientCrash

ROWS = ("a", "b", "c")
ROW_TRANSACTIONS = 9      # 3 prewrites, 3 notifications, commit-primary, 2 secondaries


def observed_cluster(make_cluster):
    c = make_cluster()
    seen = {"text": {}, "meta": []}

    @c.observe("docs", "text")
    def index(txn, row, column):
        seen["text"][row] = txn.get(row, column, table="docs")

    @c.observe("docs", "meta")
    def touch(txn, row, column):
        seen["meta"].append(row)
    return c, seen


def crashed_writer(c, point):
    t = c.begin()
    for row in ROWS:
        t.set(row, "text", f"v-{row}", table="docs")
    t.notify("z", "meta", table="docs")
    try:
        t.commit(crash_after=point)
    except ClientCrash:
        pass
    return t


@pytest.mark.parametrize("point", ["prewrite-primary", "prewrite", "commit-primary",
                                   *range(1, ROW_TRANSACTIONS + 1)])
def test_observers_run_for_every_cell_once_the_commit_point_passed(make_cluster, point):
    c, seen = observed_cluster(make_cluster)
    t = crashed_writer(c, point)
    committed = t.outcome()
    c.run_observers()
    if committed:
        assert seen["text"] == {row: f"v-{row}" for row in ROWS}
        assert seen["meta"] == ["z"]
    else:
        assert all(value is None for value in seen["text"].values())   # never the aborted value
    assert next(c.bigtable.notifications(), None) is None               # nothing left pending


def test_the_named_points_split_at_the_commit_point(make_cluster):
    outcomes = {}
    for point in ("prewrite-primary", "prewrite", "commit-primary"):
        c, _ = observed_cluster(make_cluster)
        outcomes[point] = crashed_writer(c, point).outcome()
    assert outcomes == {"prewrite-primary": False, "prewrite": False, "commit-primary": True}


def test_a_second_run_does_not_rerun_acknowledged_observers(make_cluster):
    c, seen = observed_cluster(make_cluster)
    crashed_writer(c, "commit-primary")
    first = c.run_observers()
    assert first == 4 and c.run_observers() == 0
