"""Spanner's answer to the single oracle, as an option of the reference implementation.

Everything here comes from the project's notes on Spanner (seed 004) and is a
successor to the paper, not the paper:

- :mod:`.truetime`: ``TT.now()`` as an interval on simulated machines whose
  clocks are off by at most ``ε`` (7 ms, from GPS and atomic clocks);
- :mod:`.timestamps`: start and commit timestamps from TrueTime instead of
  the oracle, with commit wait (up to ``2ε``) and reads at a safe time.
"""
from .timestamps import TrueTimeTimestamps, Waits
from .truetime import EPSILON_US, TTInterval, TrueTime, true_us

__all__ = ["EPSILON_US", "TTInterval", "TrueTime", "TrueTimeTimestamps", "Waits", "true_us"]
