"""One exception per meaning on every store (issue 21, finding 4).

The same oracle, store and input errors raise the same exception class in
memory, on a single Redis server and on a Redis Cluster. One table, every
store. (Deliberately store-specific, so not here: ``oracle_state_path``, which
only the in-memory oracle has: a Redis oracle's state lives on the server.)
"""
import pytest

from percolator_ref import (Cluster, ManualClock, OracleExhausted, StoreUnavailable,
                            TransactionClosed)
from percolator_ref.model import MAX_TIMESTAMP


def one_commit_then_begin(c):
    t = c.begin()
    t.set("r", "c", 1)
    assert t.commit() is True            # commit_ts is MAX_TIMESTAMP: the last one
    c.begin()


def in_transaction(action):
    def run(c):
        action(c.begin())
    return run


def closed_then_get(c):
    t = c.begin()
    t.commit()
    t.get("r", "c")


# (case, Cluster keywords, action, expected exception, text the message must contain)
CASES = [
    ("oracle exhausted at begin", dict(first_timestamp=MAX_TIMESTAMP - 1), one_commit_then_begin,
     OracleExhausted, "MAX_TIMESTAMP"),
    ("oracle asked for 0", {}, lambda c: c.oracle.get_timestamps(0), ValueError, "n must"),
    ("oracle asked for a float", {}, lambda c: c.oracle.get_timestamps(1.0), ValueError,
     "n must"),
    ("oracle asked for more than exist", {}, lambda c: c.oracle.get_timestamps(2 ** 64),
     OracleExhausted, "MAX_TIMESTAMP"),
    ("first_timestamp < 0", dict(first_timestamp=-1), None, ValueError, "first_timestamp"),
    ("first_timestamp > MAX", dict(first_timestamp=MAX_TIMESTAMP + 1), None, ValueError,
     "first_timestamp"),
    ("first_timestamp a str", dict(first_timestamp="1"), None, TypeError, "first_timestamp"),
    ("lock_ttl 0", dict(lock_ttl=0), None, ValueError, "lock_ttl"),
    ("value a list", {}, in_transaction(lambda t: t.set("r", "c", [1])), TypeError, "value"),
    ("value None", {}, in_transaction(lambda t: t.set("r", "c", None)), TypeError, "value"),
    ("value a lone surrogate", {}, in_transaction(lambda t: t.set("r", "c", "\ud800")),
     ValueError, "value"),
    ("row empty", {}, in_transaction(lambda t: t.set("", "c", 1)), ValueError, "row"),
    ("row an int", {}, in_transaction(lambda t: t.set(5, "c", 1)), TypeError, "row"),
    ("row with NUL", {}, in_transaction(lambda t: t.get("a\x00", "c")), ValueError, "row"),
    ("column with ':'", {}, in_transaction(lambda t: t.get("r", "a:b")), ValueError, "column"),
    ("table empty", {}, in_transaction(lambda t: t.get("r", "c", table="")), ValueError,
     "table"),
    ("scan start_row empty", {}, in_transaction(lambda t: t.scan(start_row="")), ValueError,
     "start_row"),
    ("client empty", {}, lambda c: c.begin(client=""), ValueError, "client"),
    ("used after commit", {}, closed_then_get, TransactionClosed, "begin a new one"),
    ("outcome before commit", {}, in_transaction(lambda t: t.outcome()), ValueError,
     "commit first"),
    ("crash_after unknown", {}, in_transaction(lambda t: t.commit(crash_after="bogus")),
     ValueError, "crash_after"),
    ("crash_after 0", {}, in_transaction(lambda t: t.commit(crash_after=0)), ValueError,
     "crash_after"),
    ("crash_after a float", {}, in_transaction(lambda t: t.commit(crash_after=1.5)), TypeError,
     "crash_after"),
    ("raw ts < 0", {}, lambda c: c.bigtable.write("t", "r", "c:data", "v", -1), ValueError, "ts"),
    ("raw ts > MAX", {}, lambda c: c.bigtable.write("t", "r", "c:data", "v", MAX_TIMESTAMP + 1),
     ValueError, "ts"),
    ("raw value None", {}, lambda c: c.bigtable.write("t", "r", "c:data", None, 1), TypeError,
     "None"),
    ("raw column empty", {}, lambda c: c.bigtable.read("t", "r", ""), ValueError,
     "bigtable_column"),
    ("observed column with ':'", {}, lambda c: c.observe("t", "a:b")(lambda *a: None),
     ValueError, "column"),
    ("run_observers max_runs < 0", {}, lambda c: c.run_observers(max_runs=-1), ValueError,
     "max_runs"),
]

STORES = ["memory", "redis", "redis_cluster"]


@pytest.fixture(params=STORES)
def store_url(request):
    if request.param == "memory":
        return None
    return request.getfixturevalue(f"{request.param}_url")


@pytest.mark.parametrize("case,kwargs,action,expected,text", CASES, ids=[c[0] for c in CASES])
def test_the_same_error_on_every_store(store_url, case, kwargs, action, expected, text):
    with pytest.raises(expected, match=text) as caught:
        c = Cluster(backend=store_url, clock=ManualClock(), **kwargs)
        action(c)
    assert type(caught.value) is expected, f"{case}: {type(caught.value).__name__}"


def test_a_client_that_is_no_name_is_dead_on_every_store(store_url):
    c = Cluster(backend=store_url, clock=ManualClock())
    assert c.lockservice.is_alive(5) is False and c.lockservice.is_alive(None) is False


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1"])
def test_a_server_that_is_not_there_is_store_unavailable(url):
    with pytest.raises(StoreUnavailable) as caught:
        Cluster(backend=f"{url}?timeout=0.5")
    assert type(caught.value) is StoreUnavailable


@pytest.mark.parametrize("url", ["memcached://127.0.0.1:1", "redis://127.0.0.1:1/x",
                                 "redis://127.0.0.1:1?prefix=a b", "redis://127.0.0.1:1?wait=-1"])
def test_a_url_that_cannot_name_a_store_is_a_value_error(url):
    with pytest.raises(ValueError, match="backend"):
        Cluster(backend=url)
