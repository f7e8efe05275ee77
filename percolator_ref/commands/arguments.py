"""Command-line arguments checked where they enter (every ``percolator`` command).

Each numeric argument has a type with a range: a value outside it (``nan``,
``inf``, ``0``, ``-1``, a count too large to finish, text) is refused by the
parser with ONE line naming the argument and its range, exit status 2, before
anything runs. The upper bounds keep every run finite; ``--help`` states them
(``str(kind)`` is the range as text).

:class:`OneLineParser` is the parser class of every command: its errors are
one line (``percolator soak: error: argument --seconds: ...``), no usage dump.
:func:`refuse` is the same one line for a value found unusable at run time
(a ``--backend`` that does not answer).
"""
from __future__ import annotations

import argparse
import math
import sys
from urllib.parse import urlparse

__all__ = ["Count", "Number", "OneLineParser", "Seconds", "backend_argument", "refuse"]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class Count:
    """An int in ``[low, high]``; ``str()`` is the range for ``--help``."""

    def __init__(self, low: int, high: int):
        self.low, self.high = low, high

    def __call__(self, text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except (ValueError, AttributeError):
            raise argparse.ArgumentTypeError(
                f"must be a whole number in {self}, got {text!r}") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"must be in {self}, got {value}")
        return value

    def __str__(self):
        return f"{self.low}..{self.high:,}"


class Seconds:
    """A finite number of seconds in ``(0, high]`` (``zero=True``: ``[0, high]``)."""

    def __init__(self, high: float, zero: bool = False):
        self.high, self.zero = high, zero

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"must be a number in {self}, got {text!r}") from None
        low_ok = value >= 0 if self.zero else value > 0
        if not (math.isfinite(value) and low_ok and value <= self.high):
            raise argparse.ArgumentTypeError(f"must be a finite number in {self}, got {text!r}")
        return value

    def __str__(self):
        return f"{'[0' if self.zero else '(0'}, {self.high:g}] s"


class Number:
    """A finite number in ``[low, high]`` (a factor, not a duration)."""

    def __init__(self, low: float, high: float):
        self.low, self.high = low, high

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"must be a number in {self}, got {text!r}") from None
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise argparse.ArgumentTypeError(f"must be a finite number in {self}, got {text!r}")
        return value

    def __str__(self):
        return f"[{self.low:g}, {self.high:g}]"


def backend_argument(*words: str):
    """The ``--backend`` type: one of ``words`` (e.g. ``redis``), ``memory`` (-> None), or a
    ``redis://`` / ``redis+cluster://`` URL; anything else is refused by the parser."""
    def parse(text: str):
        if text == "memory":
            return None
        if text in words or urlparse(text).scheme in ("redis", "redis+cluster"):
            return text
        shown = ", ".join(repr(w) for w in ("memory", *words))
        raise argparse.ArgumentTypeError(
            f"must be {shown} or a redis://HOST:PORT/DB or redis+cluster://HOST:PORT URL, "
            f"got {text!r}")
    parse.__name__ = "backend"
    return parse


def refuse(command: str, error: BaseException) -> int:
    """Print ``error`` as the command's one-line refusal; the exit status 2."""
    text = " ".join(str(error).split()) or type(error).__name__
    print(f"percolator {command}: error: {text}", file=sys.stderr)
    return 2
