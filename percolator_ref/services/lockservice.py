"""The lightweight lock service (the paper's use of Chubby, section 2.2).

Running clients (workers) hold a *liveness token*. The token carries the wall
time of the client's last heartbeat on the cluster clock; a transaction
refreshes it at each of its row transactions that may write (a read-only
one never touches it: ``Session.row_transaction``). Another client judges the
holder of a lock:

- alive: it has a token, did not crash, and its last heartbeat is at most
  ``ttl`` seconds old;
- dead: it crashed (the token vanished with the process), or it went quiet
  for longer than ``ttl`` (alive but not working). The paper's rule (§2.2)
  keeps that wall time in each lock and the token in Chubby only says the
  worker process lives; the kit keeps the heartbeat time in the token.

The service also grants named advisory locks (``try_acquire``/``release``):
the observers' scanner threads use them to claim scanning regions.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Optional


@dataclass
class Token:
    client: str
    heartbeat: float
    crashed: bool = False


MAX_TTL = 1e9      # seconds (about 31 years): every store can hold it (Redis key expiry)


def ttl_seconds(ttl) -> float:
    """``ttl`` as float seconds: an int or float in (0, MAX_TTL], else an error naming ``lock_ttl``.

    A NaN TTL would make every ``age <= ttl`` false, so every client dead at once;
    an infinite or huge one cannot be a Redis key expiry.
    """
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"lock_ttl (the lock service's ttl) must be a number of seconds, "
                        f"got {ttl!r}")
    try:
        seconds = float(ttl)
    except OverflowError:                   # an int too large for a float (and to print)
        raise ValueError(f"lock_ttl (the lock service's ttl) must be > 0 and <= {MAX_TTL:g} "
                         f"seconds, got an int of {ttl.bit_length()} bits") from None
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TTL):
        raise ValueError(f"lock_ttl (the lock service's ttl) must be a finite number of "
                         f"seconds, > 0 and <= {MAX_TTL:g}, got {ttl!r}")
    return seconds


class LockService:
    """Liveness tokens with a TTL on an injectable clock. Thread-safe.

    ``ttl`` (``Cluster(lock_ttl=...)``): seconds, an int or float with
    0 < ttl <= ``MAX_TTL``; anything else (bool, str, nan, inf, 0, negative)
    raises TypeError or ValueError naming ``lock_ttl``.
    """

    def __init__(self, clock, ttl: float = 10.0):
        self.clock = clock
        self.ttl = ttl_seconds(ttl)
        self._tokens: dict[str, Token] = {}
        self._named: dict[str, str] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        """The time liveness is judged on (the cluster clock); a lock's ttl counts on it too."""
        return self.clock.now()

    # -- liveness tokens -------------------------------------------------
    def register(self, client: str) -> None:
        """Create (or renew) ``client``'s token at the current time."""
        with self._lock:
            self._tokens[client] = Token(client, self.clock.now())

    def heartbeat(self, client: str) -> None:
        """Refresh ``client``'s wall time (ignored once it crashed or left)."""
        token = self._tokens.get(client)
        if token is not None and not token.crashed:
            token.heartbeat = self.clock.now()

    def crash(self, client: str) -> None:
        """``client`` died: from now on it counts as dead."""
        with self._lock:
            token = self._tokens.setdefault(client, Token(client, self.clock.now()))
            token.crashed = True

    def release(self, client: str) -> None:
        """``client`` finished normally: its token goes away."""
        with self._lock:
            self._tokens.pop(client, None)

    def is_alive(self, client: Optional[str]) -> bool:
        """True while ``client`` holds a token, never crashed, and heartbeat is within the TTL."""
        return self._alive_unlocked(client)     # one dict read: no lock needed

    def status(self, client: str) -> str:
        """``"alive"``, ``"crashed"``, ``"expired"`` (TTL passed) or ``"gone"`` (no token)."""
        token = self._tokens.get(client)
        if token is None:
            return "gone"
        if token.crashed:
            return "crashed"
        return "alive" if self.is_alive(client) else "expired"

    def tokens(self) -> dict:
        """``{client: (age_seconds, status)}`` for display."""
        now = self.clock.now()
        return {c: (now - t.heartbeat, self.status(c)) for c, t in sorted(self._tokens.items())}

    # -- named advisory locks ----------------------------------------------
    def try_acquire(self, name: str, owner: str) -> bool:
        """Take lock ``name`` for ``owner`` if free, held by ``owner``, or held by a dead owner."""
        with self._lock:
            holder = self._named.get(name)
            if holder is None or holder == owner or not self._alive_unlocked(holder):
                self._named[name] = owner
                return True
            return False

    def release_lock(self, name: str, owner: str) -> None:
        with self._lock:
            if self._named.get(name) == owner:
                del self._named[name]

    def holder(self, name: str) -> Optional[str]:
        return self._named.get(name)

    def _alive_unlocked(self, client: Optional[str]) -> bool:
        token = self._tokens.get(client) if client is not None else None
        return (token is not None and not token.crashed
                and self.clock.now() - token.heartbeat <= self.ttl)
