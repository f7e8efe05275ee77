"""The timestamp oracle and the lock service, shared through the Redis store.

With ``Cluster(backend="redis://...")`` every process that opens the same
server and prefix gets the same oracle and the same liveness tokens, so
separate client processes cooperate exactly as Percolator's workers do.

- :class:`RedisTimestampOracle`: the counter ``P:{oracle}`` is the last
  timestamp handed out; ``get_timestamps(n)`` allocates a range of ``n``
  atomically (one script around ``INCRBY``, exact up to ``MAX_TIMESTAMP``:
  the script compares the counter as text, never as a Lua double).
  Timestamps are strictly increasing across all processes; with
  ``appendonly yes`` / ``appendfsync always`` the counter survives a server
  restart, so no timestamp is ever reissued.
- :class:`RedisLockService`: a client's token is the key
  ``P:{ls}:tok:<client>`` holding its last heartbeat (``a:<time>``) or the
  crash mark (``c:<time>``), with a generous key expiry as garbage
  collection (an expired key reads as "gone", i.e. dead). Liveness is judged
  on the cluster clock: with the wall clock that is the *server's* clock
  (``TIME`` inside the scripts), shared by every process and machine; with a
  :class:`~percolator_ref.ManualClock` it is the value of ``clock.now()``
  each process passes in (deterministic tests).

Heartbeats are throttled (a token is rewritten only when the clock moved by
more than ``ttl/1000``, or ``ttl/20`` on the wall clock) so that a
transaction's row transactions do not each pay a round trip for it.
"""
from __future__ import annotations

import time
from typing import Optional

from ..services.clock import WallClock
from ..errors import OracleExhausted, StoreUnavailable
from ..services.lockservice import LockService
from ..model import MAX_TIMESTAMP

_NOW = """
local function now()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""

_HEARTBEAT = _NOW + """
-- KEYS: token.  ARGV: now ('' = server time), expiry ms, create ('1') or refresh only
if ARGV[3] ~= '1' then
  local cur = redis.call('GET', KEYS[1])
  if not cur or string.sub(cur, 1, 1) == 'c' then return 0 end
end
redis.call('SET', KEYS[1], 'a:' .. string.format('%.17g', now()), 'PX', ARGV[2])
return 1
"""

_CRASH = _NOW + """
redis.call('SET', KEYS[1], 'c:' .. string.format('%.17g', now()), 'PX', ARGV[2])
return 1
"""

_STATUS = _NOW + """
-- KEYS: token.  ARGV: now, ttl.  Returns {status, age}
local cur = redis.call('GET', KEYS[1])
if not cur then return {'gone', '0'} end
local age = now() - tonumber(string.sub(cur, 3))
if string.sub(cur, 1, 1) == 'c' then return {'crashed', string.format('%.17g', age)} end
if age <= tonumber(ARGV[2]) then return {'alive', string.format('%.17g', age)} end
return {'expired', string.format('%.17g', age)}
"""

_TRY_ACQUIRE = _NOW + """
-- KEYS: named lock, holder's token prefix.  ARGV: now, ttl, owner
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[3] then
  local cur = redis.call('GET', KEYS[2] .. holder)
  if cur and string.sub(cur, 1, 1) == 'a'
     and now() - tonumber(string.sub(cur, 3)) <= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[3])
return 1
"""

_RELEASE_NAMED = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_DECIMAL_LESS = """
-- a < b for decimal integers as text (>= -1, no leading zeros): exact, never a
-- Lua number (a double, exact only up to 2^53)
local function less(a, b)
  if a == b then return false end
  if string.sub(a, 1, 1) == '-' then return true end
  if string.sub(b, 1, 1) == '-' then return false end
  if #a ~= #b then return #a < #b end
  return a < b
end
"""

_ORACLE_INIT = _DECIMAL_LESS + """
-- KEYS: counter.  ARGV: first_timestamp - 1.  Never moves the counter back.
local cur = redis.call('GET', KEYS[1])
if not cur or less(cur, ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""

_ORACLE_NEXT = _DECIMAL_LESS + """
-- KEYS: counter.  ARGV: n, MAX_TIMESTAMP - n.  Returns the new last timestamp as
-- text, or false (nothing changed) if it would pass MAX_TIMESTAMP.
local cur = redis.call('GET', KEYS[1]) or '0'
if less(ARGV[2], cur) then return false end
redis.call('INCRBY', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[1])
"""


class RedisTimestampOracle:
    """Strictly increasing timestamps from a counter on the Redis server.

    Same interface as :class:`~percolator_ref.services.oracle.TimestampOracle`:
    ``get_timestamp()``, ``get_timestamps(n)`` (one script), ``peek()``,
    ``high_water_mark``, ``calls``. Starting at ``first_timestamp`` on a
    fresh prefix; a later oracle on the same prefix continues the counter.
    Timestamps are exact up to :data:`~percolator_ref.model.MAX_TIMESTAMP`;
    past it the oracle refuses with :class:`~percolator_ref.errors.OracleExhausted`
    (as in memory) and hands out nothing, so a commit that cannot get its
    commit timestamp aborts before its commit point.
    """

    def __init__(self, store, first_timestamp: int = 1):
        if isinstance(first_timestamp, bool) or not isinstance(first_timestamp, int):
            raise TypeError(f"first_timestamp must be an int, got {first_timestamp!r}")
        if not 0 <= first_timestamp <= MAX_TIMESTAMP:
            raise ValueError(f"first_timestamp must be in [0, {MAX_TIMESTAMP}], "
                             f"got {first_timestamp}")
        self.store = store
        self.key = f"{store.prefix}:{{oracle}}"
        self.calls = 0
        self.range_writes = 0
        self._next = store.redis.register_script(_ORACLE_NEXT)
        self._init = store.redis.register_script(_ORACLE_INIT)
        self.first_timestamp, self.started = first_timestamp, False

    def start(self) -> None:
        """Raise the counter to ``first_timestamp - 1`` (never back), once, at the first
        use: a ``Cluster()`` refused after its oracle was made has written nothing."""
        if not self.started:
            self.store.call(self._init, keys=[self.key], args=[str(self.first_timestamp - 1)])
            self.started = True

    def get_timestamp(self) -> int:
        """The next timestamp, larger than every one handed out before (any process)."""
        return self.get_timestamps(1)[0]

    def get_timestamps(self, n: int) -> range:
        """``n`` consecutive timestamps, allocated atomically in one round trip."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        if n > MAX_TIMESTAMP:         # more than exist: exhausted, as the in-memory oracle says
            raise OracleExhausted(f"the timestamp oracle at {self.store.url} cannot hand out {n} "
                                  f"timestamps: MAX_TIMESTAMP is {MAX_TIMESTAMP}")
        self.start()
        args = [str(n), str(MAX_TIMESTAMP - n)]
        last = self.store.call_durably(self.key, lambda client: self._next(
            keys=[self.key], args=args, client=client))     # with wait=N: replicated first
        if last is None:
            raise OracleExhausted(
                f"the timestamp oracle at {self.store.url} is exhausted: {n} more timestamp(s) "
                f"would pass MAX_TIMESTAMP = 2**63 - 1 ({MAX_TIMESTAMP}); nothing was handed out")
        last = int(last)
        self.calls += 1
        self.range_writes += 1
        return range(last - n + 1, last + 1)

    @property
    def high_water_mark(self) -> int:
        return self.peek()

    def peek(self) -> int:
        """The timestamp the next call would return (if no other process asks first)."""
        self.start()
        return int(self.store.call(self.store.redis.get, self.key) or 0) + 1

    def __repr__(self):
        return f"RedisTimestampOracle({self.store.url!r})"


class RedisLockService(LockService):
    """The lock service's liveness tokens and named locks, kept on the Redis server.

    Same interface and meaning as :class:`~percolator_ref.services.lockservice.LockService`.
    """

    def __init__(self, store, clock, ttl: float = 10.0):
        super().__init__(clock, ttl)          # validates ttl
        self.store = store
        self._wall = isinstance(clock, WallClock)
        self._tok = f"{store.prefix}:{{ls}}:tok:"
        self._named_prefix = f"{store.prefix}:{{ls}}:named:"
        self._expiry_ms = int(max(self.ttl * 20, 600) * 1000)
        self._sent: dict[str, float] = {}     # client -> local time of the last heartbeat sent
        r = store.redis
        self._heartbeat = r.register_script(_HEARTBEAT)
        self._crash = r.register_script(_CRASH)
        self._status = r.register_script(_STATUS)
        self._try = r.register_script(_TRY_ACQUIRE)
        self._release_named = r.register_script(_RELEASE_NAMED)

    def _now_arg(self) -> str:
        return "" if self._wall else repr(float(self.clock.now()))

    def _local_now(self) -> float:
        return time.monotonic() if self._wall else self.clock.now()

    def _call(self, script, keys, args):
        return self.store.call(script, keys=keys, args=args)

    def now(self) -> float:
        """The time liveness is judged on: the server's clock (``TIME``) with the wall clock,
        shared by every client of the store; else the cluster clock's value."""
        if not self._wall:
            return self.clock.now()
        seconds, micros = self.store.call(self.store.redis.time)
        return seconds + micros / 1_000_000

    # -- liveness tokens -------------------------------------------------------
    def register(self, client: str) -> None:
        self._call(self._heartbeat, [self._tok + client], [self._now_arg(), self._expiry_ms, "1"])
        self._sent[client] = self._local_now()

    def heartbeat(self, client: str) -> None:
        """Refresh ``client``'s token (throttled; ignored once it crashed or left)."""
        last = self._sent.get(client)
        slack = self.ttl / 20 if self._wall else self.ttl / 1000
        if last is not None and self._local_now() - last <= slack:
            return
        self._call(self._heartbeat, [self._tok + client], [self._now_arg(), self._expiry_ms, "0"])
        self._sent[client] = self._local_now()

    def crash(self, client: str) -> None:
        self._call(self._crash, [self._tok + client], [self._now_arg(), self._expiry_ms])
        self._sent.pop(client, None)

    def release(self, client: str) -> None:
        """Delete ``client``'s token; best effort: if the server cannot be reached the
        token is left to go stale (the client then counts as dead after the TTL, as
        one that went quiet), so a transaction that already ended is not failed by it."""
        self._sent.pop(client, None)
        try:
            self.store.call(self.store.redis.delete, self._tok + client)
        except StoreUnavailable:
            pass

    def _status_age(self, client: str):
        status, age = self._call(self._status, [self._tok + client], [self._now_arg(), self.ttl])
        return status, float(age)

    def is_alive(self, client: Optional[str]) -> bool:
        # a client that is not a name never registered: dead, as in memory
        return isinstance(client, str) and self._status_age(client)[0] == "alive"

    def status(self, client: str) -> str:
        return self._status_age(client)[0]

    def tokens(self) -> dict:
        keys = self.store.call(lambda: sorted(self.store.redis.scan_iter(
            match=self._tok + "*", count=1000)))
        out = {}
        for key in keys:
            client = key[len(self._tok):]
            status, age = self._status_age(client)
            if status != "gone":
                out[client] = (age, status)
        return out

    # -- named advisory locks ----------------------------------------------------
    def try_acquire(self, name: str, owner: str) -> bool:
        return bool(self._call(self._try, [self._named_prefix + name, self._tok],
                               [self._now_arg(), self.ttl, owner]))

    def release_lock(self, name: str, owner: str) -> None:
        self._call(self._release_named, [self._named_prefix + name], [owner])

    def holder(self, name: str) -> Optional[str]:
        return self.store.call(self.store.redis.get, self._named_prefix + name)

    def __repr__(self):
        return f"RedisLockService({self.store.url!r}, ttl={self.ttl})"
