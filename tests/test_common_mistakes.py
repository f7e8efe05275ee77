"""docs/common_mistakes.md is what `percolator common-mistakes` makes of the catalogue.

Regenerating the page grades every wrong answer of the catalogue (minutes), so the fast
test compares what the page records of each entry (its misconception and the digest of its
answer cell) with the catalogue, and the page's text with what :func:`render` makes of those rows: a
new, removed, renamed or rewritten entry, or a hand edit, fails it. The slow test grades
the first entry of every exercise again and compares its row (the check and the feedback
the grader gives today).
"""
from __future__ import annotations

import re

import pytest

from percolator_ref import grading
from percolator_ref.commands import common_mistakes as cm
from percolator_ref.commands import main

PAGE = cm.OUTPUT


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def recorded() -> dict:
    """``{n: [(misconception, digest, {check, failed, checks, feedback}), ...]}`` from the page."""
    out: dict = {}
    n = None
    for line in PAGE.read_text().splitlines():
        head = re.match(r"## Exercise (\d+): ", line)
        if head:
            n = int(head.group(1))
            out[n] = []
            continue
        row = re.match(r"\| (.*) <!-- ([0-9a-f]{12}) --> \| (.*) \((\d+) of (\d+) checks fail\) "
                       r"\| (.*) \|$", line)
        if row:
            name, sha, check, failed, checks, feedback = row.groups()
            out[n].append((name.replace("\\|", "|"), sha,
                           {"check": check.replace("\\|", "|"), "failed": int(failed),
                            "checks": int(checks), "feedback": feedback.replace("\\|", "|")}))
    return out


def test_every_exercise_and_every_catalogue_entry_is_on_the_page():
    page = recorded()
    assert sorted(page) == sorted(grading.MODULES)
    for n in grading.MODULES:
        catalogue = cm.load_catalogue(n)
        assert len(catalogue) >= 6
        assert [(one_line(name), cm.digest(answer)) for name, answer in catalogue.items()] == \
            [(name, sha) for name, sha, _ in page[n]], \
            f"exercise {n}: the catalogue changed: run `percolator common-mistakes`"


def test_the_page_is_what_render_makes_of_its_rows():
    page = recorded()
    sections = [(n, grading.exercise(n).exercise.title, page[n]) for n in sorted(page)]
    assert cm.render(sections) == PAGE.read_text(), "edited by hand: run `percolator common-mistakes`"


def test_every_row_names_a_real_failing_check_and_says_something():
    for n, rows in recorded().items():
        names = [c.name for c in grading.exercise(n).exercise.checks] \
            if hasattr(grading.exercise(n).exercise, "checks") else None
        for name, _, graded in rows:
            assert 1 <= graded["failed"] <= graded["checks"] == len(grading.exercise(n).exercise)
            assert len(graded["feedback"]) > 30, (n, name)
            if names is not None:
                assert graded["check"] in names, (n, name, graded["check"])


@pytest.mark.slow
@pytest.mark.parametrize("n", sorted(grading.MODULES))
def test_the_first_entry_grades_as_the_page_says(n):
    name, answer = next(iter(cm.load_catalogue(n).items()))
    page = {row[0]: row[2] for row in recorded()[n]}
    graded = cm.grade_entry(n, answer)
    graded["feedback"], graded["check"] = one_line(graded["feedback"]), one_line(graded["check"])
    assert page[one_line(name)] == graded


def test_a_catalogue_folder_without_catalogue_files_is_refused_by_name(tmp_path, capsys):
    assert main(["common-mistakes", "--catalogue", str(tmp_path), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--catalogue" in err[0]
