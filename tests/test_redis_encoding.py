"""Issue 13 on Redis: unambiguous keys, exact timestamps and values, clear failures.

Each test pins one defect found against the Redis store, and runs on the
in-memory store too where the behaviour is the same contract:

- keys: table "a", row "b/c" and table "a/b", row "c" were one Redis key;
  names holding every separator now stay apart;
- timestamps: Lua printed 10**14 as ``1e+14`` and lost digits past 2**53, so
  a conditional commit raised (after the commit point) and a conflict raised
  instead of returning False; ``first_timestamp=2**63-1`` failed part-way
  through a commit with a raw ``ResponseError``;
- values: every value ``check_value`` accepts comes back equal and typed;
  what no store can hold is refused at ``set`` on every store, never in the
  middle of a commit;
- a server that is not Redis (garbage, an error, silence, a closed port)
  gives ``StoreUnavailable``, never a raw ``redis`` exception.
"""
import math
import socket
import socketserver
import threading
import time
from itertools import product

import pytest

from percolator_ref import (Bigtable, ClientCrash, Cluster, ManualClock, StoreUnavailable,
                            TransactionClosed, Write)
from percolator_ref.harness.redis_server import free_port
from percolator_ref.model import MAX_TIMESTAMP
from percolator_ref.stores import url_with
from percolator_ref.stores.redis_store import RedisBigtable

STORES = ["memory", pytest.param("redis", marks=pytest.mark.redis),
          pytest.param("redis-conditional", marks=pytest.mark.redis)]


@pytest.fixture(params=STORES)
def store_url(request):
    """None (in memory), or a Redis URL in one of the two round-trip modes."""
    if request.param == "memory":
        return None
    url = request.getfixturevalue("redis_url")
    return url_with(url, conditional=1) if request.param == "redis-conditional" else url


def cluster_on(url, first_timestamp=1, suffix=""):
    if url is not None and suffix:
        url = f"{url}-{suffix}"
    return Cluster(first_timestamp=first_timestamp, clock=ManualClock(), backend=url)


# -- keys ------------------------------------------------------------------------------

SEPARATORS = ["/", "{", "}", ":", " ", "%", "%2F", "\\", "*", "?", "[", "]", "-", "+", "\x01",
              "é", "日本", "🙂", "\u200b", "\uffff", "\U0010ffff"]
TABLES = ["a", "a/b", "a{", "a}", "{a}", "a%2Fb", "a:b", "a b", "é/🙂"]
ROWS = ["c", "b/c", "b", "/", "{", "}", "}{", "%", "%2F", "%252F", "c:d", " "] + \
       [f"r{s}x" for s in SEPARATORS]
COLUMNS = ["v", "v/w", "{v}", "v w", "é", "v%2F", "v*"]


def test_cells_whose_names_contain_every_separator_stay_apart(store_url):
    """Table 'a' row 'b/c' and table 'a/b' row 'c' (and every other pair) are different cells."""
    cells = [(t, r, COLUMNS[i % len(COLUMNS)]) for i, (t, r) in enumerate(product(TABLES, ROWS))]
    cells += [("a", "b/c", "same"), ("a/b", "c", "same"), ("a%2Fb", "c", "same")]
    cluster = cluster_on(store_url)
    t = cluster.begin()
    for i, (table, row, column) in enumerate(cells):
        t.set(row, column, f"{i}:{table}|{row}|{column}", table=table)
        t.notify(row, column, table=table)
    assert t.commit() is True
    reader = cluster.begin()
    for i, (table, row, column) in enumerate(cells):
        assert reader.get(row, column, table=table) == f"{i}:{table}|{row}|{column}"
    for table in TABLES:
        expected = sorted((r, c, f"{i}:{t}|{r}|{c}") for i, (t, r, c) in enumerate(cells)
                          if t == table)
        assert reader.scan(table) == expected
    bt = cluster.bigtable
    assert bt.tables() == sorted(TABLES)
    assert list(bt.notifications()) == sorted(cells)
    memory = cluster_on(None)
    t = memory.begin()
    for i, (table, row, column) in enumerate(cells):
        t.set(row, column, f"{i}:{table}|{row}|{column}", table=table)
        t.notify(row, column, table=table)
    assert t.commit() is True
    assert bt.dump() == memory.bigtable.dump()
    for table, (start, end) in product(TABLES, [("b", "c"), ("/", "}"), ("%", "r")]):
        assert bt.rows(table, start, end) == memory.bigtable.rows(table, start, end)


@pytest.mark.redis
def test_row_keys_are_distinct_and_share_one_hash_tag(redis_url):
    bt = RedisBigtable(redis_url)
    keys = {(t, r): bt.row_keys(t, r) for t, r in product(TABLES, ROWS)}
    assert len({k[0] for k in keys.values()}) == len(keys)            # no two rows share a key
    for data, counts, lease in keys.values():
        tag = data[data.index("{") + 1: data.index("}")]
        assert tag and "/" in tag                                   # a real hash tag
        assert counts.startswith(data[:-1]) and lease.startswith(data[:-1])


# -- timestamps --------------------------------------------------------------------------

@pytest.mark.parametrize("first", [10 ** 14, 2 ** 53 - 2, 2 ** 53 + 1, 10 ** 18 + 7,
                                   MAX_TIMESTAMP - 7],
                         ids=["1e14", "2^53-2", "2^53+1", "1e18+7", "MAX-7"])
def test_large_timestamps_are_exact_and_a_conflict_returns_false(store_url, first):
    cluster = cluster_on(store_url, first)
    a, b = cluster.begin(), cluster.begin()
    a.set("Bob", "bal", 1)
    a.set("Joe", "bal", 2)
    b.set("Joe", "bal", 3)
    b.set("Bob", "bal", 4)
    assert a.commit() is True and a.commit_ts == first + 2
    assert b.commit() is False                    # a's write record is after b's start
    c, d = cluster.begin(), cluster.begin()
    c.set("Ann", "bal", 5)
    d.set("Ann", "bal", 6)
    with pytest.raises(ClientCrash):
        c.commit(crash_after="prewrite")
    assert d.commit() is False                    # c's lock (dead client): cleaned, aborted
    e = cluster.begin()
    e.set("Ann", "bal", 7)
    assert e.commit() is True and e.commit_ts == first + 6
    bt = cluster.bigtable
    assert bt.versions("default", "Bob", "bal:write") == [(first + 2, Write(first))]
    assert bt.versions("default", "Bob", "bal:data") == [(first, 1)]
    assert bt.versions("default", "Ann", "bal:write") == [(first + 6, Write(first + 5))]
    assert bt.versions("default", "Ann", "bal:data") == [(first + 5, 7)]
    assert [bt.versions("default", r, "bal:lock") for r in ("Bob", "Joe", "Ann")] == [[], [], []]
    last = cluster.begin()                        # first + 7: MAX_TIMESTAMP at the top
    assert last.start_ts == first + 7
    assert last.scan() == [("Ann", "bal", 7), ("Bob", "bal", 1), ("Joe", "bal", 2)]


@pytest.mark.redis
@pytest.mark.parametrize("conditional", [0, 1])
def test_the_last_timestamp_commits_exactly_and_then_the_oracle_refuses(redis_url, conditional):
    cluster = cluster_on(url_with(redis_url, conditional=conditional), MAX_TIMESTAMP - 1)
    t = cluster.begin()
    t.set("k", "v", "top")
    assert t.commit() is True and t.commit_ts == MAX_TIMESTAMP
    assert cluster.bigtable.versions("default", "k", "v:write") == \
        [(MAX_TIMESTAMP, Write(MAX_TIMESTAMP - 1))]
    with pytest.raises(StoreUnavailable, match="exhausted"):
        cluster.begin()
    with pytest.raises(StoreUnavailable, match="exhausted"):
        cluster.oracle.get_timestamps(3)
    assert cluster.oracle.peek() == MAX_TIMESTAMP + 1      # nothing was handed out


@pytest.mark.redis
@pytest.mark.parametrize("conditional", [0, 1])
def test_first_timestamp_max_commit_ends_aborted_not_half_way(redis_url, conditional):
    """start_ts = 2**63-1 leaves no commit timestamp: the commit aborts before its commit
    point (False, closed), nothing becomes visible, and the oracle says it is exhausted."""
    cluster = cluster_on(url_with(redis_url, conditional=conditional), MAX_TIMESTAMP)
    t = cluster.begin()
    assert t.start_ts == MAX_TIMESTAMP
    t.set("Bob", "bal", 1)
    t.set("Joe", "bal", 2)
    assert t.commit() is False
    assert t.status == "aborted" and t.commit_ts is None
    with pytest.raises(TransactionClosed):
        t.commit()
    bt = cluster.bigtable
    assert [bt.versions("default", r, "bal:write") for r in ("Bob", "Joe")] == [[], []]
    # the aborting commit erased its own locks and data (exactly at 2**63-1)
    assert [bt.versions("default", r, c) for r in ("Bob", "Joe")
            for c in ("bal:data", "bal:lock")] == [[], [], [], []]
    assert t.outcome() is False
    bt.write("default", "Ann", "bal:data", 5, MAX_TIMESTAMP)
    assert bt.versions("default", "Ann", "bal:data") == [(MAX_TIMESTAMP, 5)]   # exact


@pytest.mark.redis
def test_oracle_counter_near_max_never_moves_back(redis_url):
    """A second oracle on the same prefix with a smaller first_timestamp continues the
    counter; comparisons at 2**63-scale do not round (Lua doubles would)."""
    first = cluster_on(redis_url, MAX_TIMESTAMP - 100)
    assert first.begin().start_ts == MAX_TIMESTAMP - 100
    again = cluster_on(redis_url, MAX_TIMESTAMP - 101)
    assert again.begin().start_ts == MAX_TIMESTAMP - 99
    ahead = cluster_on(redis_url, MAX_TIMESTAMP - 50)
    assert ahead.begin().start_ts == MAX_TIMESTAMP - 50


# -- values ------------------------------------------------------------------------------

VALUES = ["", "plain", "nul\x00inside", "\x00", "é日本🙂\u200b\uffff\U0010ffff", "\r\n\t",
          "{a/b}:%2F", "s" * 10_000, b"", bytes(range(256)), b"\x00", True, False, 0, -1, 1,
          2 ** 53 + 1, MAX_TIMESTAMP, -(2 ** 64), 10 ** 4300 - 1, -(10 ** 4300 - 1), 0.0, -0.0,
          1.5, 0.1, 5e-324, 1.7976931348623157e308, float("inf"), float("-inf"), float("nan")]


def same(a, b) -> bool:
    """Equal and of the same type; NaN equals NaN, -0.0 differs from 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                     math.copysign(1, b))
    return a == b


def test_every_value_check_value_accepts_round_trips_exactly_and_typed(store_url):
    cluster = cluster_on(store_url)
    t = cluster.begin()
    for i, value in enumerate(VALUES):
        t.set(f"r{i:02d}", "v", value)
    assert t.commit() is True
    reader = cluster.begin()
    got = [reader.get(f"r{i:02d}", "v") for i in range(len(VALUES))]
    assert all(same(g, v) for g, v in zip(got, VALUES)), [
        (v, g) for g, v in zip(got, VALUES) if not same(g, v)]
    scanned = [value for _, _, value in reader.scan()]
    assert all(same(g, v) for g, v in zip(scanned, VALUES))
    bt = cluster.bigtable
    for i, value in enumerate(VALUES):           # the raw Bigtable operations too
        bt.write("raw", f"r{i:02d}", "v", value, 5)
        assert same(bt.read("raw", f"r{i:02d}", "v"), value)


BAD_INPUTS = [
    ("row", dict(row="a\x00b"), ValueError), ("table", dict(table="t\x00"), ValueError),
    ("column", dict(column="c\x00"), ValueError), ("row", dict(row="\ud800"), ValueError),
    ("column", dict(column="x\udfffy"), ValueError),
    ("value", dict(value="lone \ud800"), ValueError),
    ("value", dict(value=10 ** 4300), ValueError), ("value", dict(value=-(10 ** 4300)), ValueError),
    ("value", dict(value=None), TypeError), ("value", dict(value=[1]), TypeError),
]


@pytest.mark.parametrize("argument, bad, error", BAD_INPUTS,
                         ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(BAD_INPUTS)])
def test_input_no_store_can_hold_is_refused_at_set_on_every_store(store_url, argument, bad, error):
    cluster = cluster_on(store_url)
    t = cluster.begin()
    t.set("first", "v", 1)                        # the primary: must not be left half-done
    cell = dict(row="r", column="c", value="x", table="default") | bad
    with pytest.raises(error, match=argument):
        t.set(**cell)
    t.set("last", "v", 2)
    assert t.commit() is True
    assert cluster.begin().scan() == [("first", "v", 1), ("last", "v", 2)]


@pytest.mark.redis
def test_raw_store_refuses_what_it_cannot_hold_before_sending(redis_url):
    bt = RedisBigtable(redis_url)
    for value, error in [("\ud800", ValueError), (10 ** 4300, ValueError), (object(), TypeError)]:
        with pytest.raises(error, match="value"):
            bt.write("t", "r", "c:data", value, 1)
    for ts in (-1, MAX_TIMESTAMP + 1):
        with pytest.raises(ValueError, match="ts"):
            bt.write("t", "r", "c:data", 1, ts)
    with pytest.raises(ValueError, match="ts"):          # a bad ts inside a row transaction
        with bt.row_transaction("t", "r", step="custom") as rt:
            rt.write("a:data", 1, "fine")
            rt.write("b:data", MAX_TIMESTAMP + 1, "too late")
    assert bt.dump() == {} and bt.round_trips == 0        # nothing sent, nothing written


# -- a server that is not Redis ----------------------------------------------------------

class NotRedis(socketserver.ThreadingTCPServer):
    """A TCP listener on 127.0.0.1 that answers every connection with ``reply`` (or silence)."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, reply):
        self.reply = reply

        class Handler(socketserver.BaseRequestHandler):
            def handle(inner):
                inner.request.settimeout(3)
                try:
                    inner.request.recv(4096)
                    if reply is None:
                        time.sleep(2)                    # never answers
                    else:
                        inner.request.sendall(reply)
                except OSError:
                    pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self):
        return self.server_address[1]


GARBAGE = {"closes": b"", "http": b"HTTP/1.1 400 Bad Request\r\n\r\n",
           "binary": b"\xff\xfe\x00\x01garbage\r\n", "bad-utf8": b"+\xff\xfe\r\n",
           "error": b"-ERR I am not Redis\r\n", "integer": b":1\r\n",
           "short-bulk": b"$10\r\nab", "silence": None}


@pytest.mark.redis
@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_a_server_that_is_not_redis_gives_store_unavailable(kind, scheme):
    server = NotRedis(GARBAGE[kind])
    try:
        with pytest.raises(StoreUnavailable, match="127.0.0.1"):
            Cluster(backend=f"{scheme}://127.0.0.1:{server.port}/0?timeout=0.5")
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.redis
@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
def test_a_closed_port_gives_store_unavailable(scheme):
    port = free_port()
    with socket.socket() as probe:                       # nothing listens there
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    with pytest.raises(StoreUnavailable, match="unavailable"):
        Cluster(backend=f"{scheme}://127.0.0.1:{port}/0?timeout=0.5")


@pytest.mark.redis
def test_bad_prefix_is_refused_naming_it(redis_url):
    for prefix in ("a:b", "x*", "{t}", "", "a b"):
        with pytest.raises(ValueError, match="prefix"):
            RedisBigtable(url_with(redis_url, prefix=prefix))


def test_memory_store_is_the_reference_for_these_cells():
    """The comparisons above use the in-memory Bigtable as the reference: it keeps names apart."""
    bt = Bigtable()
    bt.write("a", "b/c", "x:data", 1, 1)
    bt.write("a/b", "c", "x:data", 2, 1)
    assert bt.dump() == {"a": {"b/c": {"x:data": [(1, 1)]}}, "a/b": {"c": {"x:data": [(1, 2)]}}}
