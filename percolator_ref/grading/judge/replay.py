"""A counterexample to step through: the shortest failing schedule, frame by frame.

A failing family check (:mod:`.schedules`) carries the shortest schedule that
broke a rule: one step per scheduled request (which client did which row
transaction, or took which timestamp, or crashed there), as the trusted
world's journal (:mod:`.journal`) recorded it from its store's tracer: each
step's events and the cells they changed. The cells after each step are those
changes applied in order; nothing is read from a sentence. :func:`save` writes it as JSON
(``percolator grade --counterexamples DIR``); :func:`replay` loads it (a
file, a self-check's report or one of its results) as a :class:`Replay`:
``transcript()`` for a terminal (``percolator replay FILE``), ``widget()``
for a notebook: the kit's stepper widget over the steps (Step, Back, Reset, a
frame slider), with the cell tables after each step.
"""
from __future__ import annotations

import json
from pathlib import Path

from percolator_ref.viz.printable import escape_text
from percolator_ref.viz.recorded import RecordedStepper, recorded_frame
from percolator_ref.viz.tables import CellTable

from ..battery import Report, Result
from .journal import CRASH, apply, from_json

FORMAT = "percolator-counterexample/2"


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
        found = data.get("format") if isinstance(data, dict) else None
        older = f" (it is {escape_text(str(found)[:80])}: grade again)" if found else ""
        raise ValueError(f"source must be a counterexample file ({FORMAT}), got "
                         f"{escape_text(str(source))}{older}")
    return [data]


class Replay:
    """The frames of one counterexample: a title, what happened, the cells after it.

    ``stepper`` is a :class:`~percolator_ref.viz.recorded.RecordedStepper` over
    the steps (step i: client X did row transaction Y, the cells after it);
    ``widget()`` is the kit's :class:`~percolator_ref.viz.widget.StepperWidget`
    on it, the same controls and cell tables as the notebooks' stepper.
    """

    def __init__(self, example: dict):
        steps = example.get("steps")
        if not isinstance(steps, list) or not steps:
            raise ValueError("example must hold a non-empty list of steps")
        self.check, self.failure = str(example.get("check", "")), str(example.get("failure", ""))
        self.entries = [from_json(i, step) for i, step in enumerate(steps)]
        frames, dump = [], {}
        for i, entry in enumerate(self.entries):
            for event in entry.before + entry.events:
                dump = apply(dump, event)
            last = i == len(steps) - 1
            frames.append(recorded_frame(
                i, len(steps), entry.client, entry.said(), dump, entry.events, entry.clock,
                crashed=entry.step == CRASH,
                note=f"After this step the check failed: {self.failure}" if last else ""))
        self.stepper = RecordedStepper(frames)

    @property
    def frames(self) -> list:
        """The stored frames, one per step."""
        return self.stepper.frames

    def transcript(self) -> str:
        """Every frame as text: the failure, then each step and its cell table. Printable
        as it is: every name and value in it (a student's code wrote them) is escaped, so
        no terminal escape in the file reaches the terminal (:func:`.escape_text`)."""
        lines = [f"check: {self.check}", f"failed: {self.failure}", ""]
        for frame in self.frames:
            lines += [repr(CellTable(frame.dump, frame.events, title=frame.title)), ""]
        return escape_text("\n".join(lines), newlines=True)

    def widget(self):
        """The stepper widget (Step, Back, Reset, a frame slider) over the counterexample,
        headed by the rule it broke."""
        import ipywidgets as widgets

        from percolator_ref.viz.widget import StepperWidget
        shown = StepperWidget(self.stepper)
        head = widgets.HTML(f"<p><b>counterexample</b> ({_escape(self.check)}): "
                            f"{_escape(self.failure)}</p>")
        shown.children = (head,) + tuple(shown.children)
        return shown

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
