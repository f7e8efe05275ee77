"""Bad input: a clear TypeError/ValueError naming the argument, and nothing written."""
import pytest

from percolator_ref import Cluster, ManualClock


class Weird:
    pass


BAD_NAMES = [(None, TypeError), (3, TypeError), (b"row", TypeError), ("", ValueError)]


def committed_cluster(make_cluster):
    cluster = make_cluster()
    t = cluster.begin()
    t.set("r", "c", "v")
    assert t.commit()
    return cluster


@pytest.mark.parametrize("bad, error", BAD_NAMES)
@pytest.mark.parametrize("argument", ["row", "column", "table"])
@pytest.mark.parametrize("method", ["get", "set", "delete", "notify"])
def test_bad_names(make_cluster, method, argument, bad, error):
    cluster = committed_cluster(make_cluster)
    before = cluster.bigtable.dump()
    t = cluster.begin()
    kwargs = {"row": "r", "column": "c", "table": "default", argument: bad}
    if method == "set":
        kwargs["value"] = 1
    with pytest.raises(error, match=argument):
        getattr(t, method)(**kwargs)
    assert t.writes == {} and t.notifies == {}       # nothing buffered
    assert t.commit() is True
    assert cluster.bigtable.dump() == before          # nothing written


@pytest.mark.parametrize("method", ["get", "set", "delete", "notify"])
@pytest.mark.parametrize("column", ["bal:lock", "a:b", ":"])
def test_colon_in_a_column(make_cluster, method, column):
    cluster = committed_cluster(make_cluster)
    before = cluster.bigtable.dump()
    t = cluster.begin()
    args = ("r", column, 1) if method == "set" else ("r", column)
    with pytest.raises(ValueError, match="column"):
        getattr(t, method)(*args)
    assert t.commit() is True
    assert cluster.bigtable.dump() == before


@pytest.mark.parametrize("value", [None, [1], {"a": 1}, (1,), Weird(), {1}])
def test_bad_values(make_cluster, value):
    cluster = committed_cluster(make_cluster)
    before = cluster.bigtable.dump()
    t = cluster.begin()
    t.set("ok", "c", 1)
    with pytest.raises(TypeError, match="value"):
        t.set("r", "c", value)
    assert list(t.writes) == [("default", "ok", "c")]   # the earlier good write stays buffered
    assert cluster.bigtable.dump() == before


@pytest.mark.parametrize("value", ["s", b"\x00bytes", 0, -3, 1.5, True, False])
def test_good_values_round_trip(make_cluster, value):
    cluster = make_cluster()
    t = cluster.begin()
    t.set("r", "c", value)
    assert t.commit()
    got = cluster.begin().get("r", "c")
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("argument", ["table", "start_row", "end_row"])
@pytest.mark.parametrize("bad, error", BAD_NAMES)
def test_bad_scan_arguments(make_cluster, argument, bad, error):
    cluster = committed_cluster(make_cluster)
    t = cluster.begin()
    kwargs = {argument: bad}
    if bad is None and argument != "table":
        assert t.scan(**kwargs) == [("r", "c", "v")]     # None means unbounded
        return
    with pytest.raises(error, match=argument):
        t.scan(**kwargs)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), ("later", ValueError),
                                        (2.0, TypeError), (False, TypeError), (None, None)])
def test_bad_crash_after_writes_nothing(make_cluster, bad, error):
    cluster = committed_cluster(make_cluster)
    before = cluster.bigtable.dump()
    t = cluster.begin()
    t.set("r", "c", "new")
    if error is None:
        assert t.commit(crash_after=bad) is True      # None is the default: no crash
        return
    with pytest.raises(error, match="crash_after"):
        t.commit(crash_after=bad)
    assert cluster.bigtable.dump() == before
    assert t.status == "open"


@pytest.mark.parametrize("kwargs, argument, error", [
    ({"lock_ttl": 0}, "lock_ttl", ValueError),
    ({"lock_ttl": -1}, "lock_ttl", ValueError),
    ({"lock_ttl": "10"}, "lock_ttl", TypeError),
    ({"lock_ttl": None}, "lock_ttl", TypeError),
    ({"first_timestamp": -1}, "first_timestamp", ValueError),
    ({"first_timestamp": "5"}, "first_timestamp", TypeError),
    ({"first_timestamp": 5.0}, "first_timestamp", TypeError),
    ({"first_timestamp": None}, "first_timestamp", TypeError),
    ({"clock": "wall"}, "clock", TypeError),
    ({"backend": 42}, "backend", TypeError),
    ({"backend": "mysql://x"}, "backend", ValueError),
])
def test_bad_cluster_arguments(kwargs, argument, error):
    kwargs.setdefault("clock", ManualClock())
    with pytest.raises(error, match=argument):
        Cluster(**kwargs)


@pytest.mark.parametrize("bad, error", [("1", TypeError), (-1, ValueError), (True, TypeError)])
def test_bad_manual_clock_arguments(bad, error):
    clock = ManualClock()
    with pytest.raises(error, match="seconds"):
        clock.advance(bad)
    assert clock.now() == 0.0
