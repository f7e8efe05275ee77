"""docs/paper_map.md: every figure and section of the paper the kit cites is in the map,
and the map lists only figures and sections the project's notes on the paper carry.

Scanned for citations: notebooks/, solutions/ and exercises/ (markdown and code cells),
README.md, exercises/README.md, docs/*.md, and the comments and string literals
(docstrings included) of percolator_ref/**/*.py. A citation is "Figure 7", "Fig. 4",
"Figures 2 and 6", "§2.3", "§§2.2–2.3", "section 2.3", "sections 1 and 2.4"; any
"Table N" is an error, since the paper numbers its tables as figures.
"""
from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "paper_map.md"
UNSCANNED_MAP_PART = "## What the notes do not carry"     # the map's notes on the notes

# What the paper numbers, as far as the project's notes carry it (the shared seeds/ folder
# and PAPER_FACTS.md). Each entry says where the notes show it.
PAPER_FIGURES = {
    2: "seeds/002: 'Figure 2: Example usage of the Percolator API ...'; seeds/003 §2.2: 图2",
    3: "seeds/002: 'Figure 3: Transactions under snapshot isolation ...'; seeds/003 §2.2: 图3",
    4: "seeds/002: 'Figure 4: This figure shows the Bigtable writes ...'; seeds/003 §2.2: 图4",
    5: "seeds/003 §2.1: '(见图5)' and §2.2: '元数据列在图5中有所描述' (the columns table; "
       "seeds/002 heads it 'Table 1')",
    6: "seeds/003 §2.2: '图6描述的是Percolator事务的伪代码'",
    7: "PAPER_FACTS.md '§3.1, Figure 7: Percolator vs MapReduce, latency against crawl rate'",
    8: "PAPER_FACTS.md '§3.2, Figure 8: the cost of transactions against raw Bigtable' "
       "(the table itself: seeds/000 §3.2, seeds/004)",
    9: "PAPER_FACTS.md '§3.3, Figure 9 and Figure 10: TPC-E' ('**Figure 9**: resource use ...')",
    10: "PAPER_FACTS.md '§3.3, Figure 9 and Figure 10: TPC-E' ('**Figure 10**: fault tolerance')",
}
PAPER_SECTIONS = {
    "1": "seeds/000 '## 1 介绍(Introduction)'; seeds/003 '1.简介'",
    "2": "seeds/000 '## 2 设计(Design)'; seeds/003 '2.设计'",
    "2.1": "seeds/000 '### 2.1 Bigtable 概述'; seeds/003 '2.1 Bigtable概况'",
    "2.2": "seeds/000 '### 2.2 事务(Transactions)'; seeds/003 '2.2 事务'",
    "2.3": "seeds/000 '### 2.3 时间戳(Timestamps)'; seeds/003 '2.3 时间戳'",
    "2.4": "seeds/000 '### 2.4 通知(Notifications)'; seeds/003 '2.4 通告机制'",
    "2.5": "seeds/000 '### 2.5 讨论(Discussion)'; seeds/003 '2.5讨论'",
    "3": "seeds/000 '## 3 评估(Evaluation)'",
    "3.1": "seeds/000 '### 3.1 对比MapReduce(Converting from MapReduce)'",
    "3.2": "seeds/000 '### 3.2 基准测试(Microbenchmarks)'",
    "3.3": "seeds/000 '### 3.3 合成负载(Synthetic Workload)'",
    "4": "seeds/000 '## 4 相关工作(Related Work)'",
    "5": "seeds/000 '## 5 结论与未来工作(Conclusion and Future Work)'",
}
# Numbers the paper has but the notes do not carry: say what to cite instead.
NOT_IN_NOTES = {
    1: "the paper's architecture figure: its number is not in the notes; cite §2",
}
SECTION_ORDER = list(PAPER_SECTIONS)

# -- finding citations ---------------------------------------------------------------

_NUM = r"\d+(?:\.\d+)*"
_AND = r"\s*(?:and|or|&)\s*"                                   # "Figure 2 and 6"
_MORE = r"\s*(?:,\s*(?:and\s+|or\s+)?|and|or|&|/|to|through|[-–—])\s*"   # plural lists, ranges
_KEYWORDS = {
    "figure": r"(?<![\w.])(?P<kw>figures?|figs?\.?)[\s\u00a0-]*",
    "section": r"(?:(?P<kw>§§?)[\s\u00a0]*|(?<![\w.])(?P<kw2>sections?|secs?\.)[\s\u00a0]+)",
    "table": r"(?<![\w.])(?P<kw>tables?)[\s\u00a0]+",
}
_PLURAL = {"figures", "figs", "figs.", "§§", "sections", "secs.", "tables"}


def _pattern(kind: str, separator: str) -> re.Pattern:
    return re.compile(_KEYWORDS[kind] + rf"(?P<nums>{_NUM}(?:{separator}{_NUM})*)(?![\w])"
                      r"(?!\.\d)", re.IGNORECASE)


_PATTERNS = {kind: (_pattern(kind, _MORE), _pattern(kind, _AND)) for kind in _KEYWORDS}


def _expand(kind: str, text: str) -> list:
    """``'2 and 6'`` -> ['2', '6']; ranges (``2–4``, ``2.2 to 2.4``) expand."""
    numbers, ranges = [], re.split(r"\s*(?:,\s*(?:and\s+|or\s+)?|and|or|&|/)\s*", text)
    for part in ranges:
        ends = [e for e in re.split(r"\s*(?:to|through|[-–—])\s*", part) if e]
        if len(ends) == 2 and kind != "section" and all(e.isdigit() for e in ends):
            numbers += [str(n) for n in range(int(ends[0]), int(ends[1]) + 1)]
        elif len(ends) == 2 and kind == "section" and all(e in SECTION_ORDER for e in ends):
            i, j = SECTION_ORDER.index(ends[0]), SECTION_ORDER.index(ends[1])
            numbers += SECTION_ORDER[i:j + 1]
        else:
            numbers += ends
    return numbers


# A section of another paper, named before it: "Spanner §4.2.1" (notebook 10 cites Spanner's own
# paper by section, as ../shared/PAPER_FACTS.md carries it) is not a section of Percolator's.
_OTHER_PAPER = re.compile(r"\bSpanner(?:'s)?\s+$")


def citations(text: str) -> list:
    """``[(kind, number, quote, offset)]`` for every figure, section and table cited."""
    found = []
    for kind, (plural, singular) in _PATTERNS.items():
        for m in plural.finditer(text):
            if _OTHER_PAPER.search(text[max(0, m.start() - 12):m.start()]):
                continue
            keyword = (m.group("kw") or m.groupdict().get("kw2") or "").lower()
            if keyword not in _PLURAL:          # a singular keyword takes "and", not lists
                m = singular.match(text, m.start())
            for number in _expand(kind, m.group("nums")):
                found.append((kind, number, " ".join(m.group(0).split()), m.start()))
    return found


# -- the texts to scan -----------------------------------------------------------------

# Each yields (prefix, first line number, text); a citation may span lines.

def notebook_texts(path: Path):
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        yield f"cell {i}, ", 1, "".join(cell["source"])


def markdown_texts(path: Path):
    yield "", 1, path.read_text(encoding="utf-8")


def python_texts(path: Path):
    """Comments and string literals (docstrings included) of a module."""
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            yield "", tok.start[0], tok.string


def map_text() -> str:
    return MAP.read_text(encoding="utf-8").split(UNSCANNED_MAP_PART)[0]


def texts(path: Path):
    if path == MAP:
        return [("", 1, map_text())]
    if path.suffix == ".ipynb":
        return notebook_texts(path)
    if path.suffix == ".py":
        return python_texts(path)
    return markdown_texts(path)


SOURCES = sorted(
    [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("solutions/*.ipynb"),
     *ROOT.glob("exercises/*.ipynb"), ROOT / "README.md", ROOT / "exercises" / "README.md",
     *ROOT.glob("docs/*.md"), *ROOT.glob("percolator_ref/**/*.py")])


def cited(path: Path) -> list:
    """``[(kind, number, where, quote)]`` for one source file."""
    return [(kind, number, f"{prefix}line {first + text.count(chr(10), 0, offset)}", quote)
            for prefix, first, text in texts(path)
            for kind, number, quote, offset in citations(text)]


# -- the map ---------------------------------------------------------------------------

def map_entries() -> tuple:
    """The figures and sections the map's tables list: ``({'4', ...}, {'2.2', ...})``."""
    figures, sections = set(), set()
    for line in map_text().splitlines():
        m = re.match(r"\|\s*(?:Figure\s+(\d+)|§([\d.]+))\s*\|", line)
        if m and m.group(1):
            figures.add(m.group(1))
        elif m:
            sections.add(m.group(2))
    return figures, sections


def problems(path: Path) -> list:
    figures, sections = map_entries()
    out = []
    for kind, number, where, quote in cited(path):
        if kind == "table":
            out.append(f"{where}: {quote!r}: the paper numbers its tables as figures "
                       "(the columns table is Figure 5, the microbenchmark Figure 8)")
        elif kind == "figure" and number not in figures:
            why = NOT_IN_NOTES.get(int(number), "not a figure the notes carry")
            out.append(f"{where}: {quote!r}: Figure {number} is not in the map ({why})")
        elif kind == "section" and number not in sections:
            why = ("not in the map: add it to docs/paper_map.md" if number in PAPER_SECTIONS
                   else "the paper has no such section")
            out.append(f"{where}: {quote!r}: §{number} {why}")
    return out


# -- tests -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Figure 7's shape", [("figure", "7")]),
    ("the paper's Fig. 4 and Fig 3", [("figure", "4"), ("figure", "3")]),
    ("Figures 2 and 6", [("figure", "2"), ("figure", "6")]),
    ("Figures 2, 3 and 6 (pseudocode)", [("figure", "2"), ("figure", "3"), ("figure", "6")]),
    ("Figures 2–4", [("figure", "2"), ("figure", "3"), ("figure", "4")]),
    ("Figure 2 and 6", [("figure", "2"), ("figure", "6")]),
    ("Figure 8, 200 us per RPC", [("figure", "8")]),
    ("Figure-4 cell tables", [("figure", "4")]),
    ("figure4_stepper(), Figure8Store, run_figure8, PAPER_FIGURE_8", []),
    ("§2.3", [("section", "2.3")]),
    ("Spanner §4.2.1 and the paper's §2.3", [("section", "2.3")]),
    ("(§ 2.4)", [("section", "2.4")]),
    ("§§2.2–2.3", [("section", "2.2"), ("section", "2.3")]),
    ("§§ 2.2-2.4", [("section", "2.2"), ("section", "2.3"), ("section", "2.4")]),
    ("§2.2 and §3.1.", [("section", "2.2"), ("section", "3.1")]),
    ("paper section 2.2, Figure 6", [("section", "2.2"), ("figure", "6")]),
    ("Section 3.2's table", [("section", "3.2")]),
    ("sections 1 and 2.4", [("section", "1"), ("section", "2.4")]),
    ("sections 2.3–2.5", [("section", "2.3"), ("section", "2.4"), ("section", "2.5")]),
    ("§2.7", [("section", "2.7")]),
    ("§2.2 Table 1", [("section", "2.2"), ("table", "1")]),
    ("the Redis section is done; Table(['a'], rows); cells table 5x", []),
])
def test_citations_reads_the_forms_the_kit_writes(text, expected):
    assert sorted((k, n) for k, n, _, _ in citations(text)) == sorted(expected)


def test_python_scan_sees_comments_and_docstrings_not_code(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Doc: Figure 4."""\nfigure = 7  # see §2.3\n'
                      'def f():\n    """Fig. 6 and\n    Figure\n    5."""\n    return Table(1)\n',
                      encoding="utf-8")
    assert sorted((k, n, where) for k, n, where, _ in cited(module)) == [
        ("figure", "4", "line 1"), ("figure", "5", "line 5"), ("figure", "6", "line 4"),
        ("section", "2.3", "line 2")]


def test_markdown_scan_sees_citations_across_lines(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("intro\n\nas the paper's\nFigure\n7 shows, and §2.2\n", encoding="utf-8")
    assert sorted((k, n, where) for k, n, where, _ in cited(page)) == [
        ("figure", "7", "line 4"), ("section", "2.2", "line 5")]


def test_map_lists_only_what_the_notes_carry():
    figures, sections = map_entries()
    assert figures and sections, "no tables found in docs/paper_map.md"
    assert figures <= {str(n) for n in PAPER_FIGURES}, figures - {str(n) for n in PAPER_FIGURES}
    assert sections <= set(PAPER_SECTIONS), sections - set(PAPER_SECTIONS)


def test_map_names_files_that_exist():
    """Paths in the kit's folders (``percolator_ref/...``, ``notebooks/...``) exist."""
    named = set(re.findall(r"`([\w./-]+\.(?:py|ipynb|md))`", MAP.read_text(encoding="utf-8")))
    in_kit = {n for n in named if "/" in n and (ROOT / n.split("/")[0]).is_dir()}
    missing = sorted(n for n in in_kit if not (ROOT / n).exists())
    assert len(in_kit) > 10 and not missing, missing


def test_the_scan_covers_the_kit():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    for required in ("README.md", "exercises/README.md", "docs/paper_map.md",
                     "percolator_ref/transaction.py", "notebooks/02_transfer_example.ipynb",
                     "solutions/01_snapshot_read.ipynb", "exercises/01_snapshot_read.ipynb"):
        assert required in names, required
    # the scan really reads each kind of source: known citations are found
    assert ("figure", "4") in {(k, n) for k, n, _, _ in cited(ROOT / "notebooks" / "02_transfer_example.ipynb")}
    assert ("section", "2.3") in {(k, n) for k, n, _, _ in cited(ROOT / "percolator_ref" / "services" / "oracle.py")}
    assert ("figure", "8") in {(k, n) for k, n, _, _ in cited(ROOT / "README.md")}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_citation_is_in_the_map(path):
    found = problems(path)
    assert not found, "\n".join(found)


def test_map_knows_figures_7_9_and_10_from_paper_facts():
    figures, _ = map_entries()
    assert {"7", "8", "9", "10"} <= figures
    facts = ROOT.parent / "shared" / "PAPER_FACTS.md"      # the project's shared notes
    if not facts.exists():
        pytest.skip("../shared/PAPER_FACTS.md is not next to this checkout")
    text = facts.read_text(encoding="utf-8")
    for n in (7, 8, 9, 10):
        assert re.search(rf"Figure {n}\b", text), n
        assert "PAPER_FACTS.md" in PAPER_FIGURES[n]


def test_tikv_is_listed_as_a_successor_not_as_the_paper():
    text = MAP.read_text()
    paper_part = text[:text.index("## Successors: TiKV")]
    successors = text[text.index("## Successors: TiKV"):text.index(UNSCANNED_MAP_PART)]
    assert "TiKV" not in paper_part.split("## Figures", 1)[1]   # not in the paper's tables
    for variant in ("rollback_records.py", "lock_ttl.py", "one_pc.py", "async_commit.py",
                    "pessimistic.py"):
        assert variant in successors
    assert "09_what_tikv_changed.ipynb" in successors
