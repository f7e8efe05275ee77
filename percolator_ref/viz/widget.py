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
_HINT_STYLE = "font-family:sans-serif;font-size:12px;margin:2px 0;color:#555"


class SavedView:
    """Mixed into a widget: what a notebook saves beside the widget's view.

    Jupyter stores a widget's output as its view plus ``text/plain``. Where the view
    cannot be drawn (JupyterLab on an untrusted notebook, a fresh clone; the browser
    site before the cell runs) the front end shows the saved text instead: by default
    the object's repr (``VBox(children=(HTML(value=...``). A widget with this mixin
    saves a one-line ``text/plain`` (:meth:`saved_text`) and a static ``text/html``
    (:meth:`saved_html`: its HTML parts as drawn now, then ``hint``), which Lab draws
    (sanitised) where it cannot draw the widget.
    """
    hint = "A saved view: run this cell to use the widget."

    def saved_text(self) -> str:
        return self.hint

    def saved_html(self) -> str:
        parts = [c.value for c in self.children if isinstance(c, widgets.HTML)]
        return ("<div class='percolator-saved-view'>" + "".join(parts) +
                f"<p style='{_HINT_STYLE}'><i>{html.escape(self.hint)}</i></p></div>")

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if data:
            data["text/plain"] = self.saved_text()
            data["text/html"] = self.saved_html()
        return data


class StepperWidget(SavedView, widgets.VBox):
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
        # The slider counts as the frames' titles do: "frame 0..." for a stepper, "step 1 of
        # M..." for a recorded run (its ``first_number`` and ``unit``).
        self.first_number = getattr(stepper, "first_number", 0)
        self.slider = widgets.IntSlider(value=self.first_number, min=self.first_number,
                                        max=self.first_number,
                                        description=getattr(stepper, "unit", "frame"),
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
            message = (f"a new branch from frame {at}: the old branch's {len(dropped)} later "
                       f"frame(s) are no longer shown")
        self.refresh(message=message)

    def _on_slider(self, change) -> None:
        if not self._updating:
            self.stepper.goto(change["new"] - self.first_number)
            self.refresh()

    def refresh(self, message: str = "") -> None:
        """Redraw from the stepper's current frame."""
        frame = self.stepper.frame
        self._updating = True
        try:
            self.slider.max = len(self.stepper.frames) - 1 + self.first_number
            self.slider.value = self.stepper.cursor + self.first_number
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

    hint = "A saved view of the stepper: run this cell for its buttons (Step, Back, Reset)."

    def saved_text(self) -> str:
        return (f"Cell-table stepper at {self.stepper.frame.title}: run this cell for its "
                "buttons (Step, Back, Reset).")

    def __repr__(self):
        return self.saved_text()


class PredictWidget(SavedView, widgets.VBox):
    """A :class:`~percolator_ref.viz.predict.Predict`'s question and its answer box."""

    def __init__(self, question: str, choices):
        self.question, self.choices = question, choices
        if choices is None:
            answer = widgets.Text(placeholder="your answer", layout=widgets.Layout(width="20em"))
        else:
            answer = widgets.ToggleButtons(options=choices, value=None)
        super().__init__([widgets.HTML(f"<b>Predict:</b> {html.escape(question)}"), answer])

    @property
    def hint(self) -> str:
        if self.choices is None:
            return "Run this cell to type your answer."
        return "Choices: " + " / ".join(self.choices) + ". Run this cell to choose."

    def saved_text(self) -> str:
        return f"Predict: {self.question} ({self.hint})"

    def __repr__(self):
        return self.saved_text()
