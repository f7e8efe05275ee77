"""The narrow channel between a client (student code) and the trusted world.

Every message is one JSON object, framed by a 4-byte big-endian length. Values
that are not plain JSON (the cells' locks and write records, tuples, cells)
are tagged objects, decoded strictly: an unknown tag, a wrong field type, a
too-deep or too-large message raises :class:`ProtocolError`. Nothing is ever
unpickled or evaluated.

Client -> world (``cid`` names the client):

=========  ==========================================================  ==========
``op``     fields                                                       scheduled?
=========  ==========================================================  ==========
``row``    ``table``, ``row``, ``step``: begin one row transaction        yes
``end``    ``commit`` (bool), ``mutations`` ``[[column, ts, value]]``    no
``ts``     a timestamp from the oracle                                  yes
``peek``   the oracle's next timestamp                                  no
``ls``     ``fn`` (register/heartbeat/crash/release/is_alive/status),  no
           ``client``: a lock-service call
``now``    the clock                                                    no
``sleep``  ``seconds``: wait on the clock                               no
``rows``   ``table``, ``start``, ``end``: row keys (a scan's listing)   no
``observed`` ``table``, ``column``: does a write there notify?         no
``disk``   ``fn``, ``path``, ``to``, ``data``, ``mode``: a call on a world  no
           that owns a disk (exercise 5's oracle state file)
``answer`` ``outcome``: ``{"value": v}`` or ``{"raised": text}``        (final)
=========  ==========================================================  ==========

World -> client: ``{"cid", "op": "reply", "value"}``, ``{"cid", "op": "gone"}``
(the client crashed: it is never answered again), ``{"cid", "op": "fail",
"text"}`` (an injected store failure: the proxy raises StoreUnavailable),
``{"cid", "op": "spawn",
"role", "args"}`` and ``{"cid", "op": "call", "method", "args"}``.
"""
from __future__ import annotations

import json
import math
import os
import select
import struct
import sys
import threading
import time

from percolator_ref.model import Cell, Lock, Write, WriteKind
from percolator_ref.variants.locks import extras_of, lock_with_extras

MAX_MESSAGE = 1 << 20          # bytes
MAX_DEPTH = 12
MAX_TEXT = 10_000
MAX_SAME_HASH = 8             # keys of one decoded dict that may share a hash
"""A numeric key's hash is not salted (``hash(i * (2**61 - 1)) == 0`` for every int ``i``):
a dict of keys that all hash alike costs the world quadratic time to build (37,000 such
keys, one 1 MB frame, took about 10 s of its CPU). Values the kit encodes never come near."""
_HEADER = struct.Struct(">I")                # a frame: its body's length
ROUTED = struct.Struct(">II")                # a routed frame: its body's length, a client id


class ProtocolError(Exception):
    """A message that breaks the channel's rules (shape, types, size)."""


class ClientGone(BaseException):
    """Raised in a client whose world declared it crashed: it is never answered again."""


# -- values ----------------------------------------------------------------------

def encode(value, depth: int = 0):
    """``value`` as JSON data; locks, write records, cells, tuples and bytes are tagged."""
    if depth > MAX_DEPTH:
        raise ProtocolError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"$": "F", "v": repr(value)}
    if isinstance(value, WriteKind):
        return {"$": "K", "v": value.value}
    if isinstance(value, Lock):               # [start_ts, table, row, column, is_primary, client, kind]
        found = {"$": "Lock", "v": [value.start_ts, *value.primary, value.is_primary, value.client,
                                    value.kind.value]}
        extras = extras_of(value)              # TiKV's lock fields (a variant's), if any
        return dict(found, extras=encode(extras, depth + 1)) if extras else found
    if isinstance(value, Write):               # [start_ts, kind]
        return {"$": "Write", "v": [value.start_ts, value.kind.value]}
    if isinstance(value, Cell):
        return {"$": "Cell", "v": list(value)}
    if isinstance(value, tuple):
        return {"$": "T", "v": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"$": "B", "v": bytes(value).hex()}
    if type(value) is dict:
        return {"$": "D", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise ProtocolError(f"a {type(value).__name__} cannot cross the channel")


def encode_row(row: dict) -> dict:
    """A row handed to a client, ``{column: [(ts, value), ...]}``, in one tagged object
    (``{"$": "Row", "v": [[column, [[ts, value], ...]], ...]}``): lighter to decode than
    the same dict encoded as tagged dicts and tuples."""
    return {"$": "Row", "v": [[column, [[ts, encode(v, 2)] for ts, v in versions]]
                              for column, versions in row.items()]}


def decode(data, depth: int = 0):
    """The inverse of :func:`encode`, validating every field."""
    if depth > MAX_DEPTH:
        raise ProtocolError("value nested too deeply")
    if data is None or isinstance(data, (bool, str, float)) or type(data) is int:
        return data
    if isinstance(data, list):
        return [decode(v, depth + 1) for v in data]
    if not isinstance(data, dict) or not isinstance(data.get("$"), str):
        raise ProtocolError("an object value without its tag")
    return _decode_tagged(data, depth)


def _field(data: dict, name: str, kind, optional: bool = False):
    value = data.get(name)
    if value is None and optional:
        return None
    if kind is int and (type(value) is not int):
        raise ProtocolError(f"{data['$']}.{name} must be an int")
    if kind is not int and not isinstance(value, kind):
        raise ProtocolError(f"{data['$']}.{name} must be a {kind.__name__}")
    return value


def _kind(text) -> WriteKind:
    try:
        return WriteKind(text)
    except ValueError:
        raise ProtocolError(f"unknown write kind {text!r}") from None


EXTRA_TYPES = {"ttl": (int, float), "wall": (int, float), "min_commit_ts": (int,),
               "for_update_ts": (int,)}


def _lock_extras(data, depth: int) -> dict:
    """TiKV's lock fields (:func:`percolator_ref.variants.locks.extras_of`), validated."""
    if data is None:
        return {}
    extras = decode(data, depth + 1)
    if not isinstance(extras, dict) or not set(extras) <= set(EXTRA_TYPES) | {"secondaries"}:
        raise ProtocolError("Lock.extras must map TiKV's lock fields to values")
    for name, value in extras.items():
        if name == "secondaries":
            if not (isinstance(value, list) and len(value) <= 64 and all(
                    isinstance(c, list) and len(c) == 3 and all(isinstance(p, str) for p in c)
                    for c in value)):
                raise ProtocolError("Lock.secondaries must be a list of cells")
        elif type(value) not in EXTRA_TYPES[name] or (type(value) is float
                                                     and not math.isfinite(value)):
            raise ProtocolError(f"Lock.{name} must be a number")
    return extras


def _decode_tagged(data: dict, depth: int):
    tag = data["$"]
    if tag == "K":
        return _kind(data.get("v"))
    if tag == "Write":
        v = _field(data, "v", list)
        if len(v) != 2 or type(v[0]) is not int:
            raise ProtocolError("Write is [start_ts, kind]")
        return Write(v[0], _kind(v[1]))
    if tag == "Lock":
        v = _field(data, "v", list)
        if not (len(v) == 7 and type(v[0]) is int and all(isinstance(p, str) for p in v[1:4])
                and isinstance(v[4], bool) and (v[5] is None or isinstance(v[5], str))):
            raise ProtocolError("Lock is [start_ts, table, row, column, is_primary, client, kind]")
        return lock_with_extras(v[0], Cell(*v[1:4]), v[4], v[5], _kind(v[6]),
                                _lock_extras(data.get("extras"), depth))
    if tag == "Cell":
        v = _field(data, "v", list)
        if len(v) != 3 or not all(isinstance(p, str) for p in v):
            raise ProtocolError("Cell must be three strings")
        return Cell(*v)
    if tag == "T":
        return tuple(decode(v, depth + 1) for v in _field(data, "v", list))
    if tag == "B":
        try:
            return bytes.fromhex(_field(data, "v", str))
        except ValueError:
            raise ProtocolError("bad bytes") from None
    if tag == "F":
        if data.get("v") not in ("nan", "inf", "-inf"):
            raise ProtocolError("bad float")
        return float(data["v"])
    if tag == "D":
        return _decode_dict(_field(data, "v", list), depth)
    if tag == "Row":
        return _decode_row(_field(data, "v", list), depth)
    raise ProtocolError(f"unknown tag {tag!r}")


def _decode_dict(pairs: list, depth: int) -> dict:
    if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise ProtocolError("bad dict")
    out, hashes = {}, {}
    for k, v in pairs:
        key = decode(k, depth + 1)
        try:
            h = hash(key)
        except TypeError:
            raise ProtocolError("unhashable dict key") from None
        h %= sys.hash_info.modulus                 # hash(h) == h: these keys spread
        hashes[h] = hashes.get(h, 0) + 1
        if hashes[h] > MAX_SAME_HASH:
            raise ProtocolError(f"more than {MAX_SAME_HASH} dict keys share one hash")
        out[key] = decode(v, depth + 1)
    return out


def _decode_row(columns: list, depth: int) -> dict:
    row = {}
    for entry in columns:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list)):
            raise ProtocolError("a row is [[column, versions], ...]")
        versions = row[entry[0]] = []
        for version in entry[1]:
            if not (isinstance(version, list) and len(version) == 2 and type(version[0]) is int):
                raise ProtocolError("a version is [ts, value]")
            versions.append((version[0], decode(version[1], depth + 2)))
    return row


# -- messages --------------------------------------------------------------------

_CLIENT_OPS = {
    "row": {"table": str, "row": str, "step": str},
    "end": {"commit": bool, "mutations": list},
    "ts": {}, "peek": {}, "now": {},
    "sleep": {"seconds": (int, float)},
    "ls": {"fn": str, "client": (str, type(None))},
    "rows": {"table": str, "start": (str, type(None)), "end": (str, type(None))},
    "observed": {"table": str, "column": str},
    "answer": {"outcome": dict},
    "disk": {"fn": str, "path": str, "to": (str, type(None)), "data": (str, type(None)),
             "mode": (str, type(None))},
}
SCHEDULED = frozenset({"row", "ts"})
LOCK_SERVICE_CALLS = frozenset({"register", "heartbeat", "crash", "release", "is_alive", "status"})
DISK_CALLS = frozenset({"stat", "read", "list", "open", "put", "replace", "remove", "sync", "stray"})
DISK_MUTATIONS = frozenset({"open", "put", "replace", "remove"})   # each a crash point
DISK_ROOT = "/oracle-disk"    # the virtual disk's directory (exists nowhere): client.vdisk, judge.disk
DISK_MAX_FILE = 4096          # characters in one file of the virtual disk


def check_client_message(msg) -> dict:
    """``msg`` if it is a well-formed client message, else :class:`ProtocolError`."""
    if not isinstance(msg, dict) or type(msg.get("cid")) is not int:
        raise ProtocolError("a message must be an object with an int cid")
    fields = _CLIENT_OPS.get(msg.get("op"))
    if fields is None:
        raise ProtocolError(f"unknown operation {str(msg.get('op'))[:40]!r}")
    if set(msg) != {"cid", "op", *fields}:
        raise ProtocolError(f"{msg['op']}: fields must be {sorted(fields)}")
    for name, kind in fields.items():
        if not isinstance(msg[name], kind) or msg[name] is True and kind == (int, float):
            raise ProtocolError(f"{msg['op']}.{name} has the wrong type")
        if isinstance(msg[name], str) and len(msg[name]) > MAX_TEXT:
            raise ProtocolError(f"{msg['op']}.{name} is too long")
    if msg["op"] == "ls" and msg["fn"] not in LOCK_SERVICE_CALLS:
        raise ProtocolError(f"unknown lock-service call {msg['fn'][:40]!r}")
    if msg["op"] == "disk" and msg["fn"] not in DISK_CALLS:
        raise ProtocolError(f"unknown disk call {msg['fn'][:40]!r}")
    if msg["op"] == "end":
        msg["mutations"] = [_mutation(m) for m in msg["mutations"]]
    if msg["op"] == "answer":
        msg["outcome"] = _outcome(msg["outcome"])
    return msg


def _mutation(m) -> tuple:
    if not (isinstance(m, list) and len(m) == 3 and isinstance(m[0], str) and type(m[1]) is int):
        raise ProtocolError("a mutation is [column, ts, value]")
    if len(m[0]) > MAX_TEXT or not 0 <= m[1] < 1 << 63:
        raise ProtocolError("a mutation's column or timestamp is out of range")
    return (m[0], m[1], None if m[2] is None else decode(m[2]))


def _outcome(out: dict) -> dict:
    if set(out) == {"value"}:
        return {"value": decode(out["value"])}
    if set(out) == {"raised"} and isinstance(out["raised"], str):
        return {"raised": out["raised"][:300]}
    raise ProtocolError("an answer is {value} or {raised}")


# -- framing -------------------------------------------------------------------------

def frame(msg: dict) -> bytes:
    return framed(json.dumps(msg, separators=(",", ":")).encode())


def framed(data: bytes) -> bytes:
    """``data`` (one message's JSON) with its length header."""
    if len(data) > MAX_MESSAGE:
        raise ProtocolError("message too large")
    return _HEADER.pack(len(data)) + data


def routed(cid: int, data: bytes) -> bytes:
    """A frame on the sandbox's channel (between the grader and the child's router,
    :mod:`.processes`): ``data`` (one message's JSON) with its length and the id of the
    client it is for or from. The client's own frames (:func:`framed`) carry no id: the
    router adds it, so a client speaks only for itself."""
    if len(data) > MAX_MESSAGE:
        raise ProtocolError("message too large")
    return ROUTED.pack(len(data), cid) + data


def addressed(msg: dict, cid: int) -> tuple:
    """``(text, frame)``: ``msg`` (which has no ``cid``) as JSON text, the same whichever
    client it goes to, and the frame that carries it to client ``cid`` (:func:`routed`)."""
    text = json.dumps(msg, separators=(",", ":"))
    return text, routed(cid, text.encode())


def read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("channel closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int) -> dict:
    """One framed message from ``fd`` (EOFError when closed; ProtocolError when malformed)."""
    (size,) = _HEADER.unpack(read_exact(fd, _HEADER.size))
    if size > MAX_MESSAGE:
        raise ProtocolError("message too large")
    return parse(read_exact(fd, size))


def parse(data: bytes) -> dict:
    """One frame's body as a message (ProtocolError unless a JSON object; a frame nested
    deeper than the parser's recursion limit is one too)."""
    try:
        msg = json.loads(data)
    except ValueError:
        raise ProtocolError("not JSON") from None
    except RecursionError:
        raise ProtocolError("a message nested too deeply") from None
    if not isinstance(msg, dict):
        raise ProtocolError("a message must be a JSON object")
    return msg


class FrameReader:
    """Framed messages from one fd, each awaited with a time limit.

    A writer that stops halfway through a frame holds the reader no longer
    than the limit (what it wrote stays buffered for the next call).
    ``routed=True``: the frames are :func:`routed`; each message's ``cid`` is the
    frame's, whatever the message says, and a frame whose body is not a JSON
    object reads as ``{"cid": cid, "op": "malformed"}`` (that client's violation).
    """

    CHUNK = 1 << 16

    def __init__(self, fd: int, routed: bool = False):
        self.fd, self.buffer = fd, bytearray()
        self.header = ROUTED if routed else _HEADER
        self.poll = select.poll()
        self.poll.register(fd, select.POLLIN)

    def receive(self, timeout: float):
        """The next message; None once the channel is closed or broken (EOF, a read
        error, a malformed frame); TimeoutError if none came within ``timeout`` s."""
        deadline = time.monotonic() + max(timeout, 0.0)
        try:
            self.fill(self.header.size, deadline)
            self.fill(self.header.size + self.header.unpack_from(self.buffer)[0], deadline)
            fields, data = self.take()
            if len(fields) == 1:
                return parse(data)
        except TimeoutError:
            raise
        except (EOFError, OSError, ProtocolError):       # (TimeoutError is an OSError)
            return None
        try:
            msg = parse(data)
        except ProtocolError:
            msg = {"op": "malformed"}
        msg["cid"] = fields[1]
        return msg

    def take(self):
        """``(header fields, body)`` of the next frame if it is whole in the buffer, else
        None; ProtocolError if it announces a body over :data:`MAX_MESSAGE`."""
        size = self.header.size
        if len(self.buffer) < size:
            return None
        fields = self.header.unpack_from(self.buffer)
        if fields[0] > MAX_MESSAGE:
            raise ProtocolError("message too large")
        end = size + fields[0]
        if len(self.buffer) < end:
            return None
        data = bytes(self.buffer[size:end])
        del self.buffer[:end]
        return fields, data

    def read_some(self) -> bool:
        """One read into the buffer (once poll said the fd is readable, so it does not
        block); False at the end of the channel or on a read error."""
        try:
            chunk = os.read(self.fd, self.CHUNK)
        except OSError:
            return False
        self.buffer += chunk
        return bool(chunk)

    def fill(self, n: int, deadline: float) -> None:
        """Read until the buffer holds ``n`` bytes (a frame is taken only once it is whole)."""
        if n > self.header.size + MAX_MESSAGE:
            raise ProtocolError("message too large")
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not self.poll.poll(left * 1000):
                raise TimeoutError("no message in time")
            chunk = os.read(self.fd, max(self.CHUNK, n - len(self.buffer)))
            if not chunk:
                raise EOFError("channel closed")
            self.buffer += chunk


class PipeWriter:
    """Thread-safe framed writes to one fd.

    ``deadline=True``: the fd is made non-blocking and each write takes a
    deadline (a reader that stops reading holds the writer no longer).
    """

    def __init__(self, fd: int, deadline: bool = False):
        self.fd, self.lock = fd, threading.Lock()
        self.poll = None
        if deadline:
            os.set_blocking(fd, False)
            self.poll = select.poll()
            self.poll.register(fd, select.POLLOUT)

    def send(self, msg: dict) -> None:
        self.write(frame(msg))

    def write(self, data: bytes, deadline: float = None) -> None:
        """Write one whole frame; TimeoutError if the reader has not taken it all by
        ``deadline`` (``time.monotonic()``; only for a writer made with ``deadline=True``)."""
        view = memoryview(data)
        with self.lock:
            while view:
                try:
                    view = view[os.write(self.fd, view):]
                except BlockingIOError:          # a full pipe: wait for room until the deadline
                    left = math.inf if deadline is None else deadline - time.monotonic()
                    if left <= 0 or not self.poll.poll(None if left == math.inf else left * 1000):
                        raise TimeoutError("the reader took no data in time") from None
