"""The oracle's state file: a checksummed line, strictly parsed, written durably.

Every corrupt file makes the oracle refuse to start with ``OracleStateCorrupt``
naming the file (never a bare ValueError or UnicodeDecodeError, never a
silent restart near 1); the old plain-number format is accepted once and
rewritten.
"""
import os
import stat
import zlib

import pytest

from percolator_ref import OracleStateCorrupt, PercolatorError, TimestampOracle


def v1_line(mark_text, crc=None):
    """A v1 state line for ``mark_text`` with its correct checksum (or ``crc``)."""
    body = f"PERCOLATOR-ORACLE v1 {mark_text}"
    crc = crc if crc is not None else f"{zlib.crc32(body.encode('utf-8')):08x}"
    return f"{body} {crc}\n".encode("utf-8")


@pytest.fixture
def path(tmp_path):
    return tmp_path / "oracle.state"


def refused(path, content, why):
    """Write ``content``; a new oracle must refuse it naming the file and ``why``."""
    path.write_bytes(content)
    with pytest.raises(OracleStateCorrupt) as caught:
        TimestampOracle(state_path=path)
    message = str(caught.value)
    assert str(path) in message and why in message, message
    assert isinstance(caught.value, PercolatorError)
    assert path.read_bytes() == content                    # a refused file is left as it was
    return message


# -- the format ------------------------------------------------------------------

def test_state_file_is_one_checksummed_line(path):
    oracle = TimestampOracle(state_path=path, first_timestamp=1, range_size=100)
    assert oracle.get_timestamp() == 1
    assert path.read_bytes() == v1_line("101")
    assert not os.path.exists(f"{path}.tmp")


# -- corrupt files: each refused with a message naming the file and the defect ---------

@pytest.mark.parametrize("mark, why", [
    ("-5", "not a decimal integer"), ("-0", "not a decimal integer"),
    ("1_0", "not a decimal integer"), ("+7", "not a decimal integer"),
    ("\uff12\uff15\uff10\uff10", "not a decimal integer"),     # full-width 2500
    ("0100", "not a decimal integer"), ("", "not a decimal integer"),
    ("12 34", "fields"),
])
def test_malformed_mark_with_a_valid_checksum_is_refused(path, mark, why):
    refused(path, v1_line(mark), why)


@pytest.mark.parametrize("content, why", [
    (b"", "empty"),
    (b"\xff\xfe2500\n", "not UTF-8"),
    (v1_line("2500")[:-1], "no newline"),                          # cut before the newline
    (v1_line("2500") + b"junk", "no newline"),
    (v1_line("2500") + b"3\n", "after the first line"),
    (v1_line("2500").replace(b"2500", b"2400"), "checksum mismatch"),
    (v1_line("2500", crc="DEADBEEF"), "8 lowercase hex"),
    (v1_line("2500").replace(b"v1", b"v2"), "unsupported version"),
    (b"not a number\n", "neither"),
    (b"-5\n", "neither"), (b"-0\n", "neither"), (b"1_0\n", "neither"),
    (b"+2500\n", "neither"), ("\uff12\uff15\uff10\uff10\n".encode(), "neither"),
    (b" 2500\n", "neither"), (b"2500\r\n", "neither"),
])
def test_corrupt_file_is_refused_naming_the_file(path, content, why):
    refused(path, content, why)


def test_every_truncation_is_detected(path):
    oracle = TimestampOracle(state_path=path, range_size=10)
    handed_out = [oracle.get_timestamp() for _ in range(2500)]
    full = path.read_bytes()
    for cut in range(len(full)):
        message = refused(path, full[:cut], "")
        assert "truncated" in message, message
    path.write_bytes(full)
    assert TimestampOracle(state_path=path, range_size=10).get_timestamp() > handed_out[-1]


def test_damaged_digit_is_detected(path):
    TimestampOracle(state_path=path, range_size=10).get_timestamps(2500)
    full = path.read_bytes()
    assert b" 2501 " in full
    refused(path, full.replace(b" 2501 ", b" 1501 "), "checksum mismatch")
    refused(path, full.replace(b" 2501 ", b" 250 "), "checksum mismatch")


@pytest.mark.parametrize("damage", [
    lambda full, mark: b"-5\n", lambda full, mark: b"-0\n", lambda full, mark: b"1_0\n",
    lambda full, mark: "\uff15\n".encode(),                    # a full-width 5
    lambda full, mark: full[:len(full) // 2],                    # cut in the middle of the mark
    lambda full, mark: full.replace(str(mark).encode(), str(mark)[:1].encode()),
], ids=["-5", "-0", "1_0", "full-width", "cut", "digits-lost"])
def test_restart_after_many_timestamps_never_goes_back(path, damage):
    handed_out = []
    for _ in range(3):                                   # restarts on a sound file
        oracle = TimestampOracle(state_path=path, first_timestamp=1, range_size=7)
        handed_out += [oracle.get_timestamp() for _ in range(2500)]
    assert handed_out == sorted(set(handed_out))
    full = path.read_bytes()
    path.write_bytes(damage(full, oracle.high_water_mark))
    try:
        restarted = TimestampOracle(state_path=path, first_timestamp=1, range_size=7)
    except OracleStateCorrupt as refusal:               # refusing is right; going back is not
        assert str(path) in str(refusal)
    else:
        assert restarted.get_timestamp() > handed_out[-1]


# -- durability --------------------------------------------------------------------

def test_write_fsyncs_the_file_then_renames_then_fsyncs_the_directory(path, monkeypatch):
    real_fsync, real_replace, events = os.fsync, os.replace, []

    def fsync(fd):
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append((kind, os.path.exists(path) and path.read_bytes()))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    TimestampOracle(state_path=path, range_size=100).get_timestamp()
    assert [e[0] for e in events] == ["file", "replace", "dir"]
    assert events[1][1] == str(path)
    assert events[2][1] == v1_line("101")        # the directory is synced after the rename


def test_a_failed_write_leaves_the_old_state(path, monkeypatch):
    oracle = TimestampOracle(state_path=path, range_size=10)
    oracle.get_timestamp()
    before = path.read_bytes()

    def failing_fsync(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        oracle.get_timestamps(10)
    assert path.read_bytes() == before and not os.path.exists(f"{path}.tmp")


# -- the old format ------------------------------------------------------------------

def test_old_format_is_accepted_once_and_rewritten(path):
    path.write_bytes(b"2501\n")                       # what the previous version wrote
    oracle = TimestampOracle(state_path=path, range_size=10)
    assert path.read_bytes() == v1_line("2501")      # rewritten before serving anything
    assert oracle.get_timestamp() == 2501
    assert path.read_bytes() == v1_line("2511")
