"""Running in a browser: what the static JupyterLite site (Pyodide) cannot do.

Under Pyodide (``sys.platform == "emscripten"``) there are no sockets, no
subprocesses and no threads: Redis, client processes and thread-timed runs
are out of reach. A notebook that needs them calls
:func:`needs_local_python` in its first code cell: in CPython it does
nothing (and prints nothing); in a browser it stops the notebook right there
with a short note instead of a traceback halfway down. The notebook's saved
outputs below it still show a recorded run.
"""
from __future__ import annotations

import gc
import sys
from contextlib import contextmanager

IN_BROWSER = sys.platform == "emscripten"


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


class NeedsLocalPython(RuntimeError):
    """Raised in a browser by :func:`needs_local_python`; shown as its note, not a traceback."""

    def _render_traceback_(self):        # IPython shows these lines instead of a traceback
        return [str(self)]


def needs_local_python(reason: str) -> None:
    """Stop here when running in a browser; ``reason``: what the notebook needs that it lacks."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"reason must say what the notebook needs, got {reason!r}")
    if IN_BROWSER:
        raise NeedsLocalPython(
            f"This notebook needs a local Python: {reason}. A browser (Pyodide) has no "
            f"sockets, subprocesses or threads, so it stops here. The saved outputs below "
            f"are a recorded run. To run it, use JupyterLab on your machine (make lab) "
            f"or Binder (see the README).")
