"""No markdown cell typesets a dollar amount as math (issue 28, item 2).

JupyterLab (and the JupyterLite site) hand a markdown cell to marked, which turns an
escaped ``\\$`` into a plain ``$``, and then to MathJax, which typesets whatever lies
between two ``$`` of a paragraph: ``Bob $10, Joe $2`` renders as "Bob" and an italic
run "10,Joe". So the only ``$`` a markdown cell may hold outside code spans and code
blocks is the delimiter of a real formula (``$T_W$``): a pair, in one paragraph, whose
content does not start with a digit or a space. Money is written "10 dollars".
"""
from __future__ import annotations

import pathlib
import re

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ("notebooks", "exercises", "solutions")

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.S | re.M)
_INDENTED = re.compile(r"(?:^(?: {4}|\t)[^\n]*\n?)+", re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
# A formula: $...$ or $$...$$ in one paragraph, not opened by a digit or a blank,
# not closed after a blank (TeX's and pandoc's rule for what is math).
_FORMULA = re.compile(r"\$\$[^$]+?\$\$|\$(?![\d\s])[^$\n]*?(?<!\s)\$(?!\d)")

def typeset_dollars(markdown: str) -> list:
    """The paragraphs' excerpts where a ``$`` would be typeset (or left dangling) as math."""
    text = _FENCE.sub(" ", markdown)
    found = []
    for para in re.split(r"\n[ \t]*\n", text):
        if _INDENTED.fullmatch(para.strip("\n") + "\n"):
            continue                       # an indented code block
        para = _CODE_SPAN.sub(" ", para)
        if "\\$" in para:
            i = para.index("\\$")
            found.append(para[max(0, i - 20):i + 20])
        rest = _FORMULA.sub(" ", para.replace("\\$", " "))
        for m in re.finditer(r"\$", rest):
            found.append(rest[max(0, m.start() - 20):m.start() + 20])
    return found


def markdown_cells():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            yield pytest.param(path, id=f"{folder}/{path.name}")


@pytest.mark.parametrize("path", list(markdown_cells()))
def test_no_markdown_cell_typesets_a_dollar_amount(path):
    nb = nbformat.read(path, as_version=4)
    bad = [(i, hit) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
           for hit in typeset_dollars(cell.source)]
    assert bad == [], f"{path.name}: write money as '10 dollars' (cell, text): {bad}"


def markdown_pages():
    """The kit's own Markdown pages: JupyterLab's Markdown viewer typesets them too."""
    pages = [ROOT / "README.md", ROOT / "START_HERE.md", ROOT / "exercises" / "README.md",
             ROOT / "release" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in pages if p.exists()]


@pytest.mark.parametrize("path", markdown_pages())
def test_no_markdown_page_typesets_a_dollar_amount(path):
    bad = typeset_dollars(path.read_text(encoding="utf-8"))
    assert bad == [], f"{path.name}: write money as '10 dollars': {bad}"


def test_every_folder_has_notebooks():
    for folder in FOLDERS:
        assert len(list((ROOT / folder).glob("*.ipynb"))) >= 8, folder


@pytest.mark.parametrize("markdown", [
    "Bob has $10 and Joe $2.",                      # a pair: typeset "10 and Joe"
    "Bob has \\$10 and Joe \\$2.",                  # escaped: marked unescapes, MathJax pairs
    "moves $7 from Bob",                            # a lone one: pairs with the next
    "| Bob | 8: $3, 5: $10 |",
    "a formula $T_W$ and then $3",
    "`code` and then $3 outside",
])
def test_the_scan_finds_money(markdown):
    assert typeset_dollars(markdown) != []


@pytest.mark.parametrize("markdown", [
    "a writer W commit at $T_W$ and a reader at $T_R > T_W$.",
    "displayed $$\\sum_i x_i$$ math",
    "a span `$P --seed 1` in code",
    "```bash\nfor s in 0 1; do $P --seed $s; done\n```",
    "text\n\n    $P --seed 1 > out.json\n\nmore text",
    "Bob has 10 dollars and Joe 2 dollars.",
])
def test_the_scan_leaves_formulas_and_code(markdown):
    assert typeset_dollars(markdown) == []
