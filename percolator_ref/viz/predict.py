"""Predict, then reveal: the student commits to an answer before the cell that shows it.

In one cell, :class:`Predict` shows the question with a choice (ipywidgets
toggle buttons) or a short text box; the student answers it. The NEXT cell runs
the reference implementation and calls :meth:`Predict.reveal` with what the run
produced: it states the right answer and why, and, if the student answered,
whether they were right. The reveal needs no click, so a notebook run top to
bottom (nbval) prints the same text every time: "you did not answer" when
nobody clicked.

    q = Predict("Which value does T2's get() return?", ["10", "3", "it waits"])
    q                      # shows the question and the buttons
    ...                    # next cell: run it
    q.reveal(str(value), why="T2's snapshot is at start 7: ...")
"""
from __future__ import annotations

import html
from typing import Optional, Sequence


class Reveal:
    """The text a reveal shows (plain and HTML, deterministic)."""

    def __init__(self, question: str, answer: str, why: str, chosen: Optional[str]):
        self.question, self.answer, self.why, self.chosen = question, answer, why, chosen

    @property
    def verdict(self) -> str:
        if self.chosen is None:
            return "You did not answer before running this cell."
        if self.chosen.strip().lower() == self.answer.strip().lower():
            return f"You answered {self.chosen!r}: right."
        return f"You answered {self.chosen!r}: not this time."

    def __repr__(self):
        return f"Answer: {self.answer}\nWhy: {self.why}\n{self.verdict}"

    def _repr_html_(self):
        return (f"<div><b>Answer:</b> {html.escape(self.answer)}<br>"
                f"<b>Why:</b> {html.escape(self.why)}<br><i>{html.escape(self.verdict)}</i></div>")


class Predict:
    """A question the student answers before the reveal cell (choices, or free text if None)."""

    def __init__(self, question: str, choices: Optional[Sequence[str]] = None):
        if not isinstance(question, str) or not question:
            raise ValueError(f"question must be a non-empty str, got {question!r}")
        if choices is not None and (len(choices) < 2 or not all(isinstance(c, str) for c in choices)):
            raise ValueError(f"choices must be None or at least two str, got {choices!r}")
        self.question, self.choices = question, list(choices) if choices is not None else None
        self.widget = None

    def _widget(self):
        import ipywidgets as w
        if self.widget is None:
            if self.choices is None:
                answer = w.Text(placeholder="your answer", layout=w.Layout(width="20em"))
            else:
                answer = w.ToggleButtons(options=self.choices, value=None)
            self.widget = w.VBox([w.HTML(f"<b>Predict:</b> {html.escape(self.question)}"), answer])
        return self.widget

    @property
    def chosen(self) -> Optional[str]:
        """What the student answered, or None."""
        if self.widget is None:
            return None
        value = self.widget.children[1].value
        return value if value not in (None, "") else None

    def reveal(self, answer, why: str) -> Reveal:
        """The right ``answer`` (as produced by the run above) and ``why``."""
        return Reveal(self.question, str(answer), why, self.chosen)

    def __repr__(self):
        options = "" if self.choices is None else " [" + " / ".join(self.choices) + "]"
        return f"Predict: {self.question}{options}"

    def _ipython_display_(self):
        from IPython.display import display
        display(self._widget())
