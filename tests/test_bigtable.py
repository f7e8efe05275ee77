"""The multi-version Bigtable: versions, single-row transactions, the tracer, the gate."""
import pytest

from percolator_ref import RowTransactionEvent
from percolator_ref.interceptors import Gate, attach


@pytest.fixture
def bt(make_cluster):
    return make_cluster().bigtable


def test_read_newest_at_or_below_ts(bt):
    for ts, value in ((3, "c"), (1, "a"), (2, "b")):
        bt.write("t", "r", "x:data", value, ts)
    assert bt.versions("t", "r", "x:data") == [(3, "c"), (2, "b"), (1, "a")]
    assert bt.read("t", "r", "x:data") == "c"
    assert bt.read("t", "r", "x:data", 2) == "b"
    assert bt.read("t", "r", "x:data", 0) is None
    assert bt.read("t", "r", "y:data") is None
    assert bt.versions("t", "missing", "x:data") == []


def test_overwrite_same_timestamp_and_erase(bt):
    bt.write("t", "r", "x:lock", "L1", 5)
    bt.write("t", "r", "x:lock", "L2", 5)
    assert bt.versions("t", "r", "x:lock") == [(5, "L2")]
    bt.erase("t", "r", "x:lock", 5)
    assert bt.read("t", "r", "x:lock") is None
    bt.erase("t", "r", "x:lock", 5)              # erasing nothing is a no-op
    assert bt.dump() == {}


def test_row_transaction_applies_atomically_at_exit(bt):
    bt.write("t", "r", "x:data", "old", 1)
    with bt.row_transaction("t", "r", client="me", step="demo") as rt:
        rt.write("x:data", 2, "new")
        rt.erase("x:data", 1)
        assert bt.versions("t", "r", "x:data") == [(1, "old")]     # buffered
        assert rt.read("x:data") == (1, "old")
    assert bt.versions("t", "r", "x:data") == [(2, "new")]


def test_row_transaction_applies_nothing_on_exception(bt):
    bt.write("t", "r", "x:data", "old", 1)
    before = bt.tracer.counts.row_transactions
    with pytest.raises(RuntimeError):
        with bt.row_transaction("t", "r") as rt:
            rt.write("x:data", 2, "new")
            rt.write("y:data", 2, "new")
            raise RuntimeError("abort")
    assert bt.dump() == {"t": {"r": {"x:data": [(1, "old")]}}}
    assert bt.tracer.counts.row_transactions == before              # not counted


def test_row_transaction_reads_with_min_and_max(bt):
    for ts in (2, 4, 6):
        bt.write("t", "r", "x:write", f"w{ts}", ts)
    with bt.row_transaction("t", "r") as rt:
        assert rt.read("x:write", max_ts=5) == (4, "w4")
        assert rt.read("x:write", min_ts=5) == (6, "w6")
        assert rt.read("x:write", max_ts=5, min_ts=5) is None
        assert rt.versions("x:write") == [(6, "w6"), (4, "w4"), (2, "w2")]
        assert rt.columns() == ["x:write"]
        with pytest.raises(ValueError):
            rt.write("x:write", 7, None)


def test_rows_tables_and_dump_are_sorted_copies(bt):
    for row in ("b", "d", "a", "c"):
        bt.write("t", row, "x:data", row, 1)
    bt.write("u", "z", "x:data", 1, 1)
    assert bt.rows("t") == ["a", "b", "c", "d"]
    assert bt.rows("t", "b", "d") == ["b", "c"]
    assert bt.rows("nope") == []
    assert bt.tables() == ["t", "u"]
    dump = bt.dump("u")
    dump["u"]["z"]["x:data"].append("junk")
    assert bt.dump("u") == {"u": {"z": {"x:data": [(1, 1)]}}}


def test_tracer_counts_and_emits_each_row_transaction(bt):
    bt.tracer.reset_counts()
    with bt.tracer.record() as events:
        bt.write("t", "r", "x:data", "v", 1)
        bt.read("t", "r", "x:data")
        with bt.row_transaction("t", "r", client="T9", step="prewrite-primary") as rt:
            rt.read("x:lock")
            rt.write("x:lock", 9, "L")
            rt.explain("why")
    assert [e.step for e in events] == ["bigtable-write", "bigtable-read", "prewrite-primary"]
    last = events[-1]
    assert isinstance(last, RowTransactionEvent)
    assert (last.client, last.table, last.row, last.note) == ("T9", "t", "r", "why")
    assert last.reads == ("x:lock",)
    [change] = last.changes
    assert (change.column, change.ts, change.old, change.new, change.erased) == ("x:lock", 9, None, "L", False)
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    counts = bt.tracer.counts.snapshot()
    assert counts["row_transactions"] == 3 and counts["writes"] == 2
    assert counts["by_step"] == {"bigtable-write": 1, "bigtable-read": 1, "prewrite-primary": 1}
    bt.write("t", "r", "x:data", "w", 2)       # nobody listening: still counted
    assert len(events) == 3 and bt.tracer.counts.row_transactions == 4


def test_gate_is_called_before_each_row_transaction(bt):
    calls = []
    gate = Gate(lambda client, table, row, step: calls.append((client, table, row, step)))
    with attach(bt, gate):
        bt.write("t", "r", "x:data", "v", 1)
        with bt.row_transaction("t", "s", client="C", step="get"):
            pass
    assert gate not in bt.interceptors
    assert calls == [(None, "t", "r", "bigtable-write"), ("C", "t", "s", "get")]


def test_notify_index_tracks_notify_columns(bt):
    bt.write("t", "r", "x:notify", True, 3)
    bt.write("t", "q", "y:notify", True, 4)
    assert list(bt.notifications()) == [("t", "q", "y"), ("t", "r", "x")]
    bt.erase("t", "q", "y:notify", 4)
    assert list(bt.notifications()) == [("t", "r", "x")]


@pytest.mark.parametrize("call, name", [
    (lambda bt: bt.write("", "r", "x:data", 1, 1), "table"),
    (lambda bt: bt.write("t", 3, "x:data", 1, 1), "row"),
    (lambda bt: bt.write("t", "r", "", 1, 1), "bigtable_column"),
    (lambda bt: bt.write("t", "r", "x:data", 1, -1), "ts"),
    (lambda bt: bt.write("t", "r", "x:data", 1, "1"), "ts"),
    (lambda bt: bt.read("t", "r", "x:data", 1.5), "ts"),
    (lambda bt: bt.erase("t", "r", None, 1), "bigtable_column"),
])
def test_bad_raw_arguments_name_the_argument(bt, call, name):
    with pytest.raises((TypeError, ValueError), match=name):
        call(bt)
    assert bt.dump() == {}


def test_attach_is_a_handle_and_a_context_manager_and_refuses_a_non_interceptor(bt):
    first, second = Gate(lambda *a: None), Gate(lambda *a: None)
    handle = attach(bt, first)
    with attach(bt, second, first=True) as target:
        assert target is bt and bt.interceptors == [second, first]
    assert bt.interceptors == [first]
    handle.detach()
    handle.detach()                                   # idempotent
    assert bt.interceptors == []
    with pytest.raises(TypeError, match="an interceptor needs before"):
        attach(bt, object())
    assert bt.interceptors == []
