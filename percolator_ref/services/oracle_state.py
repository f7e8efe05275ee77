"""The timestamp oracle's state file (paper §2.3: the persisted high-water mark).

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
import zlib
from typing import Optional

from ..errors import OracleStateCorrupt
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
