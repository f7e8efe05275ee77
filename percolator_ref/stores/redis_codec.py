"""Exact, type-tagged text encoding of Bigtable values for a Redis store.

Every stored value is a ``str`` whose first character names its type, so a
value read back from Redis is equal to, and of the same type as, the value
written. It holds every value :func:`~percolator_ref.model.check_value`
accepts: ``str`` (any Unicode text that UTF-8 can carry, NUL included),
``bytes`` (base64), ``bool``, ``int`` (decimal, up to
:data:`~percolator_ref.model.MAX_INT_DIGITS` digits), ``float`` (hex, so
``-0.0``, ``nan``, ``inf`` and every bit of the mantissa survive); also the
protocol's :class:`~percolator_ref.model.Lock` and
:class:`~percolator_ref.model.Write`, and, for other engineers' internal
columns, ``None``/``list``/``dict`` (JSON) and ``tuple``. A subclass (an
``IntEnum``, a ``str`` subclass) is stored as its base type.

>>> decode(encode(b"\\x00\\xff")), decode(encode(True)), decode(encode(1.5))
(b'\\x00\\xff', True, 1.5)
>>> decode(encode(2 ** 63 - 1)) == 2 ** 63 - 1
True
"""
from __future__ import annotations

import base64
import json
from typing import Any

from ..model import INT_LIMIT, MAX_INT_DIGITS, Cell, Lock, Write, WriteKind, check_encodable
from ..variants.locks import extras_of, lock_with_extras


def encode(value: Any) -> str:
    """The tagged text of ``value``; TypeError/ValueError naming ``value`` if it cannot be held."""
    if isinstance(value, bool):                 # before int: bool is an int
        return "T" if value else "F"
    if isinstance(value, str):
        check_encodable(value, "value")
        return "s" + str.__str__(value)
    if isinstance(value, bytes):
        return "b" + base64.b64encode(value).decode("ascii")
    if isinstance(value, int):
        if abs(value) >= INT_LIMIT:
            raise ValueError(f"value must be an int of at most {MAX_INT_DIGITS} digits")
        return "i" + int.__repr__(value)
    if isinstance(value, float):
        return "f" + float.hex(value)
    return encode_structure(value)


def encode_structure(value: Any) -> str:
    """The protocol's records and the JSON-able structures of internal columns."""
    if isinstance(value, Lock):
        extras = extras_of(value)           # a variant's lock fields (TiKV's), if any
        return "L" + json.dumps([value.start_ts, list(value.primary), value.is_primary,
                                 value.client, value.kind.value] + ([extras] if extras else []))
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
        start_ts, primary, is_primary, client, kind, *extras = json.loads(body)
        return lock_with_extras(start_ts, Cell(*primary), is_primary, client, WriteKind(kind),
                                extras[0] if extras else {})
    if tag == "W":
        start_ts, kind = json.loads(body)
        return Write(start_ts, WriteKind(kind))
    if tag == "u":
        return tuple(decode(v) for v in json.loads(body))
    if tag == "j":
        return json.loads(body)
    raise ValueError(f"not an encoded Bigtable value: {text[:40]!r}")
