"""Property-based tests (Hypothesis): random transactions and crashes against a model.

The model is a plain dict of committed values. A transaction with ``n``
distinct written cells runs ``n`` prewrites, then the primary's commit (the
commit point, row transaction ``n + 1``), then ``n - 1`` secondary commits; a
crash at or after row transaction ``n + 1`` counts as committed, an earlier
one as aborted. After every transaction a fresh reader must see the model.
"""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from percolator_ref import ClientCrash

from helpers import all_locks, fresh_view

ROWS = ["r0", "r1", "r2"]
COLUMNS = ["c0", "c1"]

cells = st.tuples(st.sampled_from(ROWS), st.sampled_from(COLUMNS))
ops = st.one_of(
    st.tuples(st.just("get"), cells),
    st.tuples(st.just("set"), cells, st.integers(0, 99)),
    st.tuples(st.just("delete"), cells),
)
crash_points = st.one_of(st.none(), st.integers(1, 8))
transactions = st.tuples(st.lists(ops, max_size=6), crash_points)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def buffer_ops(txn, operations, snapshot):
    """Apply ``operations`` to ``txn``; check each get against ``snapshot``; the write set."""
    writes = {}
    for op in operations:
        (row, column) = op[1]
        if op[0] == "get":
            assert txn.get(row, column) == snapshot.get((row, column))   # no read-your-writes
        elif op[0] == "set":
            txn.set(row, column, op[2])
            writes[(row, column)] = op[2]        # re-setting keeps the cell's position
        else:
            txn.delete(row, column)
            writes[(row, column)] = None
    return writes


def commit(txn, writes, crash_after, conflict=False):
    """Commit; return (committed?, crashed?) and check the outcome against the step count.

    Without a conflict a commit of ``n`` cells runs exactly ``2n`` row transactions.
    """
    n = len(writes)
    try:
        result = txn.commit(crash_after=crash_after)
    except ClientCrash as crash:
        assert crash.row_transactions == crash_after
        if conflict:                     # it crashed while aborting: never committed
            return False, True
        assert n > 0 and crash_after <= 2 * n
        return crash_after >= n + 1, True
    return result, False


def apply(model, writes):
    for cell, value in writes.items():
        if value is None:
            model.pop(cell, None)
        else:
            model[cell] = value


@SETTINGS
@given(st.lists(transactions, min_size=1, max_size=6))
def test_sequential_transactions_with_crashes_match_the_model(make_cluster, txns):
    cluster = make_cluster()
    model = {}
    for operations, crash_after in txns:
        t = cluster.begin()
        writes = buffer_ops(t, operations, model)
        committed, crashed = commit(t, writes, crash_after)
        if not crashed:
            assert committed is True                 # nothing concurrent: no conflict
            assert (t.commit_ts is None) == (not writes)
        if committed:
            apply(model, writes)
        assert fresh_view(cluster) == model           # also cleans the crashed client's locks
        assert all_locks(cluster) == []
    assert cluster.check_history().ok


@SETTINGS
@given(st.lists(transactions, max_size=2), transactions, transactions)
def test_two_concurrent_transactions_first_committer_wins(make_cluster, before, a, b):
    cluster = make_cluster()
    model = {}
    for operations, _ in before:                      # some committed history first
        t = cluster.begin()
        apply(model, buffer_ops(t, operations, model))
        assert t.commit() is True
    ta, tb = cluster.begin(), cluster.begin()
    writes_a = buffer_ops(ta, a[0], model)
    writes_b = buffer_ops(tb, b[0], model)
    committed_a, crashed_a = commit(ta, writes_a, a[1])
    # the cells A left locked or committed: all of them unless it died while prewriting
    touched = list(writes_a)
    if crashed_a and not committed_a:
        touched = touched[:a[1]]
    conflict = bool(set(touched) & set(writes_b))
    committed_b, crashed_b = commit(tb, writes_b, b[1], conflict)
    if conflict:
        assert not committed_b
    elif not crashed_b:
        assert committed_b is True
    for ok, writes in ((committed_a, writes_a), (committed_b, writes_b)):
        if ok:
            apply(model, writes)
    assert fresh_view(cluster) == model
    assert all_locks(cluster) == []
    assert cluster.check_history().ok
