"""TiKV's ``max_ts`` kept on the Redis server, for async commit on the Redis store.

Async commit computes a lock's ``min_commit_ts`` from ``max_ts``, "the largest
``start_ts`` for any transactional read operation" of the store
(``design/async-commit/initial-design.md`` in ``tikv/sig-transaction``). TiKV
keeps it in each TiKV server's memory, beside the data it guards: its
``ConcurrencyManager`` (``components/concurrency_manager/src/lib.rs``,
``update_max_ts``; "The concurrency manager contains a lock table in memory.
Lock information can be stored in it and reading requests can check if these
locks block the read"), read by ``async_commit_timestamps`` in
``src/storage/txn/actions/prewrite.rs``; every client of that server sees one
value. On the Redis store the
clients are separate processes, so ``max_ts`` lives on the server too: the key
``P:{max_ts}`` holds it as 19-digit text (compared as text, exact up to
``MAX_TIMESTAMP``; never a Lua double), raised by one script that never lowers
it, and with ``wait=N`` only reported raised once N replicas hold it.

Ordering. A reader raises ``max_ts`` *before* it fetches the row it reads; a
prewrite reads ``max_ts`` while it holds the row's lease, before it writes its
lock. A store that keeps ``max_ts`` therefore makes every read wait out another
client's row lease (``RedisBigtable.reads_wait_for_leases``): a read of the row
then comes either before the prewrite took the lease (its raise came earlier
still, so the prewrite sees it) or after the lock is written (the read sees the
lock). TiKV orders the same two events with its in-memory lock table.
"""
from __future__ import annotations

from ..model import MAX_TIMESTAMP
from .raw import check_ts

DIGITS = len(str(MAX_TIMESTAMP))      # fixed-width text: string order is numeric order

_RAISE = """
-- KEYS: max_ts.  ARGV: a start_ts as 19-digit text.  Raise, never lower.
local cur = redis.call('GET', KEYS[1])
if not cur or cur < ARGV[1] then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""


class RedisMaxTs:
    """One Redis store's ``max_ts``, on its server (``store.make_max_ts()``).

    ``update(ts)`` raises it to ``ts`` (one script); ``value`` reads it (one round
    trip). Making one makes the store's reads wait out other clients' row leases
    (``order_reads_after_row_writes``, see the module doc).
    """

    def __init__(self, store):
        self.store = store
        self.key = f"{store.prefix}:{{max_ts}}"
        self.raise_script = store.redis.register_script(_RAISE)
        store.order_reads_after_row_writes()

    def update(self, ts: int) -> None:
        """Raise the server's max_ts to ``ts`` (returns once it is there, on N replicas
        with ``wait=N``)."""
        check_ts(ts)
        self.store.call_durably(self.key, lambda client: self.raise_script(
            keys=[self.key], args=[f"{ts:0{DIGITS}d}"], client=client))

    @property
    def value(self) -> int:
        """The server's max_ts now (0 if no read has raised it)."""
        found = self.store.call(self.store.redis.get, self.key)
        return int(found) if found else 0

    def __repr__(self):
        return f"RedisMaxTs({self.store.url!r})"
