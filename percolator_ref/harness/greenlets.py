"""Switching greenlets without a garbage collection on a foreign stack (Pyodide's crash).

Every switch into a client of the grading host, a stepped script or a simulated
process goes through :func:`switch_into`; code that runs many greenlets pauses
the collector around them with :func:`gc_paused`. Outside :mod:`percolator_ref.viz` because the
grading child runs its clients through it and loads no visualisation.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager


def switch_into(stack, *args):
    """``stack.switch(*args)`` (a greenlet) with Python's cyclic garbage collector paused
    until control comes back to the caller; returns what ``switch`` returns.

    Under Pyodide (greenlet 3.5.1.dev0+pyodide) a collection that starts while a
    greenlet other than the one that runs the notebook is current, and frees
    greenlets or their frames, kills the interpreter ("memory access out of
    bounds"): seen in 3 of 4 runs of exercise 01's self-check in Chromium, none
    in 6 with the collector paused. Every switch into a client, a stepped script
    or a simulated process goes through here, so collections run only on the
    caller's stack. In CPython it changes nothing but when a collection runs.
    """
    if not gc.isenabled():               # nested, or the caller paused it itself
        return stack.switch(*args)
    gc.disable()
    try:
        return stack.switch(*args)
    finally:
        gc.enable()


@contextmanager
def gc_paused(pause: bool = True):
    """With ``pause``, Python's cyclic garbage collector is off for the block and
    collects once, on the caller's stack, when the block ends.

    For code that runs many greenlets under Pyodide: :func:`switch_into` alone
    was not enough there. Exercise 01's worked example (a self-check of a wrong
    answer) still killed the interpreter in 2 of 2 runs in Chromium when
    collections could run between switches, and passed in 2 of 2 with the
    collector off until the check had ended.
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()
