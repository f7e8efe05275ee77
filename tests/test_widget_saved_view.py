"""What a notebook saves beside a widget is readable (issue 28, item 4).

JupyterLab draws a widget's view only in a trusted notebook with the kernel's (or saved)
state; elsewhere (a fresh clone, untrusted; the browser site before the cell runs) it shows
the output's saved ``text/html`` or ``text/plain``. The kit's widgets save a one-line note
and a static copy of their HTML parts (the cell table), never a Python repr.
"""
from __future__ import annotations

import re

import pytest

pytest.importorskip("ipywidgets")

from percolator_ref.viz import Predict, figure4_stepper  # noqa: E402

REPR = re.compile(r"\w*Widget\(|VBox\(children=|HBox\(children=|HTML\(value=")


def saved(widget) -> dict:
    data = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data      # still a widget
    return data


def test_the_stepper_saves_its_table_and_a_one_line_note():
    s = figure4_stepper()
    try:
        w = s.widget()
        for _ in range(3):
            w.click("Step")
        data = saved(w)
        plain, page = data["text/plain"], data["text/html"]
        assert "\n" not in plain and not REPR.search(plain), plain
        assert plain.startswith("Cell-table stepper at frame 3")
        assert "I am primary" in page and "percolator-cells" in page and not REPR.search(page)
        assert "run this cell" in page
    finally:
        s.close()


@pytest.mark.parametrize("choices", [["10", "3", "it waits"], None])
def test_a_prediction_saves_its_question_and_choices(choices):
    q = Predict("Which value does T2's get() return?", choices)
    data = saved(q._widget())
    plain, page = data["text/plain"], data["text/html"]
    assert "\n" not in plain and not REPR.search(plain) and not REPR.search(page)
    assert plain.startswith("Predict: Which value does T2's get() return?")
    assert "Predict:" in page and "T2&#x27;s get()" in page
    if choices:
        assert "10 / 3 / it waits" in plain and "10 / 3 / it waits" in page


def test_ipython_saves_the_same_bundle():
    """What nbclient/Lab store is IPython's formatting of the object: the same bundle."""
    from IPython.core.formatters import DisplayFormatter
    s = figure4_stepper()
    try:
        data, _ = DisplayFormatter().format(s.widget())
        assert data["text/plain"].startswith("Cell-table stepper") and "text/html" in data
    finally:
        s.close()
