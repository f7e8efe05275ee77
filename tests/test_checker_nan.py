"""The checker compares values exactly: a NaN read back is the NaN committed (nan != nan in
Python), and 1, 1.0 and True are different values (stores keep a value's type)."""
import math

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.checking.checker import TxnRecord, check_history, same_value
from percolator_ref.model import Cell


X = Cell("default", "x", "c")


def history(committed, read):
    writer = TxnRecord("T1", 1, 2, "committed", [], [(X, "PUT", committed)])
    reader = TxnRecord("T3", 3, 4, "committed", [(X, 2, read)], [])
    return [writer, reader]


@pytest.mark.parametrize("value", [math.nan, -math.nan, float("nan")])
def test_nan_read_back_is_not_g1b(value):
    report = check_history(history(value, float("nan")))
    assert report.ok, report


@pytest.mark.parametrize("committed, read", [
    (1, True), (True, 1), (1, 1.0), (1.0, True), (0, False), (0.0, -0.0),
], ids=repr)
def test_a_value_of_another_type_or_sign_is_g1b(committed, read):
    assert check_history(history(committed, read)).names() == ["G1b intermediate read"]


def test_same_value_is_exact_yet_nan_equals_nan():
    class Meters(float):                  # a subclass is stored as its base type
        pass

    assert same_value(math.nan, math.nan) and same_value(Meters(math.nan), math.nan)
    assert same_value(Meters(1.5), 1.5) and same_value(7, 7) and same_value("s", "s")
    assert not same_value(math.nan, 0.0) and not same_value(1.0, math.nan)
    assert not same_value(b"a", "a") and not same_value(math.inf, -math.inf)
    assert not same_value(1, True) and not same_value(1, 1.0)


@pytest.fixture(params=["memory", "redis"])
def backend(request):
    if request.param == "memory":
        return None
    return request.getfixturevalue("redis_url")


def test_committed_nan_read_back_through_a_cluster(backend):
    cluster = Cluster(backend=backend, clock=ManualClock())
    t = cluster.begin()
    t.set("x", "c", math.nan)
    t.set("y", "c", 1)
    assert t.commit()
    reader = cluster.begin()
    assert math.isnan(reader.get("x", "c")) and reader.get("y", "c") == 1
    assert reader.commit()
    report = cluster.check_history()
    assert report.ok and report.reads == 2, report
