"""Exact, type-tagged text encoding of Bigtable values for a Redis store.

Every stored value is a ``str`` whose first character names its type, so a
value read back from Redis is equal to, and of the same type as, the value
written: ``str``, ``bytes``, ``bool``, ``int``, ``float`` (hex, so ``-0.0``,
``nan`` and ``inf`` survive), the protocol's :class:`~percolator_ref.model.Lock`
and :class:`~percolator_ref.model.Write`, and, for other engineers' internal
columns, ``None``/``list``/``dict`` (JSON) and ``tuple``.

>>> decode(encode(b"\\x00\\xff")), decode(encode(True)), decode(encode(1.5))
(b'\\x00\\xff', True, 1.5)
"""
from __future__ import annotations

import base64
import json
from typing import Any

from ..model import Cell, Lock, Write, WriteKind


def encode(value: Any) -> str:
    """The tagged text of ``value``; TypeError (naming ``value``) for other types."""
    if isinstance(value, bool):                 # before int: bool is an int
        return "T" if value else "F"
    if isinstance(value, str):
        return "s" + value
    if isinstance(value, bytes):
        return "b" + base64.b64encode(value).decode("ascii")
    if isinstance(value, int):
        return "i" + str(value)
    if isinstance(value, float):
        return "f" + value.hex()
    if isinstance(value, Lock):
        return "L" + json.dumps([value.start_ts, list(value.primary), value.is_primary,
                                 value.client, value.kind.value])
    if isinstance(value, Write):
        return "W" + json.dumps([value.start_ts, value.kind.value])
    if isinstance(value, tuple):
        return "u" + json.dumps([encode(v) for v in value])
    if value is None or isinstance(value, (list, dict)):
        try:
            return "j" + json.dumps(value)
        except (TypeError, ValueError) as e:
            raise TypeError(f"value cannot be stored in Redis: {value!r} ({e})") from None
    raise TypeError(f"value of type {type(value).__name__} cannot be stored in Redis: {value!r}")


def decode(text: str) -> Any:
    """Inverse of :func:`encode`."""
    tag, body = text[:1], text[1:]
    if tag == "s":
        return body
    if tag == "T":
        return True
    if tag == "F":
        return False
    if tag == "i":
        return int(body)
    if tag == "f":
        return float.fromhex(body)
    if tag == "b":
        return base64.b64decode(body)
    if tag == "L":
        start_ts, primary, is_primary, client, kind = json.loads(body)
        return Lock(start_ts, Cell(*primary), is_primary, client, WriteKind(kind))
    if tag == "W":
        start_ts, kind = json.loads(body)
        return Write(start_ts, WriteKind(kind))
    if tag == "u":
        return tuple(decode(v) for v in json.loads(body))
    if tag == "j":
        return json.loads(body)
    raise ValueError(f"not an encoded Bigtable value: {text[:40]!r}")
