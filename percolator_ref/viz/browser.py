"""Running in a browser: what the static JupyterLite site (Pyodide) cannot do.

Under Pyodide (``sys.platform == "emscripten"``) there are no sockets, no
subprocesses and no threads: Redis, client processes and thread-timed runs
are out of reach. A notebook that needs them calls
:func:`needs_local_python` in its first code cell: in CPython it does
nothing (and prints nothing); in a browser it prints a short note instead of a
traceback halfway down, and from then on a cell below it that is run unchanged
shows its recorded output again instead of running (:func:`replay_recorded_cells`):
Run All keeps the notebook's recorded run visible (JupyterLab clears a cell's
output when it queues it, so stopping with an error wiped every output below).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


IN_BROWSER = sys.platform == "emscripten"


class NeedsLocalPython(RuntimeError):
    """Raised in a browser by :func:`needs_local_python`; shown as its note, not a traceback."""

    def _render_traceback_(self):        # IPython shows these lines instead of a traceback
        return [str(self)]


def needs_local_python(reason: str) -> None:
    """Stop here when running in a browser; ``reason``: what the notebook needs that it lacks.

    In a browser whose kernel lets the kit replay recorded cells (the site's Pyodide kernel),
    the note is printed and the cells below show their recorded outputs when run; elsewhere in
    a browser it raises :class:`NeedsLocalPython` (the note, no traceback)."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"reason must say what the notebook needs, got {reason!r}")
    if not IN_BROWSER:
        return
    note = (f"This notebook needs a local Python: {reason}. A browser (Pyodide) has no "
            f"sockets, subprocesses or threads, so it does not run here.")
    where = "To run it, use JupyterLab on your machine (make lab) or Binder (see the README)."
    replayed = replay_recorded_cells(reason)
    if replayed:
        print(f"{note} The {replayed} cells below show a recorded run: running one unchanged "
              f"shows its recorded output again. {where}")
        return
    raise NeedsLocalPython(f"{note} The saved outputs below are a recorded run. {where}")


# -- recorded cells (in a browser) ---------------------------------------------------------
RECORDED: dict = {}      # a cell's source (stripped) -> its saved outputs, once registered
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def recorded_cells(notebook: dict, reason: str) -> dict:
    """``{source: outputs}`` of the code cells after the one that calls
    ``needs_local_python`` with ``reason`` ({} if ``notebook`` has no such cell)."""
    cells = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    source = ["".join(c.get("source", "")) for c in cells]
    guard = next((i for i, s in enumerate(source)
                  if "needs_local_python(" in s and json.dumps(reason)[1:-1][:40] in s), None)
    if guard is None:
        return {}
    return {s.strip(): c.get("outputs", []) for s, c in zip(source[guard + 1:], cells[guard + 1:])
            if s.strip()}


def replay_recorded_cells(reason: str, folder: Path = Path(".")) -> int:
    """Make every later run of a recorded cell show its saved outputs; return how many cells.

    The notebook is the one in ``folder`` (the kernel's folder) whose guard cell names
    ``reason``. Works through the site's Pyodide kernel (``pyodide_kernel``): a transform
    that runs before the kernel loads a cell's imports swaps a recorded cell's code for
    :func:`show_recorded`. 0 (and nothing changed) where that kernel or notebook is absent."""
    try:
        from pyodide_kernel import kernel_instance
        transforms = kernel_instance.lite_transform_manager.line_transforms
    except (ImportError, AttributeError):
        return 0
    found = {}
    for path in sorted(Path(folder).glob("*.ipynb")):
        try:
            found = recorded_cells(json.loads(path.read_text()), reason)
        except (OSError, ValueError):
            continue
        if found:
            break
    if not found:
        return 0
    RECORDED.update(found)
    if _swap_recorded not in transforms:
        transforms.append(_swap_recorded)
    return len(found)


async def _swap_recorded(lines: list) -> list:
    source = "".join(lines).strip()
    if source in RECORDED:
        return ["from percolator_ref.viz.browser import show_recorded\n",
                f"show_recorded({source!r})\n"]
    return lines


def show_recorded(source: str) -> None:
    """Show the saved outputs of the recorded cell ``source`` (its widgets as their saved
    text and HTML: their live state is not here)."""
    from IPython.display import publish_display_data
    for out in RECORDED.get(source, []):
        kind = out.get("output_type")
        if kind == "stream":
            stream = sys.stderr if out.get("name") == "stderr" else sys.stdout
            stream.write("".join(out.get("text", "")))
        elif kind in ("display_data", "execute_result"):
            data = {k: "".join(v) if isinstance(v, list) else v
                    for k, v in out.get("data", {}).items() if k != _WIDGET_VIEW}
            if data:
                publish_display_data(data, out.get("metadata", {}))
        elif kind == "error":
            print("\n".join(out.get("traceback", [])), file=sys.stderr)
