"""Observations as plain data: what a client reports about the store's values it saw.

Runs where the client runs (the sandboxed child when grading) and in the trusted
world, which renders its own cells the same way (:mod:`..judge.protocol_world`).
Nothing here judges.
"""
from __future__ import annotations

from percolator_ref.model import Lock, Write, WriteKind

from ..framework import plain


def render(value):
    """A stored version as plain data: write records and locks as small dicts."""
    if isinstance(value, Write):
        return {"write": _kind(value.kind), "start_ts": plain(value.start_ts)}
    if isinstance(value, Lock):
        primary = value.primary
        return {"lock": True, "start_ts": plain(value.start_ts),
                "primary": plain(list(primary) if isinstance(primary, tuple) else primary),
                "is_primary": plain(value.is_primary), "client": plain(value.client),
                "kind": _kind(value.kind)}
    return plain(value)


def _kind(kind):
    return kind.value if isinstance(kind, WriteKind) else plain(kind)


def snapshot_fields(found) -> dict:
    """What a ``SnapshotRead``-like result holds: its lock, version and value, as plain data."""
    missing = {"missing": True}
    lock = getattr(found, "lock", missing)
    return {"type": type(found).__name__,
            "lock": render(lock) if isinstance(lock, Lock) else plain(lock),
            "version": plain(getattr(found, "version", missing)),
            "value": plain(getattr(found, "value", missing))}
