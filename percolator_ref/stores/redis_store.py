"""A Bigtable on a Redis server (or Redis Cluster): the same interface, real round trips.

``Cluster(backend="redis://127.0.0.1:6379/0")`` stores every Percolator row
in Redis; ``redis+cluster://host:port`` uses a Redis Cluster (any node as the
entry point). Query options: ``prefix=`` (key namespace, default ``pc``;
letters, digits, ``_``, ``.``, ``-``), ``lease_ms=`` (row lease, default
5000), ``timeout=`` (socket seconds, 5), ``conditional=1`` (see below),
``wait=N`` (with ``wait_timeout=`` ms, default 1000: see "Durability across a
failover" below).

Layout (``P`` = prefix). A row's keys share the hash tag ``{T/R}``, where
``T`` and ``R`` are the table and the row with ``%``, ``/``, ``{`` and ``}``
percent-escaped: every (table, row) pair has its own keys (table ``a``, row
``b/c`` is ``{a/b%2Fc}``; table ``a/b``, row ``c`` is ``{a%2Fb/c}``), and a
row lives on one Redis Cluster node, so one script may touch all its keys.

- ``P:{T/R}:r``  hash ``column NUL ts`` -> tagged value (redis_codec), the
  timestamp as 19 zero-padded decimal digits;
- ``P:{T/R}:n``  hash ``column`` -> number of versions, and the row's
  version counter under the field ``NUL v``;
- ``P:{T/R}:L``  the row lease (owner token, with expiry);
- ``P:ix:table``  sorted set of the table's non-empty rows (lex order);
- ``P:tables``    sorted set of non-empty tables;
- ``P:notify``    sorted set ``table NUL row NUL column``: the notify index
  (names never hold NUL: ``check_name`` refuses it on every store).

Timestamps are exact up to :data:`~percolator_ref.model.MAX_TIMESTAMP`
(``2**63 - 1``). The scripts never turn one into a Lua number (a double,
exact only up to ``2**53``): they compare the fixed-width digit strings.

How a row transaction stays atomic (the design choice)
------------------------------------------------------
A row transaction's body is ordinary Python that reads, decides, then
buffers writes; it runs once, so it cannot be retried after a failed
optimistic check. The store therefore uses a **short per-row lease** for
read-modify-write row transactions, and no lease where none is needed:

1. ``fetch_row``: the row is fetched lazily, at the first read, by one
   script. For the read-only steps (:func:`~percolator_ref.stores.steps.is_read_only`: the
   paper's reads and the read-only steps a variant declares)
   it is a plain atomic snapshot of the row (no lease; on a store that keeps
   TiKV's ``max_ts`` for async commit, it waits until no other client holds the
   row lease: :mod:`~percolator_ref.stores.redis_max_ts`). For every other step
   the same script also takes the row lease (``SET NX PX`` semantics; busy ->
   back off and retry).
2. ``end``: the buffered writes and erases go to the server in one script
   that applies all or nothing. It refuses to apply unless (a) we still hold
   our lease, or (b) we took none and nobody else holds one (and, if we read
   without a lease, the row's version counter is unchanged). The same script
   releases the lease and (single node) keeps the table and notify indexes
   in step.
3. ``check_and_write`` (the conditional mutation of paper §2.5, used by
   prewrite and by the commit of the primary): with ``conditional=0`` it is
   the base class's, reads then buffered writes (2 round trips); with
   ``conditional=1`` the checks and the writes travel in ONE script that
   checks under the same "nobody holds a lease" rule and applies only if
   every check holds (1 round trip). The cells, the return values and the
   trace are the same in both modes.

Round trips: ``get``/``scan`` of a row 1, a blind write (``commit-secondary``,
``notify``, raw ``write``/``erase``) 1, a read-modify-write (cleanup, and
prewrite / commit-primary with ``conditional=0``) 2, prewrite and
commit-primary with ``conditional=1`` 1.

A client that dies holding a lease blocks that row only until the lease
expires; if a lease expires under a slow client its apply is refused
(:class:`StoreUnavailable`), never half-applied. A server that is down,
goes away or is not Redis raises
:class:`~percolator_ref.errors.StoreUnavailable`, never a raw ``redis``
exception; the script is atomic, so a row is either fully applied or
untouched. (As with any remote store, a reply lost *after* the server
applied the script leaves the client unsure; the protocol's locks, lazy
cleanup and ``CommitOutcomeUnknown`` resolve that.)

In Redis Cluster mode the indexes live on other nodes than the row, so they
are updated by separate commands while the row lease is held (added before
the row is written, removed after it emptied): an index may list an empty row,
never miss a non-empty one. A notify entry left listing an empty column (its
row write refused, or its removal failed) is removed by the next row
transaction that reads the column and finds it empty (the observers' clearing
step does). There every mutation runs under the lease, so ``conditional=1``
saves no round trip.

Durability across a failover (``wait=N``)
-----------------------------------------
Redis replicates asynchronously: a master that dies may take with it writes
it had already acknowledged, and its replica, promoted, never saw them. With
``wait=N`` every write that a commit depends on (each applying row script,
the oracle's counter and, on a Redis Cluster, the row and notify indexes) is
followed, on the same connection, by ``WAIT N wait_timeout``: the store
returns only once ``N`` replicas hold the write, and raises
:class:`StoreUnavailable` if fewer acknowledged in time (the write is on the
master but not known to be durable, so it is not reported as done: a commit
point that meets it ends in ``CommitOutcomeUnknown``). Leases and liveness
tokens are not waited for: losing one only makes the protocol more careful.

Reads too: a master serves what it holds, including a write it has not yet
replicated (the writer still waiting in ``WAIT``, or a paused master that
wakes up after its replica took over and answers queued requests before it
learns it was demoted). With ``wait=N`` the row fetch of a step whose reads
are passed on (:func:`~percolator_ref.stores.steps.decides`: ``get``, ``scan``, a raw
read, the cleanup's decision at a primary, which lazy cleanup rolls forward on
and ``Transaction.outcome()`` reports, and every step a variant declares with
``decides=True``, such as ``check-txn-status`` or async commit's checks of the
primary and the secondaries) is therefore followed by a barrier
(:meth:`RedisBigtable.make_durable`: one write on the row's node, then
``WAIT N``; the replication stream is ordered, so a replica past the barrier
holds everything the read saw), and fails with :class:`StoreUnavailable`
rather than pass on what a failover could take back. The other steps' reads
only lead to aborts or re-check a lock the transaction wrote durably itself.
"""
from __future__ import annotations

import itertools
import os
import re
import threading
import time
from typing import Any, Callable, Iterator, Optional
from urllib.parse import parse_qs, urlparse

from sortedcontainers import SortedDict

from ..bigtable import NOTIFY_SUFFIX, RowTransaction, report
from ..errors import StoreUnavailable
from ..model import check_name
from .raw import RawCellOperations, check_ts
from ..step import Step
from .steps import decides, is_read_only
from ..trace import Change, Tracer
from .redis_codec import decode, encode

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError:       # pragma: no cover - the package is in requirements.txt
    redis = None

SEP = "\x00"
TS_DIGITS = 19                          # len(str(MAX_TIMESTAMP)): timestamps as fixed-width text
PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.\-]+")
_ESCAPES = str.maketrans({"%": "%25", "/": "%2F", "{": "%7B", "}": "%7D"})

_FETCH = """
-- KEYS: row, counts, lease.  ARGV: token, lease_ms, lease ('1' take it, 'w' wait
-- until nobody else holds it but take none, '0' ignore it)
if ARGV[3] ~= '0' then
  local cur = redis.call('GET', KEYS[3])
  if cur and cur ~= ARGV[1] then return {0, redis.call('PTTL', KEYS[3])} end
  if ARGV[3] == '1' then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2]) end
end
return {1, redis.call('HGETALL', KEYS[1]), redis.call('HGET', KEYS[2], '\\0v') or '0'}
"""

_APPLY = """
-- KEYS: row, counts, lease [, table index, tables, notify index]
-- ARGV: token, mode ('lease' / 'version' / 'free'), expected version, table, row,
--       keep_lease, n, then n checks (column, min ts, max ts or '', '1' must
--       exist / '0' must not), then (field, column, op, value) per mutation;
--       op 'w' write, 'e' erase.  Timestamps are 19-digit strings, compared as
--       strings: a Lua number would lose every digit past 2^53.
local token, mode = ARGV[1], ARGV[2]
local cur = redis.call('GET', KEYS[3])
if mode == 'lease' then
  if cur ~= token then return {-1} end
elseif cur then
  return {0, redis.call('PTTL', KEYS[3])}
elseif mode == 'version' and (redis.call('HGET', KEYS[2], '\\0v') or '0') ~= ARGV[3] then
  return {-2}
end
local n, found = tonumber(ARGV[7]), {}
if n > 0 then
  -- a conditional mutation (paper 2.5): checked in order, the first that
  -- fails stops everything (nothing applied)
  local flat = redis.call('HGETALL', KEYS[1])
  for i = 8, 7 + 4 * n, 4 do
    local prefix, lo, hi = ARGV[i] .. '\\0', ARGV[i + 1], ARGV[i + 2]
    local best, value = nil, false
    for j = 1, #flat, 2 do
      local f = flat[j]
      if #f == #prefix + 19 and string.sub(f, 1, #prefix) == prefix then
        local ts = string.sub(f, #prefix + 1)
        if ts >= lo and (hi == '' or ts <= hi) and (not best or ts > best) then
          best, value = ts, flat[j + 1]
        end
      end
    end
    found[#found + 1] = best and {best, value} or false
    if (best ~= nil) ~= (ARGV[i + 3] == '1') then return {2, found} end
  end
end
local olds, notify = {}, {}
for i = 8 + 4 * n, #ARGV, 4 do
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


def escape(name: str) -> str:
    """``name`` with ``%``, ``/``, ``{`` and ``}`` percent-escaped (reversible, brace-free)."""
    return name.translate(_ESCAPES)


def ts_text(ts: int) -> str:
    """A timestamp as fixed-width text: string order is numeric order up to MAX_TIMESTAMP."""
    return f"{ts:0{TS_DIGITS}d}"


def parse_row(flat: list) -> dict:
    """HGETALL's flat ``[field, value, ...]`` -> ``{column: SortedDict(ts -> value)}``."""
    row: dict = {}
    for i in range(0, len(flat), 2):
        column, _, ts = flat[i].rpartition(SEP)
        row.setdefault(column, SortedDict())[int(ts)] = decode(flat[i + 1])
    return row


def mutation_args(mutations) -> list:
    """The script arguments of buffered mutations; ValueError/TypeError before anything is sent."""
    args = []
    for column, ts, value in mutations:
        check_ts(ts)
        args += [f"{column}{SEP}{ts_text(ts)}", column, "e" if value is None else "w",
                 "" if value is None else encode(value)]
    return args


def condition_args(conditions) -> list:
    """The script arguments of :class:`~percolator_ref.bigtable.Condition` s (exact timestamps)."""
    args = [str(len(conditions))]
    for c in conditions:
        check_ts(c.min_ts, "min_ts")
        if c.max_ts is not None:
            check_ts(c.max_ts, "max_ts")
        args += [c.column, ts_text(c.min_ts), "" if c.max_ts is None else ts_text(c.max_ts),
                 "1" if c.present else "0"]
    return args


class RedisRowTransaction(RowTransaction):
    """A row transaction on Redis: the row is fetched at the first read (see the module doc).

    With ``conditional=1``, a :meth:`check_and_write` that comes first in its
    row transaction (nothing read or buffered yet) sends the checks and the
    writes in one script and applies them at once: call it last in the block.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.token: Optional[str] = None      # this row transaction's lease token
        self.leased = False                   # do we hold the row lease?
        self.row_version: Optional[str] = None   # the row's version counter when fetched
        self.applied: Optional[list] = None   # Changes a one-script check_and_write applied
        self.applied_count = 0                # how many mutations that script sent

    def check_and_write(self, conditions, writes) -> tuple:
        """As :meth:`RowTransaction.check_and_write`, in one script when the store can."""
        conditions, writes = list(conditions), list(writes)
        if not self.store.sends_together(self, conditions):
            return super().check_and_write(conditions, writes)
        ok, found, changes = self.store.check_and_apply(self, conditions, writes)
        self.columns_read.extend(c.column for c in conditions[:len(found)])
        if ok:
            self.mutations.extend(writes)
            self.applied, self.applied_count = changes, len(self.mutations)
        return ok, found


class RedisBigtable(RawCellOperations):
    """The Bigtable interface (see :class:`~percolator_ref.bigtable.Bigtable`) on Redis.

    ``url``: ``redis://host:port/db`` or ``redis+cluster://host:port`` with
    optional ``?prefix=...&lease_ms=...&timeout=...&conditional=1``.
    ``interceptors`` run around every row transaction, as on every store.
    ``round_trips`` counts the script calls made by row transactions,
    ``server_calls`` every call to the server (oracle and liveness tokens
    included), for benchmarks. ``conditional_mutations`` (``conditional=1``):
    prewrite and the commit of the primary send their checks and their writes
    in one script (:meth:`RedisRowTransaction.check_and_write`).
    """

    def __init__(self, url: str, tracer: Optional[Tracer] = None):
        if redis is None:
            raise StoreUnavailable("the 'redis' Python package is not installed")
        self.url = url
        self.tracer = tracer or Tracer()
        self.interceptors: list = []
        self.round_trips = self.server_calls = 0
        self.reads_wait_for_leases = False     # order_reads_after_row_writes() sets it
        self._counter_lock = threading.Lock()
        options = self._parse_options(url)
        self.redis = self._connect(urlparse(url), options)
        self._fetch_script = self.redis.register_script(_FETCH)
        self._apply_script = self.redis.register_script(_APPLY)
        self._release_script = self.redis.register_script(_RELEASE)
        self._owner = f"{os.uname().nodename}:{os.getpid()}:{id(self):x}"
        if self._handshake(self.redis.ping) is not True:
            raise StoreUnavailable(f"the server at {url} did not answer PING as Redis does")

    def _parse_options(self, url: str) -> dict:
        parsed = urlparse(url)
        query = parse_qs(parsed.query, keep_blank_values=True)
        options = {k: v[-1] for k, v in query.items()}
        self.cluster_mode = parsed.scheme == "redis+cluster"
        self.prefix = options.get("prefix", "pc")
        if not PREFIX_PATTERN.fullmatch(self.prefix):
            raise ValueError(f"backend prefix must be letters, digits, '_', '.' or '-', "
                             f"got {self.prefix!r}")
        try:
            self.lease_ms = int(options.get("lease_ms", 5000))
            self.timeout = float(options.get("timeout", 5))
            db = int((parsed.path or "/0").strip("/") or 0)
        except ValueError:
            raise ValueError(f"backend lease_ms/timeout/db must be numbers, got {url!r}") from None
        self.conditional_mutations = options.get("conditional", "0") in ("1", "true", "yes")
        try:
            self.wait_replicas = int(options.get("wait", 0))
            self.wait_timeout_ms = int(options.get("wait_timeout", 1000))
        except ValueError:
            raise ValueError(f"backend wait/wait_timeout must be ints, got {url!r}") from None
        if self.wait_replicas < 0 or self.wait_timeout_ms < 1:
            raise ValueError(f"backend wait must be >= 0 and wait_timeout >= 1 ms, got {url!r}")
        options["db"] = db
        return options

    def _connect(self, parsed, options: dict):
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 6379
        timeouts = dict(socket_timeout=self.timeout, socket_connect_timeout=self.timeout)
        if self.cluster_mode:
            from redis.cluster import RedisCluster
            return self._handshake(lambda: RedisCluster(host=host, port=port,
                                                        decode_responses=True, **timeouts))
        return redis.Redis(host=host, port=port, db=options["db"], decode_responses=True,
                           retry=Retry(NoBackoff(), 0), retry_on_error=[], **timeouts)

    # -- plumbing ----------------------------------------------------------
    def call(self, fn: Callable, *args, **kwargs):
        """Run one call to the server; any failure of the server becomes StoreUnavailable.

        Also used by the oracle and the lock service on the same server
        (:mod:`~percolator_ref.stores.redis_services`).
        """
        with self._counter_lock:
            self.server_calls += 1
        try:
            return fn(*args, **kwargs)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException,
                OSError, UnicodeDecodeError) as e:
            raise StoreUnavailable(f"Redis store at {self.url} is unavailable or is not "
                                   f"a Redis server: {type(e).__name__}: {e}") from e

    def _handshake(self, fn: Callable):
        """The first exchange with the server: a reply that breaks the client library in
        any way (it is not speaking Redis) is StoreUnavailable too."""
        try:
            return self.call(fn)
        except StoreUnavailable:
            raise
        except Exception as e:
            raise StoreUnavailable(f"the server at {self.url} is not a Redis server: "
                                   f"{type(e).__name__}: {e}") from e

    def _trip(self, script, keys, args, durable: bool = False):
        with self._counter_lock:
            self.round_trips += 1
        if durable:
            return self.call_durably(keys[0], lambda client: script(keys=keys, args=args,
                                                                    client=client))
        return self.call(script, keys=keys, args=args)

    def call_durably(self, key: str, command: Callable):
        """``command(client)``: one write to the node holding ``key``; with ``wait=N``, then
        ``WAIT N wait_timeout`` on the same connection (see "Durability across a failover").

        Returns the write's reply. Raises :class:`StoreUnavailable` if the server
        fails or fewer than ``N`` replicas acknowledged the write in time.
        """
        if not self.wait_replicas:
            return self.call(command, self.redis)
        for attempt in range(3):
            try:
                replies = self.call(self._write_then_wait, key, command)
                break
            except StoreUnavailable as e:
                if not self.cluster_mode:
                    raise
                self._refresh_slots()            # a failover may have moved the slot
                if attempt == 2 or not isinstance(e.__cause__, redis.exceptions.MovedError):
                    raise                        # (MOVED: refused, nothing applied: retry)
        if replies[-1] < self.wait_replicas:
            raise StoreUnavailable(
                f"Redis store at {self.url}: only {replies[-1]} of {self.wait_replicas} "
                f"replica(s) acknowledged a write within {self.wait_timeout_ms} ms; it is on "
                f"the master but not known to survive a failover")
        return replies[0]

    def _write_then_wait(self, key: str, command: Callable) -> list:
        client = self.redis
        if self.cluster_mode:
            client = self.redis.get_redis_connection(self.redis.get_node_from_key(key))
        with client.pipeline(transaction=False) as pipe:
            command(pipe)
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
            return pipe.execute()

    def _refresh_slots(self) -> None:
        try:
            self.redis.nodes_manager.initialize()
        except Exception:       # noqa: BLE001 - best effort: the next call retries
            pass

    def row_keys(self, table: str, row: str) -> list:
        """The row's data, version-count and lease keys (one hash tag, see the module doc)."""
        tag = f"{self.prefix}:{{{escape(table)}/{escape(row)}}}"
        return [f"{tag}:r", f"{tag}:n", f"{tag}:L"]

    def index_keys(self, table: str) -> list:
        """The table's row index, the table list and the notify index."""
        return [f"{self.prefix}:ix:{table}", f"{self.prefix}:tables", f"{self.prefix}:notify"]

    def _wait(self, what: str, attempt: int, pttl, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise StoreUnavailable(f"Redis store at {self.url}: {what} stayed busy "
                                   f"past {self.lease_ms * 3} ms")
        delay = min(0.0005 * (2 ** min(attempt, 6)), 0.05)
        if isinstance(pttl, int) and pttl > 0:
            delay = min(delay, pttl / 1000)
        time.sleep(delay)

    # -- row transactions: begin / fetch_row / end ---------------------------
    def row_transaction(self, table: str, row: str, *, client: Optional[str] = None,
                        step: str = Step.ROW_TRANSACTION, interceptors=()) -> RedisRowTransaction:
        """A single-row transaction on ``table``/``row`` (a context manager), as in Bigtable."""
        check_name(table, "table")
        check_name(row, "row")
        return RedisRowTransaction(self, table, row, client, step, interceptors)

    def begin(self, rt: RedisRowTransaction) -> None:
        """Nothing crosses the network yet: the row is fetched at the first read."""
        rt.token = f"{self._owner}:{next(_tokens)}"

    def fetch_row(self, rt: RedisRowTransaction) -> dict:
        """One script: the row's versions (and the lease, unless the step is read-only).

        With ``wait=N`` a step whose reads are passed on (:func:`~percolator_ref.stores.steps.decides`)
        then waits until what
        it read is on N replicas (:meth:`make_durable`): what it passes on is never
        a write that a failover can lose (see "Durability across a failover")."""
        row = parse_row(self._fetch(rt, self.cluster_mode or not is_read_only(rt.step)))
        if decides(rt.step):
            self.make_durable(rt.table, rt.row)
        return row

    def _fetch(self, rt: RedisRowTransaction, want_lease: bool) -> list:
        keys = self.row_keys(rt.table, rt.row)
        deadline = time.monotonic() + self.lease_ms * 3 / 1000
        for attempt in itertools.count():
            lease = "1" if want_lease else ("w" if self.reads_wait_for_leases else "0")
            reply = self._trip(self._fetch_script, keys, [rt.token, self.lease_ms, lease])
            if reply[0] == 1:
                break
            self._wait(f"row {rt.table}/{rt.row}'s lease", attempt, reply[1], deadline)
        rt.row_version, rt.leased = reply[2], want_lease
        return reply[1]

    def end(self, rt: RedisRowTransaction, commit: bool) -> None:
        """Apply the buffered mutations in one script (if ``commit``), report them, release."""
        if rt.applied is not None:              # a one-script check_and_write already applied
            self._release(rt)
            if len(rt.mutations) != rt.applied_count:
                raise RuntimeError("writes buffered after a one-script check_and_write are not "
                                   "applied: call check_and_write last in its row transaction")
            report(self.tracer, rt, rt.applied)
            return
        if not commit or not rt.mutations:
            if commit and self.cluster_mode and rt.leased:
                self._cluster_unlist_empty(rt)
            self._release(rt)
            if commit:
                report(self.tracer, rt, [])
            return
        try:
            changes = self._apply(rt)
        except BaseException:
            try:
                self._release(rt)
            except StoreUnavailable:
                pass                      # the lease expires on its own
            raise
        report(self.tracer, rt, changes)

    def _release(self, rt: RedisRowTransaction) -> None:
        if rt.leased:
            rt.leased = False
            self._trip(self._release_script, [self.row_keys(rt.table, rt.row)[2]], [rt.token])

    def _apply(self, rt: RedisRowTransaction) -> list:
        """Apply ``rt.mutations`` in one script; returns the Change list."""
        args = mutation_args(rt.mutations)           # refuses a bad timestamp before sending
        if self.cluster_mode and not rt.leased:
            self._fetch(rt, want_lease=True)         # cluster: every mutation under the lease
        try:
            if self.cluster_mode:
                self._cluster_index_add(rt)
            mode = "lease" if rt.leased else ("version" if rt.row_data is not None else "free")
            reply = self._run_apply(rt, mode, ["0"] + args)
            if self.cluster_mode:
                self._cluster_index_remove(rt, reply)
        finally:
            if self.cluster_mode:
                self._release(rt)
        rt.leased = False
        return self._changes(rt.mutations, reply[1])

    @staticmethod
    def _changes(mutations, olds: list) -> list:
        """The Change list of an applied script (erasing an absent version is no change)."""
        changes = []
        for (column, ts, value), old in zip(mutations, olds):
            old = decode(old) if old is not None else None
            if value is None and old is None:
                continue
            changes.append(Change(column, ts, old, value))
        return changes

    # -- the conditional mutation in one script (conditional=1) ---------------
    def sends_together(self, rt: RedisRowTransaction, conditions: list) -> bool:
        """Will ``rt.check_and_write`` go to the server as one script?

        Only with ``conditional=1`` on a single node, for a check_and_write
        with checks that comes first in its row transaction.
        """
        return (self.conditional_mutations and not self.cluster_mode and bool(conditions)
                and rt.row_data is None and not rt.mutations and rt.applied is None)

    def check_and_apply(self, rt: RedisRowTransaction, conditions: list, writes: list) -> tuple:
        """One script: check ``conditions`` in order, apply ``writes`` if all hold.

        Returns ``(ok, found, changes)`` exactly as the base class's reads
        would: ``found[i]`` the newest version in check ``i``'s range, for
        each check evaluated (the first failing one stops).
        """
        args = condition_args(conditions) + mutation_args(writes)
        reply = self._run_apply(rt, "free", args)
        found = [None if f is None else (int(f[0]), decode(f[1])) for f in reply[-1]]
        if reply[0] == 2:
            return False, found, []
        return True, found, self._changes(writes, reply[1])

    def _run_apply(self, rt: RedisRowTransaction, mode: str, tail: list) -> list:
        keys = self.row_keys(rt.table, rt.row)
        if not self.cluster_mode:
            keys += self.index_keys(rt.table)
        args = [rt.token, mode, rt.row_version or "0", rt.table, rt.row,
                "1" if self.cluster_mode else "0"] + tail
        deadline = time.monotonic() + self.lease_ms * 3 / 1000
        for attempt in itertools.count():
            reply = self._trip(self._apply_script, keys, args, durable=True)
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
        if all(value is None for _, _, value in rt.mutations):
            return
        ix, tables, notify = self.index_keys(rt.table)
        self.call_durably(ix, lambda client: client.zadd(ix, {rt.row: 0}))
        self.call_durably(tables, lambda client: client.zadd(tables, {rt.table: 0}))
        for column, _, value in rt.mutations:
            if value is not None and column.endswith(NOTIFY_SUFFIX):
                member = SEP.join((rt.table, rt.row, column[: -len(NOTIFY_SUFFIX)]))
                self.call_durably(notify, lambda client, m=member: client.zadd(notify, {m: 0}))

    def _cluster_index_remove(self, rt: RedisRowTransaction, reply: list) -> None:
        """Cluster mode, lease still held: unlist what the apply emptied."""
        ix, tables, notify = self.index_keys(rt.table)
        present = reply[3]
        for i in range(0, len(present), 2):
            if present[i + 1] == 0:
                member = SEP.join((rt.table, rt.row, present[i][: -len(NOTIFY_SUFFIX)]))
                self.call(self.redis.zrem, notify, member)
        if reply[2] == 1:
            self.call(self.redis.zrem, ix, rt.row)

    def _cluster_unlist_empty(self, rt: RedisRowTransaction) -> None:
        """Cluster mode, lease held, nothing to write: unlist each notify column the row
        transaction read and found empty.

        Such an entry is left when a row write is refused after its index entry was added
        (the lease expired under a slow client) or when an unlisting fails (the index's node
        was down). Nothing else removes it, so observers would be sent to the row for ever.
        The lease is checked after the ``ZREM``: if it was lost meanwhile, another client
        may have listed a notification since, so the entries go back (an index may list an
        empty column, never miss a non-empty one).
        """
        data = rt.row_data or {}
        empty = sorted({c for c in rt.columns_read if c.endswith(NOTIFY_SUFFIX) and not data.get(c)})
        if not empty:
            return
        notify = self.index_keys(rt.table)[2]
        members = [SEP.join((rt.table, rt.row, c[: -len(NOTIFY_SUFFIX)])) for c in empty]
        self.call(self.redis.zrem, notify, *members)
        if self.call(self.redis.get, self.row_keys(rt.table, rt.row)[2]) != rt.token:
            self.call(self.redis.zadd, notify, {m: 0 for m in members})

    def order_reads_after_row_writes(self) -> None:
        """From now on a read-only step's fetch waits until no other client holds the row
        lease (async commit's max_ts and one-phase commit's commit_ts, each taken while a
        row is held, need it: :mod:`~percolator_ref.stores.redis_max_ts`)."""
        self.reads_wait_for_leases = True

    def make_durable(self, table: str, row: str) -> None:
        """With ``wait=N``: one write on the row's node, then ``WAIT N``. The replication
        stream is ordered, so a replica that acknowledged it holds every earlier write of
        that node too (the lease key's neighbour ``P:{T/R}:D`` is the barrier's key)."""
        if not self.wait_replicas:
            return
        key = self.row_keys(table, row)[2][:-1] + "D"
        try:
            self.call_durably(key, lambda client: client.set(key, "1", px=60_000))
        except StoreUnavailable as e:
            raise StoreUnavailable(f"row {table}/{row}: what was read is not yet known to be on "
                                   f"{self.wait_replicas} replica(s), so a failover could still "
                                   f"take it back; it is not passed on (try again): {e}") from e

    def check_storable(self, value: Any) -> None:
        """Raise TypeError/ValueError before anything is sent if the codec cannot hold ``value``."""
        super().check_storable(value)
        encode(value)

    # -- inspection (not counted) -------------------------------------------
    def _fetch_plain(self, table: str, row: str) -> dict:
        flat = self.call(self.redis.hgetall, self.row_keys(table, row)[0])
        return parse_row([x for kv in flat.items() for x in kv])

    def versions(self, table: str, row: str, bigtable_column: str) -> list:
        """``[(ts, value), ...]`` newest first; [] if the cell is empty."""
        versions = self._fetch_plain(table, row).get(bigtable_column)
        return list(reversed(versions.items())) if versions else []

    def tables(self) -> list:
        return [t for t in self.call(self.redis.zrange, f"{self.prefix}:tables", 0, -1)
                if not self.cluster_mode or self.rows(t)]

    def rows(self, table: str, start_row: Optional[str] = None,
             end_row: Optional[str] = None) -> list:
        """Row keys of ``table`` in ``[start_row, end_row)``, sorted (one round trip)."""
        lo = "-" if start_row is None else f"[{start_row}"
        hi = "+" if end_row is None else f"({end_row}"
        if start_row is not None and end_row is not None and end_row <= start_row:
            return []
        rows = self.call(self.redis.zrangebylex, self.index_keys(table)[0], lo, hi)
        if self.cluster_mode:       # the index may briefly list an emptied row
            rows = [r for r in rows if self.call(self.redis.exists, self.row_keys(table, r)[0])]
        return rows

    def columns(self, table: str, row: str) -> list:
        return sorted(self._fetch_plain(table, row))

    def dump(self, table: Optional[str] = None) -> dict:
        """``{table: {row: {column: [(ts, value), ...]}}}`` newest first."""
        names = [table] if table is not None else self.tables()
        out = {}
        for t in names:
            rows = {}
            for r in self.rows(t):
                cols = self._fetch_plain(t, r)
                if cols:
                    rows[r] = {c: list(reversed(v.items())) for c, v in cols.items()}
            if rows:
                out[t] = rows
        return out

    def notifications(self, start: Optional[tuple] = None) -> Iterator[tuple]:
        """Pending ``(table, row, column)`` notifications from ``start`` on (a copy)."""
        lo = "-" if start is None else "[" + SEP.join(start)
        members = self.call(self.redis.zrangebylex, f"{self.prefix}:notify", lo, "+")
        return iter([tuple(m.split(SEP)) for m in members])

    # -- services shared through the same server ------------------------------
    def make_oracle(self, first_timestamp: int = 1):
        """A :class:`RedisTimestampOracle` on this server and prefix."""
        from .redis_services import RedisTimestampOracle
        return RedisTimestampOracle(self, first_timestamp)

    def make_max_ts(self):
        """TiKV's ``max_ts`` for async commit, on this server and prefix
        (:class:`~percolator_ref.stores.redis_max_ts.RedisMaxTs`); from then on this
        store's reads wait out other clients' row leases."""
        from .redis_max_ts import RedisMaxTs
        return RedisMaxTs(self)

    def make_wait_for_graph(self, now, expire: float):
        """The pessimistic-locks variant's wait-for graph, on this server and prefix
        (:class:`~percolator_ref.stores.redis_wait_for.RedisWaitForGraph`)."""
        from .redis_wait_for import RedisWaitForGraph
        return RedisWaitForGraph(self, now, expire)

    def make_lockservice(self, clock, ttl: float = 10.0):
        """A :class:`RedisLockService` on this server and prefix."""
        from .redis_services import RedisLockService
        return RedisLockService(self, clock, ttl)

    def flush(self) -> None:
        """Delete every key of this prefix (tests and benchmarks start clean)."""
        keys = self.call(lambda: list(self.redis.scan_iter(match=f"{self.prefix}:*",
                                                           count=1000)))
        if self.cluster_mode:
            for k in keys:
                self.call(self.redis.delete, k)
        else:
            for i in range(0, len(keys), 500):
                self.call(self.redis.delete, *keys[i:i + 500])

    def close(self) -> None:
        self.redis.close()

    def __repr__(self):
        return f"RedisBigtable({self.url!r})"
