"""Exercise 5: the timestamp oracle (section 2.3).

The student writes a class ``Oracle(state_path, first_timestamp=1,
range_size=1000)`` with ``get_timestamp()``: ranges of timestamps are
allocated by persisting their end (the high-water mark, one integer in the
file at ``state_path``) before any timestamp of the range is served; a new
oracle on the same path (a restart) starts at the persisted mark. The
battery checks it with restarts, the old object simply abandoned as after a
crash.
"""
from __future__ import annotations

import os
import tempfile

from percolator_ref import TimestampOracle
from percolator_ref.oracle import STATE_MAGIC, read_high_water_mark

from .battery import Battery
from .scenarios import expect

battery = Battery(5, "timestamp oracle: ranges and a persisted high-water mark")
reference = TimestampOracle


def _mark(path):
    """The persisted mark: one integer (the exercise's format) or the reference's v1 line."""
    assert os.path.exists(path), "no state file: the high-water mark must be persisted"
    with open(path) as f:
        text = f.read().strip()
    if text.startswith(STATE_MAGIC):           # the reference oracle's checksummed format
        return read_high_water_mark(path)
    assert text.lstrip("-").isdigit(), f"the state file must hold one integer, got {text[:20]!r}"
    return int(text)


def _path(tmp):
    return os.path.join(tmp, "oracle.state")


@battery.check("consecutive timestamps from first_timestamp")
def _consecutive(cls):
    with tempfile.TemporaryDirectory() as tmp:
        o = cls(_path(tmp), first_timestamp=5, range_size=1000)
        expect([o.get_timestamp() for _ in range(6)], [5, 6, 7, 8, 9, 10], "timestamps")


@battery.check("works without a state_path (in memory)")
def _memory(cls):
    o = cls(None, first_timestamp=1, range_size=3)
    expect([o.get_timestamp() for _ in range(7)], list(range(1, 8)), "timestamps")


@battery.check("the mark is persisted before a timestamp is served")
def _persist_first(cls):
    with tempfile.TemporaryDirectory() as tmp:
        o = cls(_path(tmp), first_timestamp=1, range_size=4)
        for _ in range(10):
            ts = o.get_timestamp()
            mark = _mark(_path(tmp))
            assert mark > ts, f"served {ts} while the persisted mark was {mark}"


@battery.check("one write of the mark per range, not per timestamp")
def _ranges(cls):
    with tempfile.TemporaryDirectory() as tmp:
        o = cls(_path(tmp), first_timestamp=1, range_size=100)
        o.get_timestamp()
        first = _mark(_path(tmp))
        for _ in range(49):
            o.get_timestamp()
        expect(_mark(_path(tmp)), first, "mark after 50 timestamps of a 100-wide range")


@battery.check("a restart never reissues a timestamp")
def _restart(cls):
    with tempfile.TemporaryDirectory() as tmp:
        issued = []
        for _ in range(5):
            o = cls(_path(tmp), first_timestamp=1, range_size=10)
            issued.extend(o.get_timestamp() for _ in range(3))
        assert issued == sorted(set(issued)), f"timestamps across 4 restarts: {issued}"


@battery.check("a restart after a range is used up exactly")
def _exhausted(cls):
    with tempfile.TemporaryDirectory() as tmp:
        o = cls(_path(tmp), first_timestamp=1, range_size=4)
        old = [o.get_timestamp() for _ in range(4)]
        new = cls(_path(tmp), first_timestamp=1, range_size=4).get_timestamp()
        assert new > old[-1], f"after serving {old} and a restart, the oracle served {new}"


@battery.check("a restart skips ahead: the mark never goes back")
def _mark_monotonic(cls):
    with tempfile.TemporaryDirectory() as tmp:
        marks = []
        for _ in range(4):
            o = cls(_path(tmp), first_timestamp=1, range_size=5)
            o.get_timestamp()
            marks.append(_mark(_path(tmp)))
        assert marks == sorted(set(marks)), f"marks after each restart: {marks}"


@battery.check("first_timestamp above the persisted mark wins")
def _first_above(cls):
    with tempfile.TemporaryDirectory() as tmp:
        cls(_path(tmp), first_timestamp=1, range_size=5).get_timestamp()
        expect(cls(_path(tmp), first_timestamp=1000, range_size=5).get_timestamp(), 1000,
               "first timestamp after a restart with first_timestamp=1000")


# -- mutants ------------------------------------------------------------------

class _Mutant:
    forget = False           # ignore the state file at a restart
    one_range = False        # persist only the first range
    every_call = False       # persist on every timestamp
    persist_issued = False   # persist the last issued timestamp instead of the range end
    resume_below = False     # resume one below the mark
    ignore_first = False     # ignore first_timestamp when a mark exists

    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.path, self.size = state_path, range_size
        mark = 0
        if state_path and os.path.exists(state_path) and not self.forget:
            with open(state_path) as f:
                mark = int(f.read())
        if self.resume_below:
            mark -= 1
        self.next = mark if (self.ignore_first and mark) else max(first_timestamp, mark)
        self.limit = self.next
        self.ranges = 0

    def _persist(self, mark):
        if self.path:
            with open(self.path, "w") as f:
                f.write(str(mark))

    def get_timestamp(self):
        if self.next >= self.limit or self.every_call:
            self.limit = self.next + self.size
            self.ranges += 1
            if self.ranges == 1 or not self.one_range:
                if not self.persist_issued:
                    self._persist(self.next + (1 if self.every_call else self.size))
        ts, self.next = self.next, self.next + 1
        if self.persist_issued:
            self._persist(ts)
        return ts


def _mutant(name, **flags):
    return type(name, (_Mutant,), flags)


mutants = {
    "oracle reusing timestamps after a restart (ignores the mark)": _mutant("Forget", forget=True),
    "oracle persisting only its first range": _mutant("OneRange", one_range=True),
    "oracle persisting on every timestamp": _mutant("EveryCall", every_call=True),
    "oracle persisting the last issued timestamp": _mutant("Issued", persist_issued=True),
    "oracle resuming one below the mark": _mutant("Below", resume_below=True),
    "oracle ignoring first_timestamp after a restart": _mutant("IgnoreFirst", ignore_first=True),
}
