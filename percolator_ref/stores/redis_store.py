"""A Bigtable on a Redis server (or Redis Cluster): the same interface, real round trips.

``Cluster(backend="redis://127.0.0.1:6379/0")`` stores every Percolator row
in Redis; ``redis+cluster://host:port`` uses a Redis Cluster (any node as the
entry point). Query options: ``prefix=`` (key namespace, default ``pc``),
``lease_ms=`` (row lease, default 5000), ``timeout=`` (socket seconds, 5).

Layout (``P`` = prefix; a row's keys share the hash tag ``{table/row}`` so a
row lives on one node and a script may touch all of them):

- ``P:{table/row}:r``  hash ``column NUL ts`` -> tagged value (redis_codec);
- ``P:{table/row}:n``  hash ``column`` -> number of versions, and the row's
  version counter under the field ``NUL v``;
- ``P:{table/row}:L``  the row lease (owner token, with expiry);
- ``P:ix:table``       sorted set of the table's non-empty rows (lex order);
- ``P:tables``         sorted set of non-empty tables;
- ``P:notify``         sorted set ``table NUL row NUL column``: the notify index.

How a row transaction stays atomic (the design choice)
------------------------------------------------------
A row transaction's body is ordinary Python that reads, decides, then
buffers writes; it runs once, so it cannot be retried after a failed
optimistic check. The store therefore uses a **short per-row lease** for
read-modify-write row transactions, and no lease where none is needed:

1. The row is fetched lazily, at the first ``read``/``versions``/``columns``,
   by one script. For the read-only steps (``get``, ``scan``,
   ``bigtable-read``) it is a plain atomic snapshot of the row (one round
   trip, no lease). For every other step the same script also takes the row
   lease (``SET NX PX`` semantics; busy -> back off and retry).
2. At the end of the ``with`` block the buffered writes and erases go to the
   server in one script that applies all or nothing. It refuses to apply
   unless (a) we still hold our lease, or (b) we took none and nobody else
   holds one (and, if we read without a lease, the row's version counter is
   unchanged). The same script releases the lease and (single node) keeps
   the table and notify indexes in step.

Every mutation of a row thus happens inside a script that checks the lease,
and a lease holder's reads and writes have nothing in between: single-row
atomicity under concurrent processes. Round trips: ``get``/``scan`` of a row
1, a blind write (``commit-secondary``, ``notify``, raw ``write``/``erase``)
1, a read-modify-write (``prewrite``, ``commit-primary``, cleanup) 2.

A client that dies holding a lease blocks that row only until the lease
expires; if a lease expires under a slow client its apply is refused
(:class:`StoreUnavailable`), never half-applied. A server that is down or
goes away raises :class:`~percolator_ref.errors.StoreUnavailable`; the
script is atomic, so a row is either fully applied or untouched. (As with
any remote store, a reply lost *after* the server applied the script leaves
the client unsure; the protocol's locks and lazy cleanup resolve that.)

In Redis Cluster mode the indexes live on other nodes than the row, so they
are updated by separate commands while the row lease is held (added before
the row is written, removed after it emptied): an index may briefly list an
empty row, never miss a non-empty one.
"""
from __future__ import annotations

import itertools
import json
import os
import threading
import time
from typing import Any, Callable, Iterator, Optional
from urllib.parse import parse_qs, urlparse

from sortedcontainers import SortedDict

from ..bigtable import NOTIFY_SUFFIX, RawCellOperations, RowTransaction, _check_ts
from ..errors import StoreUnavailable
from ..model import check_name as _check_name
from ..trace import Change, RowTransactionEvent, Tracer
from .redis_codec import decode, encode

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError:       # pragma: no cover - the package is in requirements.txt
    redis = None

READ_ONLY_STEPS = frozenset({"get", "scan", "bigtable-read"})
SEP = "\x00"
VERSION_FIELD = "\x00v"

_ENTER = """
-- KEYS: row, counts, lease.  ARGV: token, lease_ms, want_lease ('1'/'0')
if ARGV[3] == '1' then
  local cur = redis.call('GET', KEYS[3])
  if cur and cur ~= ARGV[1] then return {0, redis.call('PTTL', KEYS[3])} end
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
end
return {1, redis.call('HGETALL', KEYS[1]), redis.call('HGET', KEYS[2], '\\0v') or '0'}
"""

_APPLY = """
-- KEYS: row, counts, lease [, table index, tables, notify index]
-- ARGV: token, mode, expected version, table, row, keep_lease, then
--       (field, column, op, value) quadruples; op 'w' write, 'e' erase.
local token, mode = ARGV[1], ARGV[2]
local cur = redis.call('GET', KEYS[3])
local found = {}
if mode == 'lease' then
  if cur ~= token then return {-1} end
elseif mode == 'check' then
  -- a conditional mutation (paper 2.5): ARGV[3] is a JSON list of
  -- {column, min_ts, max_ts (-1: none), want_present}; checked in order, the
  -- first that fails stops everything (nothing applied)
  if cur then return {0, redis.call('PTTL', KEYS[3])} end
  local flat = redis.call('HGETALL', KEYS[1])
  for i, c in ipairs(cjson.decode(ARGV[3])) do
    local prefix, best, value = c[1] .. '\0', nil, false
    for j = 1, #flat, 2 do
      local f = flat[j]
      if string.sub(f, 1, #prefix) == prefix then
        local ts = tonumber(string.sub(f, #prefix + 1))
        if ts >= c[2] and (c[3] < 0 or ts <= c[3]) and (not best or ts > best) then
          best, value = ts, flat[j + 1]
        end
      end
    end
    found[#found + 1] = best and {tostring(best), value} or false
    if (best ~= nil) ~= c[4] then return {2, found} end
  end
else
  if cur then return {0, redis.call('PTTL', KEYS[3])} end
  if mode == 'version' and (redis.call('HGET', KEYS[2], '\\0v') or '0') ~= ARGV[3] then
    return {-2}
  end
end
local olds, notify = {}, {}
for i = 7, #ARGV, 4 do
  local f, col, op, v = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3]
  local old = redis.call('HGET', KEYS[1], f)
  if op == 'w' then
    redis.call('HSET', KEYS[1], f, v)
    if not old then redis.call('HINCRBY', KEYS[2], col, 1) end
  elseif old then
    redis.call('HDEL', KEYS[1], f)
    if redis.call('HINCRBY', KEYS[2], col, -1) <= 0 then redis.call('HDEL', KEYS[2], col) end
  end
  olds[#olds + 1] = old or false
  if string.sub(col, -7) == ':notify' then notify[col] = true end
end
redis.call('HINCRBY', KEYS[2], '\\0v', 1)
local empty = redis.call('EXISTS', KEYS[1]) == 0
local present = {}
for col, _ in pairs(notify) do
  local has = redis.call('HEXISTS', KEYS[2], col)
  present[#present + 1] = col
  present[#present + 1] = has
  if #KEYS > 3 then
    local member = ARGV[4] .. '\\0' .. ARGV[5] .. '\\0' .. string.sub(col, 1, -8)
    if has == 1 then redis.call('ZADD', KEYS[6], 0, member)
    else redis.call('ZREM', KEYS[6], member) end
  end
end
if #KEYS > 3 then
  if empty then
    redis.call('ZREM', KEYS[4], ARGV[5])
    if redis.call('ZCARD', KEYS[4]) == 0 then redis.call('ZREM', KEYS[5], ARGV[4]) end
  elseif #olds > 0 then
    redis.call('ZADD', KEYS[4], 0, ARGV[5])
    redis.call('ZADD', KEYS[5], 0, ARGV[4])
  end
end
if mode == 'lease' and ARGV[6] ~= '1' then redis.call('DEL', KEYS[3]) end
return {1, olds, empty and 1 or 0, present, found}
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_tokens = itertools.count(1)


def _parse_row(flat: list) -> dict:
    """HGETALL's flat ``[field, value, ...]`` -> ``{column: SortedDict(ts -> value)}``."""
    row: dict = {}
    for i in range(0, len(flat), 2):
        column, _, ts = flat[i].rpartition(SEP)
        row.setdefault(column, SortedDict())[int(ts)] = decode(flat[i + 1])
    return row


class RedisRowTransaction(RowTransaction):
    """A row transaction whose row is fetched from Redis at the first read."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._loaded = False
        self._leased = False
        self._version = None
        self._token = None
        self._checked = None          # the Change list once check_and_mutate applied

    def check_and_mutate(self, conditions) -> tuple:
        """Section 2.5's conditional mutation: the checks and the buffered writes in ONE script.

        ``conditions``: ``[(column, min_ts, max_ts, want_present), ...]``, checked in
        order on the server; each looks for the newest version of ``column``
        with ``min_ts <= ts <= max_ts`` (``max_ts`` None: no bound) and passes
        if one exists exactly when ``want_present``. The first failing check
        stops: nothing is applied and the buffered writes are dropped. Returns
        ``(ok, found)`` with ``found[i]`` the ``(ts, value)`` check ``i`` saw
        (None if absent or not evaluated). The checked columns count as reads,
        as if read with :meth:`read` in that order. Call once, last in the block.
        """
        if self._loaded or self._checked is not None:
            raise RuntimeError("check_and_mutate must be the only access in its row transaction")
        ok, found, changes = self.bigtable._check_and_apply(self, list(conditions))
        self._reads.extend(c[0] for c, _ in zip(conditions, range(len(found))))
        if not ok:
            self._mutations = []
        self._checked = changes
        return ok, found + [None] * (len(conditions) - len(found))

    def _load(self) -> None:
        if not self._loaded:
            self.bigtable._load(self)
            self._loaded = True

    def read(self, column: str, max_ts: Optional[int] = None, min_ts: int = 0):
        self._load()
        return super().read(column, max_ts, min_ts)

    def versions(self, column: str) -> list:
        self._load()
        return super().versions(column)

    def columns(self) -> list:
        self._load()
        return super().columns()

    def write(self, column: str, ts: int, value) -> None:
        self._check_not_checked()
        super().write(column, ts, value)

    def erase(self, column: str, ts: int) -> None:
        self._check_not_checked()
        super().erase(column, ts)

    def _check_not_checked(self) -> None:
        if self._checked is not None:
            raise RuntimeError("check_and_mutate already sent this row transaction's writes")


class RedisBigtable(RawCellOperations):
    """The Bigtable interface (see :class:`~percolator_ref.bigtable.Bigtable`) on Redis.

    ``url``: ``redis://host:port/db`` or ``redis+cluster://host:port`` with
    optional ``?prefix=...&lease_ms=...&timeout=...&conditional=1``.
    ``round_trips`` counts the script/command calls made by row transactions,
    ``server_calls`` every call to the server (oracle and liveness tokens
    included), for benchmarks. ``conditional_mutations`` (``conditional=1``):
    the transaction's prewrite and commit of the primary send their check and
    their writes in one script (:meth:`RedisRowTransaction.check_and_mutate`),
    one round trip instead of two.
    """

    def __init__(self, url: str, tracer: Optional[Tracer] = None):
        if redis is None:
            raise StoreUnavailable("the 'redis' Python package is not installed")
        self.server_calls = 0
        parsed = urlparse(url)
        options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        self.url = url
        self.cluster_mode = parsed.scheme == "redis+cluster"
        self.prefix = options.get("prefix", "pc")
        if not self.prefix or "{" in self.prefix or "}" in self.prefix:
            raise ValueError(f"backend prefix must be non-empty without braces, got {self.prefix!r}")
        try:
            self.lease_ms = int(options.get("lease_ms", 5000))
            timeout = float(options.get("timeout", 5))
        except ValueError:
            raise ValueError(f"backend lease_ms/timeout must be numbers, got {url!r}") from None
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 6379
        no_retry = Retry(NoBackoff(), 0)
        if self.cluster_mode:
            from redis.cluster import RedisCluster
            self.redis = self._guard(lambda: RedisCluster(
                host=host, port=port, decode_responses=True, socket_timeout=timeout,
                socket_connect_timeout=timeout))
        else:
            db = int((parsed.path or "/0").strip("/") or 0)
            self.redis = redis.Redis(host=host, port=port, db=db, decode_responses=True,
                                     socket_timeout=timeout, socket_connect_timeout=timeout,
                                     retry=no_retry, retry_on_error=[])
        self._enter_script = self.redis.register_script(_ENTER)
        self._apply_script = self.redis.register_script(_APPLY)
        self._release_script = self.redis.register_script(_RELEASE)
        self.tracer = tracer or Tracer()
        self.gate: Optional[Callable] = None
        self.latency = 0.0
        self.round_trips = 0
        self.conditional_mutations = options.get("conditional", "0") in ("1", "true", "yes")
        self._owner = f"{os.uname().nodename}:{os.getpid()}:{id(self):x}"
        self._counter_lock = threading.Lock()
        self._guard(self.redis.ping)

    # -- plumbing ----------------------------------------------------------
    def _guard(self, call: Callable, *args, **kwargs):
        """Run one Redis call; connection problems become StoreUnavailable."""
        self.server_calls += 1
        try:
            return call(*args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                redis.exceptions.ClusterDownError, OSError) as e:
            raise StoreUnavailable(f"Redis store at {self.url} is unavailable: {e}") from e
        except redis.exceptions.RedisError as e:
            if "MASTERDOWN" in str(e) or "LOADING" in str(e) or "CLUSTERDOWN" in str(e):
                raise StoreUnavailable(f"Redis store at {self.url} is unavailable: {e}") from e
            raise

    def _trip(self, script, keys, args):
        with self._counter_lock:
            self.round_trips += 1
        return self._guard(script, keys=keys, args=args)

    def _row_keys(self, table: str, row: str) -> list:
        tag = f"{self.prefix}:{{{table}/{row}}}"
        return [f"{tag}:r", f"{tag}:n", f"{tag}:L"]

    def _index_keys(self, table: str) -> list:
        return [f"{self.prefix}:ix:{table}", f"{self.prefix}:tables", f"{self.prefix}:notify"]

    @staticmethod
    def _check_names(table: str, row: str) -> None:
        _check_name(table, "table")
        _check_name(row, "row")
        for name, value in (("table", table), ("row", row)):
            if SEP in value:
                raise ValueError(f"{name} must not contain NUL characters on Redis, got {value!r}")

    # -- row transactions ----------------------------------------------------
    def row_transaction(self, table: str, row: str, *, client: Optional[str] = None,
                        step: str = "row-transaction",
                        after: Optional[Callable] = None) -> RedisRowTransaction:
        """A single-row transaction on ``table``/``row`` (a context manager), as in Bigtable."""
        self._check_names(table, row)
        return RedisRowTransaction(self, table, row, client, step, after)

    def _enter(self, rt: RedisRowTransaction) -> None:
        self._admit(rt)
        rt._token = f"{self._owner}:{next(_tokens)}"

    def _wait(self, what: str, attempt: int, pttl, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise StoreUnavailable(f"Redis store at {self.url}: {what} stayed busy "
                                   f"past {self.lease_ms * 3} ms")
        delay = min(0.0005 * (2 ** min(attempt, 6)), 0.05)
        if isinstance(pttl, int) and pttl > 0:
            delay = min(delay, pttl / 1000)
        time.sleep(delay)

    def _load(self, rt: RedisRowTransaction, want_lease: Optional[bool] = None) -> None:
        """Fetch the row (one script); take the lease unless the step is read-only."""
        if want_lease is None:
            want_lease = self.cluster_mode or rt.step not in READ_ONLY_STEPS
        keys = self._row_keys(rt.table, rt.row)
        deadline = time.monotonic() + self.lease_ms * 3 / 1000
        for attempt in itertools.count():
            reply = self._trip(self._enter_script, keys,
                               [rt._token, self.lease_ms, "1" if want_lease else "0"])
            if reply[0] == 1:
                break
            self._wait(f"row {rt.table}/{rt.row}'s lease", attempt, reply[1], deadline)
        rt._row = _parse_row(reply[1])
        rt._version = reply[2]
        rt._leased = want_lease

    def _exit(self, rt: RedisRowTransaction, commit: bool) -> None:
        if rt._checked is not None:     # check_and_mutate already ran: report what it applied
            changes = rt._checked
        elif not commit or not rt._mutations:
            self._release(rt)
            if not commit:
                return
            changes = []
        else:
            try:
                changes = self._apply(rt)
            except BaseException:
                try:
                    self._release(rt)
                except StoreUnavailable:
                    pass                      # the lease expires on its own
                raise
        erases = sum(1 for m in rt._mutations if m[2] is None)
        seq = self.tracer.count(rt.step, len(rt._reads), len(rt._mutations) - erases, erases)
        if self.tracer.active:
            self.tracer.emit(RowTransactionEvent(
                seq, rt.client, rt.table, rt.row, rt.step,
                tuple(dict.fromkeys(rt._reads)), tuple(changes), rt.note))

    def _release(self, rt: RedisRowTransaction) -> None:
        if rt._leased:
            rt._leased = False
            self._trip(self._release_script, [self._row_keys(rt.table, rt.row)[2]], [rt._token])

    def _apply(self, rt: RedisRowTransaction) -> list:
        """Apply the buffered mutations in one script; returns the Change list."""
        if self.cluster_mode and not rt._leased:
            self._load(rt, want_lease=True)          # cluster: every mutation under the lease
        try:
            if self.cluster_mode:
                self._cluster_index_add(rt)
            reply = self._apply_with_retry(rt)
            if self.cluster_mode:
                self._cluster_index_remove(rt, reply)
        finally:
            if self.cluster_mode:
                self._release(rt)
        rt._leased = False
        return self._changes(rt, reply)

    @staticmethod
    def _changes(rt: RedisRowTransaction, reply: list) -> list:
        """The Change list of an applied script (erasing an absent version is no change)."""
        changes = []
        for (column, ts, value), old in zip(rt._mutations, reply[1]):
            old = decode(old) if old is not None else None
            if value is None and old is None:
                continue
            changes.append(Change(column, ts, old, value))
        return changes

    def _check_and_apply(self, rt: RedisRowTransaction, conditions: list) -> tuple:
        """One script: check ``conditions``, apply the buffered mutations if all pass.

        Returns ``(ok, found, changes)``. On a Redis Cluster (indexes on other
        nodes) the row is loaded under the lease, checked here and applied as
        usual: correct, but without the saved round trip.
        """
        for column, min_ts, max_ts, want in conditions:
            _check_name(column, "column")
            _check_ts(min_ts, "min_ts")
            if max_ts is not None:
                _check_ts(max_ts, "max_ts")
        if self.cluster_mode:
            return self._check_client_side(rt, conditions)
        spec = json.dumps([[c, lo, -1 if hi is None else hi, bool(w)]
                           for c, lo, hi, w in conditions])
        reply = self._apply_with_retry(rt, mode="check", check=spec)
        found = [None if f is None else (int(f[0]), decode(f[1])) for f in reply[-1]]
        if reply[0] == 2:
            return False, found, []
        return True, found, self._changes(rt, reply)

    def _check_client_side(self, rt: RedisRowTransaction, conditions: list) -> tuple:
        mutations, rt._mutations = rt._mutations, []
        rt._load()
        found = []
        for column, min_ts, max_ts, want in conditions:
            hit = RowTransaction.read(rt, column, max_ts, min_ts)
            rt._reads.pop()                     # check_and_mutate records the reads itself
            found.append(hit)
            if (hit is not None) != bool(want):
                self._release(rt)
                return False, found, []
        rt._mutations = mutations
        if not mutations:
            self._release(rt)
            return True, found, []
        return True, found, self._apply(rt)

    def _apply_with_retry(self, rt: RedisRowTransaction, mode: Optional[str] = None,
                          check: str = "") -> list:
        mode = mode or ("lease" if rt._leased else ("version" if rt._loaded else "free"))
        keys = self._row_keys(rt.table, rt.row)
        if not self.cluster_mode:
            keys += self._index_keys(rt.table)
        args = [rt._token, mode, check or rt._version or "0", rt.table, rt.row,
                "1" if self.cluster_mode else "0"]
        for column, ts, value in rt._mutations:
            args += [f"{column}{SEP}{ts}", column, "e" if value is None else "w",
                     "" if value is None else encode(value)]
        deadline = time.monotonic() + self.lease_ms * 3 / 1000
        for attempt in itertools.count():
            reply = self._trip(self._apply_script, keys, args)
            if reply[0] in (1, 2):              # 2: a conditional mutation's check failed
                return reply
            if reply[0] == -1:
                raise StoreUnavailable(f"row {rt.table}/{rt.row}: the row lease expired before "
                                       f"the row transaction applied; nothing was written")
            if reply[0] == -2:
                raise StoreUnavailable(f"row {rt.table}/{rt.row} changed after a read-only "
                                       f"step {rt.step!r} read it; its writes were not applied")
            self._wait(f"row {rt.table}/{rt.row}'s lease", attempt, reply[1], deadline)

    def _cluster_index_add(self, rt: RedisRowTransaction) -> None:
        """Cluster mode, lease held: list the row (and new notifications) before writing."""
        if all(value is None for _, _, value in rt._mutations):
            return
        ix, tables, notify = self._index_keys(rt.table)
        self._guard(self.redis.zadd, ix, {rt.row: 0})
        self._guard(self.redis.zadd, tables, {rt.table: 0})
        for column, _, value in rt._mutations:
            if value is not None and column.endswith(NOTIFY_SUFFIX):
                member = SEP.join((rt.table, rt.row, column[: -len(NOTIFY_SUFFIX)]))
                self._guard(self.redis.zadd, notify, {member: 0})

    def _cluster_index_remove(self, rt: RedisRowTransaction, reply: list) -> None:
        """Cluster mode, lease still held: unlist what the apply emptied."""
        ix, tables, notify = self._index_keys(rt.table)
        present = reply[3]
        for i in range(0, len(present), 2):
            if present[i + 1] == 0:
                member = SEP.join((rt.table, rt.row, present[i][: -len(NOTIFY_SUFFIX)]))
                self._guard(self.redis.zrem, notify, member)
        if reply[2] == 1:
            self._guard(self.redis.zrem, ix, rt.row)

    def _check_value(self, value: Any) -> None:
        encode(value)                      # TypeError before anything is sent

    # -- inspection (not counted) -------------------------------------------
    def _fetch_row(self, table: str, row: str) -> dict:
        return _parse_row(self._flat(self._guard(self.redis.hgetall, self._row_keys(table, row)[0])))

    @staticmethod
    def _flat(mapping: dict) -> list:
        return [x for kv in mapping.items() for x in kv]

    def versions(self, table: str, row: str, bigtable_column: str) -> list:
        """``[(ts, value), ...]`` newest first; [] if the cell is empty."""
        versions = self._fetch_row(table, row).get(bigtable_column)
        return list(reversed(versions.items())) if versions else []

    def tables(self) -> list:
        return [t for t in self._guard(self.redis.zrange, f"{self.prefix}:tables", 0, -1)
                if not self.cluster_mode or self.rows(t)]

    def rows(self, table: str, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """Row keys of ``table`` in ``[start_row, end_row)``, sorted (one round trip)."""
        lo = "-" if start_row is None else f"[{start_row}"
        hi = "+" if end_row is None else f"({end_row}"
        if start_row is not None and end_row is not None and end_row <= start_row:
            return []
        rows = self._guard(self.redis.zrangebylex, self._index_keys(table)[0], lo, hi)
        if self.cluster_mode:       # the index may briefly list an emptied row
            rows = [r for r in rows if self._guard(self.redis.exists, self._row_keys(table, r)[0])]
        return rows

    def columns(self, table: str, row: str) -> list:
        return sorted(self._fetch_row(table, row))

    def dump(self, table: Optional[str] = None) -> dict:
        """``{table: {row: {column: [(ts, value), ...]}}}`` newest first."""
        names = [table] if table is not None else self.tables()
        out = {}
        for t in names:
            rows = {}
            for r in self.rows(t):
                cols = self._fetch_row(t, r)
                if cols:
                    rows[r] = {c: list(reversed(v.items())) for c, v in cols.items()}
            if rows:
                out[t] = rows
        return out

    def notifications(self, start: Optional[tuple] = None) -> Iterator[tuple]:
        """Pending ``(table, row, column)`` notifications from ``start`` on (a copy)."""
        lo = "-" if start is None else "[" + SEP.join(start)
        members = self._guard(self.redis.zrangebylex, f"{self.prefix}:notify", lo, "+")
        return iter([tuple(m.split(SEP)) for m in members])

    # -- services shared through the same server ------------------------------
    def make_oracle(self, first_timestamp: int = 1):
        """A :class:`RedisTimestampOracle` on this server and prefix."""
        from .redis_services import RedisTimestampOracle
        return RedisTimestampOracle(self, first_timestamp)

    def make_lockservice(self, clock, ttl: float = 10.0):
        """A :class:`RedisLockService` on this server and prefix."""
        from .redis_services import RedisLockService
        return RedisLockService(self, clock, ttl)

    def flush(self) -> None:
        """Delete every key of this prefix (tests and benchmarks start clean)."""
        keys = self._guard(lambda: list(self.redis.scan_iter(match=f"{self.prefix}:*",
                                                             count=1000)))
        if self.cluster_mode:
            for k in keys:
                self._guard(self.redis.delete, k)
        else:
            for i in range(0, len(keys), 500):
                self._guard(self.redis.delete, *keys[i:i + 500])

    def close(self) -> None:
        self.redis.close()

    def __repr__(self):
        return f"RedisBigtable({self.url!r})"
