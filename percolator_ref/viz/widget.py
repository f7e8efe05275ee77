"""The stepper's notebook front end (ipywidgets).

Buttons ``Step``, ``Back``, ``Reset``, ``Crash client``; a slider over the
frames; a choice of which transaction moves next. Everything shown is an
``HTML`` widget whose ``value`` is replaced (no ``print``, no
``clear_output``), so ``pytest --nbval`` passes and a notebook saved with
its widget state still shows the table.

In a browser (Pyodide, ``sys.platform == "emscripten"``) a button's handler
is called straight from JavaScript, where a greenlet cannot switch stacks;
there the widget runs the stepper's move as an asyncio task on Pyodide's
event loop (which can). In CPython the move runs at once, as before.
"""
from __future__ import annotations

import asyncio
import html
import sys

import ipywidgets as widgets

IN_BROWSER = sys.platform == "emscripten"
_NOTE_STYLE = "font-family:sans-serif;font-size:13px;margin:2px 0"


class StepperWidget(widgets.VBox):
    """``StepperWidget(stepper)``; ``display`` it (or leave it last in a cell).

    ``stepper``: a :class:`~percolator_ref.viz.stepper.Stepper`, or a
    :class:`~percolator_ref.viz.recorded.RecordedStepper` over stored frames
    (a grading counterexample: its ``Crash client`` button is disabled).
    """

    def __init__(self, stepper):
        if not all(callable(getattr(stepper, name, None)) for name in ("step", "back", "reset",
                                                                        "crash")):
            raise TypeError(f"stepper must be a Stepper, got {type(stepper).__name__}")
        self.stepper = stepper
        self.step_button = widgets.Button(description="Step", button_style="primary",
                                          tooltip="run the next single-row Bigtable transaction")
        self.back_button = widgets.Button(description="Back", tooltip="show the previous frame")
        self.reset_button = widgets.Button(description="Reset", tooltip="start over")
        self.crash_button = widgets.Button(description="Crash client", button_style="danger",
                                           tooltip="the chosen transaction's client dies here")
        self.slider = widgets.IntSlider(value=0, min=0, max=0, description="frame",
                                        continuous_update=False)
        self.choice = widgets.ToggleButtons(options=[], description="moves next")
        self.note = widgets.HTML()
        self.table = widgets.HTML()
        self.status = widgets.HTML()
        self._updating = False
        self.step_button.on_click(lambda _: self._act(self.stepper.step, self._who()))
        self.back_button.on_click(lambda _: self._act(self.stepper.back))
        self.reset_button.on_click(lambda _: self._act(self.stepper.reset))
        self.crash_button.on_click(lambda _: self._act(self.stepper.crash, self._who()))
        self.slider.observe(self._on_slider, names="value")
        buttons = widgets.HBox([self.step_button, self.back_button, self.reset_button,
                                self.crash_button])
        super().__init__([buttons, self.choice, self.slider, self.note, self.table, self.status])
        self.refresh()

    def _who(self):
        return self.choice.value or None

    def _act(self, action, *args) -> None:
        if IN_BROWSER:
            asyncio.ensure_future(self._act_later(action, *args))
        else:
            self._apply(action, *args)

    async def _act_later(self, action, *args) -> None:
        try:
            self._apply(action, *args)
        except Exception as exc:           # no caller to see it: show it under the table
            self.refresh(message=f"{type(exc).__name__}: {exc}")
            raise

    def _apply(self, action, *args) -> None:
        forks = len(getattr(self.stepper, "abandoned", ()))
        try:
            action(*args)
        except ValueError as exc:          # e.g. Step when everything finished
            self.refresh(message=str(exc))
            return
        message = ""
        if len(getattr(self.stepper, "abandoned", ())) > forks:
            at, dropped = self.stepper.abandoned[-1]
            message = (f"a new branch from frame {at}; the old branch's {len(dropped)} "
                       f"frame(s) after it are in stepper.abandoned")
        self.refresh(message=message)

    def _on_slider(self, change) -> None:
        if not self._updating:
            self.stepper.goto(change["new"])
            self.refresh()

    def refresh(self, message: str = "") -> None:
        """Redraw from the stepper's current frame."""
        frame = self.stepper.frame
        self._updating = True
        try:
            self.slider.max = len(self.stepper.frames) - 1
            self.slider.value = self.stepper.cursor
            keep = self.choice.value
            self.choice.options = list(frame.runnable)
            if keep in frame.runnable:
                self.choice.value = keep
        finally:
            self._updating = False
        finished = not frame.runnable
        self.step_button.disabled = finished
        self.crash_button.disabled = finished or not getattr(self.stepper, "can_crash", True)
        self.back_button.disabled = self.stepper.cursor == 0
        self.note.value = (f"<p style='{_NOTE_STYLE}'><b>{html.escape(frame.title)}</b>: "
                           f"{html.escape(frame.note)}</p>")
        self.table.value = frame.table._repr_html_()
        extra = f" <i>{html.escape(message)}</i>" if message else ""
        self.status.value = (f"<p style='{_NOTE_STYLE};color:#555'>clock {frame.clock:g} s | "
                             f"{html.escape(frame.status)}{extra}</p>")

    # Buttons by name, for tests and notebooks: w.click("Step")
    def click(self, label: str) -> None:
        buttons = {b.description: b for b in (self.step_button, self.back_button,
                                              self.reset_button, self.crash_button)}
        if label not in buttons:
            raise ValueError(f"label must be one of {sorted(buttons)}, got {label!r}")
        buttons[label].click()

    def __repr__(self):
        return f"StepperWidget(frame {self.stepper.cursor} of {len(self.stepper.frames)})"
