"""The pessimistic-locks variant's wait-for graph kept on the Redis server.

TiKV's deadlock detector is one service every TiKV node reports its waits to
(the leader of the detector, ``src/server/lock_manager/deadlock.rs``), so two
clients' crossing waits meet in one graph. On the Redis store the clients are
separate processes (or separate ``Cluster`` objects), so the graph lives on
the server: the hash ``P:{wfg}`` maps a waiting transaction (its ``txn_ts``)
to ``"<holder>|<deadline>"``; one script walks the waits from the holder and
refuses the edge that would close a cycle, dropping edges whose deadline has
passed on the way (TiKV's ``DetectTable`` expires its entries too).
"""
from __future__ import annotations

_WAIT = """
-- KEYS: graph.  ARGV: now, waiter, holder, expire (seconds).  1 recorded, 0 a cycle.
local now = tonumber(ARGV[1])
local function holder_of(node)
  local edge = redis.call('HGET', KEYS[1], node)
  if not edge then return nil end
  local bar = string.find(edge, '|', 1, true)
  if tonumber(string.sub(edge, bar + 1)) < now then
    redis.call('HDEL', KEYS[1], node)
    return nil
  end
  return string.sub(edge, 1, bar - 1)
end
local node, seen = ARGV[3], {}
while node and not seen[node] do
  if node == ARGV[2] then return 0 end
  seen[node] = true
  node = holder_of(node)
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3] .. '|' .. string.format('%.17g', now + tonumber(ARGV[4])))
return 1
"""


class RedisWaitForGraph:
    """One Redis store's wait-for graph, on its server (``store.make_wait_for_graph``).

    Same interface as :class:`~percolator_ref.variants.pessimistic.WaitForGraph`:
    ``wait(waiter, holder)``, ``done(waiter)``, ``waits()``; ``now`` is the lock
    service's clock (the server's with the wall clock), ``expire`` the lock TTL.
    """

    def __init__(self, store, now, expire: float):
        self.store, self.now, self.expire = store, now, expire
        self.key = f"{store.prefix}:{{wfg}}"
        self.wait_script = store.redis.register_script(_WAIT)

    def wait(self, waiter: int, holder: int) -> bool:
        """Record ``waiter -> holder``; False (nothing recorded) if it would close a cycle."""
        return bool(self.store.call(self.wait_script, keys=[self.key], args=[
            repr(float(self.now())), str(waiter), str(holder), repr(float(self.expire))]))

    def done(self, waiter: int) -> None:
        """``waiter``'s wait ended: remove its edge."""
        self.store.call(self.store.redis.hdel, self.key, str(waiter))

    def waits(self) -> dict:
        """``{waiter: holder}`` for the edges that have not expired."""
        now = self.now()
        found = self.store.call(self.store.redis.hgetall, self.key)
        edges = {int(w): edge.split("|") for w, edge in found.items()}
        return {w: int(h) for w, (h, deadline) in edges.items() if float(deadline) >= now}

    def __repr__(self):
        return f"RedisWaitForGraph({self.store.url!r})"
