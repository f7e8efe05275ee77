"""The timestamp oracle (paper section 2.3).

Hands out strictly increasing integer timestamps. To scale, it allocates
*ranges*: before serving any timestamp of a new range it persists the range's
end (the high-water mark) to ``state_path``; timestamps inside the range come
from memory. After a crash the new oracle starts at the persisted mark, so it
skips what the old one had not handed out yet and never goes back.

:class:`BatchingOracleClient` is the client side of the paper's other trick:
each worker keeps at most one request to the oracle in flight, and callers
that arrive meanwhile share the next request (one RPC for many timestamps).

The state file (the kit's own format; the paper does not describe one) is
one ASCII line::

    PERCOLATOR-ORACLE v1 <mark> <crc32>\\n

``<mark>`` is a decimal integer (digits 0-9 only, no sign, no ``_``, no
leading zero); ``<crc32>`` is the CRC-32 of the text before it (the magic
word, the version and the mark, with their spaces) as 8 lowercase hex digits.
:func:`read_high_water_mark` parses it strictly: a file that is empty, not
UTF-8, truncated, of another version, with a checksum that does not match,
with a malformed number or with anything after the line raises
:class:`~percolator_ref.errors.OracleStateCorrupt`, whose message names the
file and what is wrong. The oracle then refuses to start rather than guess:
a wrong mark could make it reissue timestamps. :func:`write_high_water_mark`
writes durably: a temporary file, flushed and fsynced, renamed over the state
file with ``os.replace``, then the directory fsynced so the rename itself
survives a power loss.

Old format: earlier versions wrote the bare mark and a newline (``"2501\\n"``).
Such a file is accepted once, parsed as strictly as the mark above (and it
must end with its newline, so a cut-off file is refused), and at once
rewritten in the v1 format. Anything else without the magic word is refused.
"""
from __future__ import annotations

import os
import re
import threading
import zlib
from typing import Optional

from .errors import OracleStateCorrupt

DEFAULT_RANGE = 100_000
STATE_MAGIC = "PERCOLATOR-ORACLE"
STATE_VERSION = "v1"
_MARK = re.compile(r"0|[1-9][0-9]*", re.ASCII)
_CRC = re.compile(r"[0-9a-f]{8}", re.ASCII)


# -- the state file ------------------------------------------------------------

def _checksum(mark_text: str) -> str:
    """CRC-32 (8 lowercase hex digits) of ``"PERCOLATOR-ORACLE v1 <mark>"``."""
    body = f"{STATE_MAGIC} {STATE_VERSION} {mark_text}"
    return f"{zlib.crc32(body.encode('utf-8')):08x}"


def format_high_water_mark(mark: int) -> bytes:
    """The state file's content for ``mark`` (one line, see the module docstring)."""
    if isinstance(mark, bool) or not isinstance(mark, int) or mark < 0:
        raise ValueError(f"mark must be an int >= 0, got {mark!r}")
    text = str(mark)
    return f"{STATE_MAGIC} {STATE_VERSION} {text} {_checksum(text)}\n".encode("ascii")


def _corrupt(path: str, what: str) -> OracleStateCorrupt:
    return OracleStateCorrupt(f"oracle state file (state_path) {path!r} is corrupt: {what}; "
                              f"refusing to start, since a wrong mark could reissue timestamps")


def _parse_mark(path: str, text: str) -> int:
    """``text`` as a mark: digits 0-9 only, no sign, no '_', no leading zero."""
    if not _MARK.fullmatch(text):
        raise _corrupt(path, f"the mark {text[:40]!r} is not a decimal integer "
                             f"(digits 0-9 only, no sign, no '_', no leading zero)")
    try:
        return int(text)
    except ValueError:                          # more digits than int() converts
        raise _corrupt(path, f"the mark has {len(text)} digits, too many") from None


def _decode(path: str, raw: bytes) -> str:
    """The file's bytes as text, or a clear error for an empty or non-UTF-8 file."""
    if not raw:
        raise _corrupt(path, "the file is empty (truncated?)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _corrupt(path, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                             f"{e.start})") from None


def _parse_v1_line(path: str, text: str) -> int:
    """The mark of a ``PERCOLATOR-ORACLE v1 <mark> <crc32>`` line (newline already removed)."""
    fields = text.split(" ")
    if len(fields) != 4:
        raise _corrupt(path, f"expected 4 space-separated fields "
                             f"'{STATE_MAGIC} {STATE_VERSION} <mark> <crc32>', got {len(fields)}"
                             f" in {text[:80]!r} (truncated?)")
    magic, version, mark_text, crc = fields
    if magic != STATE_MAGIC:
        raise _corrupt(path, f"first word is {magic[:40]!r}, not {STATE_MAGIC!r}")
    if version != STATE_VERSION:
        raise _corrupt(path, f"unsupported version {version[:20]!r} (this code reads "
                             f"{STATE_VERSION!r})")
    if not _CRC.fullmatch(crc):
        raise _corrupt(path, f"checksum {crc[:20]!r} is not 8 lowercase hex digits (truncated?)")
    if crc != _checksum(mark_text):
        raise _corrupt(path, f"checksum mismatch: the file says {crc}, its content gives "
                             f"{_checksum(mark_text)} (truncated or damaged)")
    return _parse_mark(path, mark_text)


def parse_high_water_mark(path: str, raw: bytes) -> tuple:
    """``(mark, old_format)`` from a state file's bytes; OracleStateCorrupt names what is bad."""
    text = _decode(path, raw)
    if not text.endswith("\n"):
        raise _corrupt(path, f"the last line has no newline (truncated?): {text[-40:]!r}")
    line, _, rest = text.partition("\n")
    if rest:
        raise _corrupt(path, f"unexpected data after the first line: {rest[:40]!r}")
    if line.startswith(STATE_MAGIC):
        return _parse_v1_line(path, line), False
    if not _MARK.fullmatch(line):
        raise _corrupt(path, f"neither a '{STATE_MAGIC} {STATE_VERSION} <mark> <crc32>' line "
                             f"nor an old-format mark (digits 0-9 only, no sign, no '_', "
                             f"no leading zero): {line[:40]!r}")
    return _parse_mark(path, line), True


def read_high_water_mark(path) -> Optional[int]:
    """The mark persisted at ``path`` (None: no file); OracleStateCorrupt if it is bad."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        raw = f.read()
    return parse_high_water_mark(path, raw)[0]


def write_high_water_mark(path, mark: int) -> None:
    """Durably replace the state file at ``path`` by ``mark`` (see the module docstring)."""
    path = os.fspath(path)
    content = format_high_water_mark(mark)          # before touching any file
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_directory(os.path.dirname(os.path.abspath(path)))


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (POSIX; Windows cannot open a directory)."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TimestampOracle:
    """Strictly increasing timestamps, with a persisted high-water mark.

    ``get_timestamp()`` returns the next integer; without a restart the
    numbers are consecutive from ``first_timestamp``. ``get_timestamps(n)``
    returns ``n`` consecutive ones as a ``range`` in one call. Thread-safe.
    ``calls`` counts oracle calls (RPCs), ``range_writes`` counts how often
    the high-water mark was persisted. A damaged ``state_path`` file raises
    :class:`~percolator_ref.errors.OracleStateCorrupt` here, at construction.
    """

    def __init__(self, state_path: Optional[str] = None, first_timestamp: int = 1,
                 range_size: int = DEFAULT_RANGE):
        if isinstance(first_timestamp, bool) or not isinstance(first_timestamp, int):
            raise TypeError(f"first_timestamp must be an int, got {first_timestamp!r}")
        if first_timestamp < 0:
            raise ValueError(f"first_timestamp must be >= 0, got {first_timestamp}")
        if isinstance(range_size, bool) or not isinstance(range_size, int) or range_size < 1:
            raise ValueError(f"range_size must be a positive int, got {range_size!r}")
        if state_path is not None and not isinstance(state_path, (str, os.PathLike)):
            raise TypeError(f"state_path must be a path or None, got {state_path!r}")
        self.state_path = os.fspath(state_path) if state_path is not None else None
        self.range_size = range_size
        self.calls = 0
        self.range_writes = 0
        self._lock = threading.Lock()
        self._next = max(first_timestamp, self._read_high_water_mark())
        self._limit = self._next            # first timestamp NOT yet covered by a persisted range

    # -- the high-water mark ---------------------------------------------
    def _read_high_water_mark(self) -> int:
        """The persisted mark (0 if none): no timestamp below it is ever reissued.

        An old-format file is rewritten in the v1 format at once (same mark).
        """
        if self.state_path is None or not os.path.exists(self.state_path):
            return 0
        with open(self.state_path, "rb") as f:
            raw = f.read()
        mark, old_format = parse_high_water_mark(self.state_path, raw)
        if old_format:
            write_high_water_mark(self.state_path, mark)
        return mark

    def _persist_high_water_mark(self, mark: int) -> None:
        """Durably record ``mark`` before any timestamp of its range is served."""
        if self.state_path is not None:
            write_high_water_mark(self.state_path, mark)
        self.range_writes += 1

    def _allocate_range(self, needed: int) -> None:
        """Persist a new range end covering at least ``needed`` more timestamps."""
        mark = self._next + max(self.range_size, needed)
        self._persist_high_water_mark(mark)
        self._limit = mark

    # -- serving ---------------------------------------------------------
    def get_timestamp(self) -> int:
        """The next timestamp: larger than every one handed out before."""
        with self._lock:
            self.calls += 1
            if self._next >= self._limit:
                self._allocate_range(1)
            ts = self._next
            self._next += 1
            return ts

    def get_timestamps(self, n: int) -> range:
        """``n`` consecutive timestamps in one oracle call."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        with self._lock:
            self.calls += 1
            if self._next + n > self._limit:
                self._allocate_range(n)
            first = self._next
            self._next += n
            return range(first, first + n)

    @property
    def high_water_mark(self) -> int:
        """The end of the persisted range: a restart resumes here."""
        return self._limit

    def peek(self) -> int:
        """The timestamp the next call would return (for display only)."""
        return self._next

    def __repr__(self):
        return f"TimestampOracle(next={self._next}, high_water_mark={self._limit})"


class BatchingOracleClient:
    """One worker's oracle client: at most one request in flight.

    Threads calling ``get_timestamp()`` while a request is outstanding wait
    and are served together by the next request (``oracle.get_timestamps(k)``).
    ``requests`` counts the oracle calls this client made; ``served`` the
    timestamps it returned. Each caller gets a unique timestamp, and a
    caller's timestamps increase.
    """

    def __init__(self, oracle: TimestampOracle):
        self.oracle = oracle
        self.requests = 0
        self.served = 0
        self._cond = threading.Condition()
        self._waiting = 0           # callers queued for the next request
        self._in_flight = False
        self._batch_id = 0          # id of the batch now being collected
        self._results: dict[int, list] = {}

    def get_timestamp(self) -> int:
        with self._cond:
            batch = self._batch_id
            self._waiting += 1
            while self._in_flight and batch == self._batch_id:
                self._cond.wait()
            if batch == self._batch_id:          # we lead this batch
                return self._lead_batch(batch)
            while batch not in self._results:   # a leader is fetching ours
                self._cond.wait()
            return self._take(batch)

    def _lead_batch(self, batch: int) -> int:
        count, self._waiting = self._waiting, 0
        self._in_flight = True
        self._batch_id += 1                       # later arrivals form the next batch
        self._cond.release()
        try:
            stamps = list(self.oracle.get_timestamps(count))
        finally:
            self._cond.acquire()
        self.requests += 1
        self._in_flight = False
        self._results[batch] = stamps
        self._cond.notify_all()
        return self._take(batch)

    def _take(self, batch: int) -> int:
        stamps = self._results[batch]
        ts = stamps.pop(0)
        if not stamps:
            del self._results[batch]
        self.served += 1
        return ts
