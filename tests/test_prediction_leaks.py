"""No committed notebook shows a prediction's answer before the student has chosen.

A prediction is a cell that shows a :class:`~percolator_ref.viz.Predict` (its
plain-text output starts with "Predict:") and, later, a cell whose output is
the :class:`~percolator_ref.viz.predict.Reveal` (an HTML ``<details
class="percolator-reveal">``). For every reveal this test checks, in the
committed outputs:

1. the reveal is folded: a closed ``<details>``, and its plain text (what a
   viewer without HTML shows) does not name the answer;
2. between the question and the reveal (the reveal's cell included) no cell
   shows any output besides the question and the folded reveal: data that
   answers the question goes below the reveal;
3. nothing a student sees from the previous reveal (or the notebook's start)
   up to this reveal states the answer in words: markdown, code a reader sees
   (cells whose source is not hidden) and outputs, with folded ``<details>``
   blocks and the question's own list of choices left out. The answer is
   matched as a whole phrase, case-insensitive. The question's own code (it
   lists every choice) is left out. Answers shorter than five characters (a
   bare number, "one") are looked for only from the question to the reveal,
   and not in code, where small literals are everywhere.
4. markdown and outputs (not code) above the reveal do not state the answer's key: from
   the previous reveal on, its words without a leading article or hedge ("timestamp
   oracle" for "the timestamp oracle", looked for when that leaves two words or more);
   from the notebook's start, for an approximate fraction ("about 1/4"), a decimal of two
   places or more within a tenth of it (0.23: a measured ratio that gives the answer).

The self-tests below build leaking notebooks and show each rule failing.
"""
from __future__ import annotations

import html
import json
import pathlib
import re

import pytest

from percolator_ref.viz.predict import CSS_CLASS, FOLDED, Predict

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))
DETAILS = re.compile(r"<details\b.*?</details>", re.S | re.I)
ANSWER = re.compile(r"<b>Answer:</b> (.*?)<br>", re.S)       # any reveal, folded or not
FOLDED_HTML = re.compile(r'\s*<details class="' + CSS_CLASS + r'"><summary>')
TAG = re.compile(r"<[^>]+>")

# Notebooks added after these checks were written, by their own authors: visible in every
# run as a skip with its reason until they follow the conventions (then remove them here).
NOT_CONVERTED: dict = {}


def joined(text) -> str:
    return "".join(text) if isinstance(text, list) else (text or "")


def reveal_answer(cell):
    """(answer, is_open) if the cell's outputs hold a reveal, else None."""
    for out in cell.get("outputs", []):
        text = joined(out.get("data", {}).get("text/html", ""))
        m = ANSWER.search(text)
        if m:
            return html.unescape(m.group(1)), not FOLDED_HTML.match(text)
    return None


def is_question(out) -> bool:
    text = joined(out.get("data", {}).get("text/plain", ""))
    return text.startswith("Predict:") or (text.startswith("VBox(") and "Predict:" in text)


def is_reveal(out) -> bool:
    return ANSWER.search(joined(out.get("data", {}).get("text/html", ""))) is not None


def visible_output(out) -> str:
    """What a reader sees of one output (HTML preferred, folded <details> removed)."""
    if out.get("output_type") == "stream":
        return joined(out.get("text"))
    if out.get("output_type") == "error":
        return "\n".join(out.get("traceback", []))
    data = out.get("data", {})
    if "text/html" in data:
        return html.unescape(TAG.sub(" ", DETAILS.sub(" ", joined(data["text/html"]))))
    return joined(data.get("text/plain", ""))


def visible_texts(cell, code_visible=True):
    """[(kind, text)] a reader sees of the cell, questions' own outputs left out."""
    if cell["cell_type"] == "markdown":
        return [("markdown", DETAILS.sub(" ", joined(cell["source"])))]
    texts = []
    if code_visible and not cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
        texts.append(("code", joined(cell["source"])))
    for out in cell.get("outputs", []):
        if not is_question(out):
            texts.append(("output", visible_output(out)))
    return texts


def states(text: str, answer: str, kind: str) -> bool:
    if len(answer) < 5 and kind == "code":
        return False
    return re.search(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", text, re.I) is not None


LEAD = re.compile(r"^(?:the|a|an|about)\s+", re.I)
FRACTION = re.compile(r"^about\s+(\d+)\s*/\s*(\d+)$", re.I)
DECIMAL = re.compile(r"(?<![\w.])\d*\.\d{2,}(?![\w.])")


def key_words(text: str, answer: str) -> bool:
    """The answer's words without a leading article or hedge, stated in ``text`` (rule 4)."""
    key = LEAD.sub("", answer.strip())
    return key != answer.strip() and len(key.split()) >= 2 and states(text, key, "markdown")


def key_number(text: str, answer: str) -> bool:
    """A decimal within a tenth of an approximate fraction answer, in ``text`` (rule 4)."""
    m = FRACTION.match(answer.strip())
    if not m or not int(m.group(2)):
        return False
    target = int(m.group(1)) / int(m.group(2))
    return any(abs(float(d) - target) <= 0.1 * target for d in DECIMAL.findall(text))


def problems(nb: dict, name: str = "notebook") -> list:
    """Every visible answer at or above its reveal, as readable strings."""
    found, section_start, question = [], 0, None
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        outs = cell.get("outputs", [])
        if any(is_question(o) for o in outs):
            question = i
        hit = reveal_answer(cell)
        if hit is None:
            continue
        answer, is_open = hit
        where = f"{name} cell {i} (answer {answer!r})"
        if is_open:
            found.append(f"{where}: the reveal is committed open (not a closed <details>)")
        for out in outs:
            if is_reveal(out) and answer.lower() in joined(out["data"].get("text/plain", "")).lower():
                found.append(f"{where}: the reveal's plain text names the answer")
        for j in range(question + 1 if question is not None else i, i + 1):
            shown = [o for o in cells[j].get("outputs", []) if not is_question(o) and not is_reveal(o)]
            if shown:
                found.append(f"{where}: cell {j}, between the question and the reveal, shows output")
        first = section_start if len(answer) >= 5 or question is None else question + 1
        for j in range(first, i + 1):
            for kind, text in visible_texts(cells[j], code_visible=j != question):
                if states(text, answer, kind):
                    found.append(f"{where}: cell {j} ({kind}) states the answer before it is revealed")
                elif kind != "code" and key_words(text, answer):
                    found.append(f"{where}: cell {j} ({kind}) states the answer's words before it is revealed")
        for j in range(i + 1):
            for kind, text in visible_texts(cells[j], code_visible=False):
                if key_number(text, answer):
                    found.append(f"{where}: cell {j} ({kind}) shows the answer's number before it is revealed")
        section_start, question = i + 1, None
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_visible_answer_at_or_above_its_reveal(path):
    if path.name in NOT_CONVERTED:
        pytest.skip(NOT_CONVERTED[path.name])
    nb = json.loads(path.read_text())
    assert problems(nb, path.name) == []


def test_some_notebook_has_predictions():
    # the scan is not vacuous: the notebooks do hold folded reveals
    reveals = sum(reveal_answer(c) is not None for p in NOTEBOOKS for c in json.loads(p.read_text())["cells"])
    assert reveals >= 20


# -- the scanner can fail -------------------------------------------------------------

def _code(source, outputs=(), hidden=False):
    meta = {"jupyter": {"source_hidden": True}} if hidden else {}
    return {"cell_type": "code", "source": source, "metadata": meta, "outputs": list(outputs)}


def _display(obj):
    data = {"text/plain": repr(obj)}
    if hasattr(obj, "_repr_html_"):
        data["text/html"] = obj._repr_html_()
    return {"output_type": "execute_result", "data": data, "metadata": {}}


def _notebook(reveal_cell, between=(), before=()):
    q = Predict("How many of them commit?", ["both", "one", "neither"])
    cells = list(before) + [_code("q", [_display(q)])] + list(between) + [reveal_cell]
    return {"cells": cells}


def _reveal(chosen=None):
    q = Predict("How many of them commit?", ["both", "one", "neither"])
    r = q.reveal("neither", why="both hit a lock")
    r.chosen = chosen
    return _display(r)


def test_a_folded_reveal_passes():
    nb = _notebook(_code("q.reveal(x, why=...)", [_reveal()], hidden=True))
    assert problems(nb) == []
    assert FOLDED in _reveal()["data"]["text/plain"]


def test_an_open_reveal_fails():
    nb = _notebook(_code("q.reveal(x, why=...)", [_reveal(chosen="one")], hidden=True))
    assert any("committed open" in p for p in problems(nb))
    assert any("plain text names the answer" in p for p in problems(nb))


def test_a_data_cell_between_question_and_reveal_fails():
    data = _code("table", [{"output_type": "stream", "name": "stdout", "text": "aborted: 2\n"}])
    nb = _notebook(_code("q.reveal(x, why=...)", [_reveal()], hidden=True), between=[data])
    assert any("shows output" in p for p in problems(nb))


def test_markdown_above_the_question_that_states_the_answer_fails():
    leak = {"cell_type": "markdown", "source": "As we will see, NEITHER commits.", "metadata": {}}
    nb = _notebook(_code("q.reveal(x, why=...)", [_reveal()], hidden=True), before=[leak])
    assert any("(markdown) states the answer" in p for p in problems(nb))


def test_visible_reveal_source_that_states_the_answer_fails():
    nb = _notebook(_code('q.reveal("neither", why=...)', [_reveal()]))
    assert any("(code) states the answer" in p for p in problems(nb))
    hidden = _notebook(_code('q.reveal("neither", why=...)', [_reveal()], hidden=True))
    assert problems(hidden) == []


def test_an_answer_in_a_folded_details_block_is_not_a_leak():
    folded = {"cell_type": "markdown", "metadata": {},
              "source": "<details><summary>Answers</summary>neither</details>"}
    nb = _notebook(_code("q.reveal(x, why=...)", [_reveal()], hidden=True), before=[folded])
    assert problems(nb) == []


def _keyed(answer, before, choices):
    """A notebook whose question has ``answer``, with ``before`` markdown cells above it."""
    q = Predict("Which one?", choices)
    r = q.reveal(answer, why="because")
    cells = [{"cell_type": "markdown", "source": b, "metadata": {}} for b in before]
    return {"cells": cells + [_code("q", [_display(q)]),
                              _code("q.reveal(x, why=...)", [_display(r)], hidden=True)]}


ORACLE = ["the timestamp oracle", "the tablet servers"]


def test_the_answers_words_without_their_article_above_the_question_fail():
    nb = _keyed("the timestamp oracle", ["One timestamp oracle serves all machines."], ORACLE)
    assert any("states the answer's words" in p for p in problems(nb))
    # a single word left after the article is too common to look for
    assert problems(_keyed("the timestamp oracle", ["The oracle hands out timestamps."], ORACLE)) == []


def test_a_ratio_near_an_approximate_fraction_above_the_question_fails():
    shares = ["about 1/2", "about 1/4"]
    nb = _keyed("about 1/4", ["| Write/s | 31003 | 7232 | 0.23 |"], shares)
    assert any("shows the answer's number" in p for p in problems(nb))
    assert problems(_keyed("about 1/2", ["| Write/s | 31003 | 7232 | 0.23 |"], shares)) == []
