"""A counterexample to step through: the shortest failing schedule, frame by frame.

A failing family check (:mod:`.schedules`) carries the shortest schedule that
broke a rule: one step per scheduled request (which client did which row
transaction, or took which timestamp, or crashed there) with the cells after
it, as the trusted world recorded them. :func:`save` writes it as JSON
(``percolator grade --counterexamples DIR``); :func:`replay` loads it (a
file, a self-check's report or one of its results) as a :class:`Replay`:
``transcript()`` for a terminal (``percolator replay FILE``), ``widget()``
for a notebook: a frame slider over the cell tables, as the stepper shows them.
"""
from __future__ import annotations

import json
from pathlib import Path

from percolator_ref.viz.tables import CellTable

from .battery import Report, Result
from .channel import ProtocolError, decode

FORMAT = "percolator-counterexample/1"


def save(example: dict, path) -> Path:
    """Write one counterexample (``Result.counterexample``) as JSON."""
    path = Path(path)
    path.write_text(json.dumps(dict(example, format=FORMAT), indent=1) + "\n")
    return path


def counterexamples(source) -> list:
    """The counterexample dicts of a file, a Report, a Result or a dict."""
    if isinstance(source, Report):
        return [r.counterexample for r in source.results if r.counterexample]
    if isinstance(source, Result):
        return [source.counterexample] if source.counterexample else []
    if isinstance(source, dict):
        return [source]
    data = json.loads(Path(source).read_text())
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"source must be a counterexample file ({FORMAT}), got {source!r}")
    return [data]


class Replay:
    """The frames of one counterexample: a title, what happened, the cells after it."""

    def __init__(self, example: dict):
        steps = example.get("steps")
        if not isinstance(steps, list) or not steps:
            raise ValueError("example must hold a non-empty list of steps")
        self.check, self.failure = str(example.get("check", "")), str(example.get("failure", ""))
        self.frames = []
        for i, step in enumerate(steps, 1):
            try:
                dump = decode(step["cells"])
            except (KeyError, TypeError, ProtocolError) as exc:
                raise ValueError(f"step {i} is malformed ({exc})") from None
            title = f"step {i} of {len(steps)}: {step.get('client')} {step.get('did')}"
            self.frames.append((title, CellTable(dump, title=title)))

    def transcript(self) -> str:
        """Every frame as text: the failure, then each step and its cell table."""
        lines = [f"check: {self.check}", f"failed: {self.failure}", ""]
        for _, table in self.frames:
            lines += [repr(table), ""]
        return "\n".join(lines)

    def widget(self):
        """A frame slider over the cell tables (ipywidgets)."""
        import ipywidgets as widgets
        slider = widgets.IntSlider(value=0, min=0, max=len(self.frames) - 1,
                                   description="step", continuous_update=False)
        note, table = widgets.HTML(), widgets.HTML()

        def show(index: int) -> None:
            title, cells = self.frames[index]
            note.value = f"<p><b>{_escape(title)}</b></p>"
            table.value = cells._repr_html_()
        slider.observe(lambda change: show(change["new"]), names="value")
        show(0)
        head = widgets.HTML(f"<p><b>counterexample</b>: {_escape(self.failure)}</p>")
        return widgets.VBox([head, slider, note, table])

    def __len__(self):
        return len(self.frames)

    def __repr__(self):
        return f"<Replay of {self.check!r}: {len(self.frames)} steps>"


def _escape(text: str) -> str:
    import html
    return html.escape(text)


def replay(source, index: int = 0) -> Replay:
    """The ``index``-th counterexample of ``source`` (a file, a Report, a Result, a dict)."""
    found = counterexamples(source)
    if not found:
        raise ValueError("source holds no counterexample (every family check passed?)")
    if not 0 <= index < len(found):
        raise ValueError(f"index must be in [0, {len(found)}), got {index}")
    return Replay(found[index])
