"""Predict, then reveal: the student commits to an answer before seeing it.

In one cell, :class:`Predict` shows the question with a choice (ipywidgets
toggle buttons) or a short text box; the student answers it. The NEXT cell runs
the reference implementation and calls :meth:`Predict.reveal` with what the run
produced. The reveal stays **folded** until the student has chosen: its HTML
is a closed ``<details>`` ("Show the answer") and its plain text names no
answer. Once the student has chosen, re-running the cell shows the answer
open, with whether they were right; a student who wants the answer without
choosing opens the fold (or calls :meth:`Reveal.show`). A notebook run top to
bottom (nbval) produces the same folded output every time, and the committed
output carries no visible answer (``tests/test_prediction_leaks.py`` checks).

    q = Predict("Which value does T2's get() return?", ["10", "3", "it waits"])
    q                      # shows the question and the buttons
    ...                    # next cell: run it
    q.reveal(str(value), why="T2's snapshot is at start 7: ...")
"""
from __future__ import annotations

import html
from typing import Optional, Sequence

FOLDED = "The answer is folded: choose above, then re-run this cell (or open the fold)."
SUMMARY = "Show the answer"
CSS_CLASS = "percolator-reveal"


class Reveal:
    """The answer to a :class:`Predict`, folded until the student has chosen (deterministic)."""

    def __init__(self, question: str, answer: str, why: str, chosen: Optional[str]):
        self.question, self.answer, self.why, self.chosen = question, answer, why, chosen

    @property
    def folded(self) -> bool:
        """True while the student has not chosen: nothing visible names the answer."""
        return self.chosen is None

    @property
    def verdict(self) -> str:
        if self.chosen is None:
            return "You opened the answer without choosing."
        if self.chosen.strip().lower() == self.answer.strip().lower():
            return f"You answered {self.chosen!r}: right."
        return f"You answered {self.chosen!r}: not this time."

    def text(self) -> str:
        """The full answer as plain text (what the fold hides)."""
        return f"Answer: {self.answer}\nWhy: {self.why}\n{self.verdict}"

    def show(self) -> None:
        """Print the answer: the plain-text way to open the fold."""
        print(self.text())

    def __repr__(self):
        return FOLDED if self.folded else self.text()

    def _repr_html_(self):
        opened = "" if self.folded else " open"
        return (f'<details class="{CSS_CLASS}"{opened}><summary>{SUMMARY}</summary>'
                f"<b>Answer:</b> {html.escape(self.answer)}<br>"
                f"<b>Why:</b> {html.escape(self.why)}<br><i>{html.escape(self.verdict)}</i>"
                "</details>")


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
        if self.widget is None:
            from .widget import PredictWidget
            self.widget = PredictWidget(self.question, self.choices)
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
