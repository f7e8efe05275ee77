"""The instructor's workflow (issue 19, item 5): each case is flagged or scores 0.

- two copies of one notebook in a submission count once;
- a notebook for another exercise than the assignment's (``--exercise``) scores 0, with the reason;
- a student name found in two submissions is flagged in the CSV;
- control characters and terminal escapes in feedback are escaped everywhere;
- the generated Gradescope autograder, run against a fake ``/autograder`` tree.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from percolator_ref import grading
from percolator_ref.grading.grade.grader import Grade, Limits
from percolator_ref.grading.grade.results import gradescope, write_csv
from percolator_ref.grading.grade.gradescope import build_autograder
from percolator_ref.grading.grade.submissions import (escape_text, find_submissions, grade_submissions,
                                                unpack_zip)
from grading_helpers import (REPO, broken_zips, load_catalogue, pristine_path, solution_answer,
                             student_notebook)

LIMITS = Limits()
N5 = len(grading.exercise(5).exercise.checks)          # exercise 5's checks
PARTIAL = "writes the mark on every call (no ranges)"      # a wrong answer that passes some checks
FORGED = '''
class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        raise ValueError("boom\\n  PASS  the forged check\\r\\x1b[2K\\x1b[32m  PASS  green\\u202e"
                         "\\n  score: 8/8 checks (100%), PASSED")

    def get_timestamp(self):
        return 1
'''


def own_name(n: int) -> str:
    return pristine_path(n).name


def rows_of(grades, tmp_path) -> list:
    write_csv(grades, tmp_path / "scores.csv")
    return list(csv.DictReader((tmp_path / "scores.csv").open()))


# -- one notebook per exercise ---------------------------------------------------------------

@pytest.fixture(scope="module")
def partial_grade(tmp_path_factory):
    """The partial wrong answer graded alone: the score two copies must not exceed."""
    tmp = tmp_path_factory.mktemp("partial")
    path = student_notebook(tmp / own_name(5), 5, load_catalogue(5)[PARTIAL])
    [g] = grade_submissions(path, REPO / "exercises", LIMITS)
    assert 0 < g.n_passed < g.total, g.summary()
    return g


def test_two_copies_of_a_notebook_count_once(tmp_path, partial_grade):
    alice = tmp_path / "subs" / "alice"
    alice.mkdir(parents=True)
    student_notebook(alice / "copy.ipynb", 5, load_catalogue(5)[PARTIAL])
    student_notebook(alice / own_name(5), 5, load_catalogue(5)[PARTIAL])
    grades = grade_submissions(tmp_path / "subs", REPO / "exercises", LIMITS, jobs=2)
    assert [(Path(g.path).name, g.counted) for g in grades] == [("05_timestamp_oracle.ipynb", True),
                                                                ("copy.ipynb", False)]
    counted, copy = grades
    assert (counted.n_passed, counted.total) == (partial_grade.n_passed, partial_grade.total)
    assert (copy.n_passed, copy.total, copy.checks) == (0, 0, [])
    assert "only one notebook per exercise counts" in copy.problems[0]
    assert "05_timestamp_oracle.ipynb" in copy.problems[0]            # says which one counts
    results = gradescope(grades)
    assert results["score"] == partial_grade.n_passed
    assert sum(t["max_score"] for t in results["tests"]) == partial_grade.total
    rows = rows_of(grades, tmp_path)
    assert [(r["counted"], r["checks_passed"], r["submission"]) for r in rows] == \
        [("yes", str(partial_grade.n_passed), "alice"), ("no", "0", "alice")]


def test_without_the_exercises_own_name_the_first_by_path_counts(tmp_path):
    sub = tmp_path / "bob"
    sub.mkdir()
    for name in ("b.ipynb", "a.ipynb"):
        shutil.copy(pristine_path(5), sub / name)
    [s] = find_submissions(tmp_path, tmp_path / "unpack")
    from percolator_ref.grading.grade.submissions import choose
    counted, skipped = choose(s, REPO / "exercises")
    assert [s.notebooks[i].name for i in counted] == ["a.ipynb"]
    assert [(s.notebooks[i].name, n) for i, n, _ in skipped] == [("b.ipynb", 5)]


# -- one assignment ------------------------------------------------------------------

def test_a_notebook_for_another_exercise_scores_zero_with_the_reason(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    student_notebook(subs / "carol.ipynb", 1, solution_answer(1))            # solved, but exercise 1
    grades = grade_submissions(subs, REPO / "exercises", LIMITS, only=5)
    [g] = grades
    assert (g.exercise, g.n_passed, g.total, g.counted) == (5, 0, N5, True)
    assert g.problems == ["this notebook is exercise 1; this run grades exercise 5 "
                          "(--exercise 5): it scores 0"]
    assert all(not r.passed and "this notebook is exercise 1" in r.reason for r in g.checks)
    assert gradescope(grades)["score"] == 0.0


def test_the_right_exercise_counts_and_the_other_is_not_run(tmp_path):
    dave = tmp_path / "subs" / "dave"
    dave.mkdir(parents=True)
    student_notebook(dave / own_name(1), 1, solution_answer(1))
    student_notebook(dave / own_name(5), 5, solution_answer(5))
    grades = grade_submissions(tmp_path / "subs", REPO / "exercises", LIMITS, only=5)
    assert [(g.exercise, g.counted, g.n_passed, g.total) for g in grades] == \
        [(1, False, 0, 0), (5, True, N5, N5)]
    assert gradescope(grades)["score"] == N5
    empty = tmp_path / "empty"
    (empty / "erin").mkdir(parents=True)
    student_notebook(empty / "erin" / "notes.ipynb", 1, "x = 1\n")
    [wrong] = grade_submissions(empty, REPO / "exercises", LIMITS, only=5)
    assert (wrong.exercise, wrong.total, wrong.counted) == (5, N5, True)


def test_cli_binds_the_run_to_an_exercise(tmp_path, capsys):
    from percolator_ref.commands import main
    subs = tmp_path / "subs"
    subs.mkdir()
    student_notebook(subs / "carol.ipynb", 1, solution_answer(1))
    assert main(["grade", str(subs), "--exercise", "5", "--csv", str(tmp_path / "s.csv")]) == 1
    assert "this notebook is exercise 1; this run grades exercise 5" in capsys.readouterr().out
    [row] = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert (row["exercise"], row["checks_passed"], row["checks_total"]) == ("5", "0", str(N5))
    assert main(["grade", str(subs), "--exercise", "11"]) == 2
    assert "--exercise must be one of [1, 2" in capsys.readouterr().err


# -- names ------------------------------------------------------------------------------

def test_a_duplicated_student_name_is_flagged(tmp_path):
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "mallory").mkdir()
    shutil.copy(pristine_path(5), subs / "alice" / own_name(5))
    nb = json.loads(pristine_path(5).read_text())
    nb["metadata"]["percolator"]["student"] = "alice"                 # forged: names another student
    (subs / "mallory" / own_name(5)).write_text(json.dumps(nb))
    grades = grade_submissions(subs, REPO / "exercises", LIMITS, jobs=2)
    rows = rows_of(grades, tmp_path)
    assert [(r["student"], r["submission"]) for r in rows] == [("alice", "alice"), ("alice", "mallory")]
    assert rows[0]["flags"] == "duplicate student name 'alice': also in submission(s) mallory"
    assert rows[1]["flags"] == "duplicate student name 'alice': also in submission(s) alice"
    assert "flag: duplicate student name" in grades[1].summary()


# -- escapes ----------------------------------------------------------------------------

def test_escape_text_leaves_no_control_character():
    text = "a\nb\r\x1b[2K\x07\u202e\u2028\x00\x9b" + "é ok"
    out = escape_text(text)
    assert out == "a\\nb\\r\\x1b[2K\\x07\\u202e\\u2028\\x00\\x9bé ok"
    assert escape_text("a\nb", newlines=True) == "a\nb"


def test_forged_error_text_prints_no_fake_pass_line(tmp_path):
    path = student_notebook(tmp_path / "evil.ipynb", 5, FORGED, student="eve\x1b[2K\nbob")
    [g] = grade_submissions(path, REPO / "exercises", LIMITS)
    assert g.n_passed == 0 and "the forged check" in g.checks[0].reason       # the raw text is kept
    summary = g.summary()
    assert not any(c in summary for c in "\x1b\r\u202e")
    real_pass_lines = [line for line in summary.splitlines() if line.lstrip().startswith("PASS")]
    assert real_pass_lines == []
    assert summary.splitlines()[-1].startswith(f"  score: 0/{N5}")
    rows = rows_of([g], tmp_path)
    raw = (tmp_path / "scores.csv").read_text()
    assert raw.count("\n") == 2 and "\x1b" not in raw                          # header + one row
    assert rows[0]["student"] == "eve[2Kbob"                 # the grader keeps printable ones only
    results = gradescope([g])
    texts = [results["output"]] + [t["output"] for t in results["tests"]]
    assert not any(c in t for t in texts for c in "\x1b\r\u202e")
    assert "\\x1b[2K" in results["tests"][0]["output"]


# -- zips ---------------------------------------------------------------------------------

def test_a_zip_is_one_submission_and_a_climbing_member_is_refused(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = student_notebook(tmp_path / own_name(5), 5, solution_answer(5))
    with zipfile.ZipFile(subs / "frank.zip", "w") as z:
        z.write(nb, f"frank/{own_name(5)}")
        z.write(nb, "frank/again.ipynb")
    with zipfile.ZipFile(subs / "grace.zip", "w") as z:
        z.write(nb, "../../escaped.ipynb")
    grades = grade_submissions(subs, REPO / "exercises", LIMITS)
    assert [(g.submission, g.counted, g.n_passed) for g in grades] == \
        [("frank", True, N5), ("frank", False, 0), ("grace", True, 0)]
    assert grades[0].path == f"{subs / 'frank.zip'}!/frank/{own_name(5)}"
    assert "refused member '../../escaped.ipynb'" in grades[2].problems[0]
    assert not (tmp_path / "escaped.ipynb").exists() and not (subs.parent.parent / "escaped.ipynb").exists()
    with pytest.raises(ValueError, match="not a readable zip"):
        (tmp_path / "bad.zip").write_text("no")
        unpack_zip(tmp_path / "bad.zip", tmp_path / "out")


# -- the Gradescope autograder ----------------------------------------------------------------

@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("autograder")
    out = build_autograder(tmp / "autograder.zip", 5)
    return out


def run_autograder(zip_path: Path, root: Path, notebooks: dict) -> dict:
    """Unpack the autograder as Gradescope does, put ``notebooks`` in the submission, run it."""
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(root / "source_zip")
    (root / "source_zip" / "source").rename(root / "source")
    for name in ("setup.sh", "run_autograder"):
        shutil.copy(root / "source_zip" / name, root / name)
    (root / "submission").mkdir()
    for name, make in notebooks.items():
        make(root / "submission" / name)
    env = dict(os.environ, PERCOLATOR_AUTOGRADER_ROOT=str(root), PERCOLATOR_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True,
                          timeout=300, env=env, cwd=root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_the_autograder_zip_is_complete(autograder):
    with zipfile.ZipFile(autograder) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        run = z.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "source/requirements.txt", "source/pyproject.toml",
            "source/percolator_ref/grading/grade/grader.py", f"source/exercises/{own_name(5)}"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert not any(n.startswith(("source/solutions", "source/tests")) for n in names)
    assert not any("__pycache__" in n for n in names)
    assert "--exercise 5" in run
    with zipfile.ZipFile(autograder) as z:
        assert z.read("source/requirements.txt") == (REPO / "requirements.txt").read_bytes()


def test_the_autograder_grades_right_wrong_copies_and_wrong_exercise(autograder, tmp_path,
                                                                    partial_grade):
    partial = load_catalogue(5)[PARTIAL]
    right = run_autograder(autograder, tmp_path / "right", {
        own_name(5): lambda p: student_notebook(p, 5, solution_answer(5))})
    assert right["score"] == N5 and len(right["tests"]) == N5
    assert all(t["status"] == "passed" for t in right["tests"])
    wrong = run_autograder(autograder, tmp_path / "wrong", {
        own_name(5): lambda p: student_notebook(p, 5, partial)})
    assert wrong["score"] == partial_grade.n_passed < N5
    copies = run_autograder(autograder, tmp_path / "copies", {
        own_name(5): lambda p: student_notebook(p, 5, partial),
        "copy of it.ipynb": lambda p: student_notebook(p, 5, partial)})
    assert copies["score"] == partial_grade.n_passed                        # a part of N5, never twice it
    assert sum(t["max_score"] for t in copies["tests"]) == N5
    assert any("only one notebook per exercise counts" in t["output"] for t in copies["tests"])
    other = run_autograder(autograder, tmp_path / "other", {
        own_name(1): lambda p: student_notebook(p, 1, solution_answer(1))})
    assert other["score"] == 0.0 and sum(t["max_score"] for t in other["tests"]) == N5
    assert "this notebook is exercise 1; this run grades exercise 5" in other["tests"][0]["output"]


def test_the_autograder_needs_a_known_exercise(tmp_path):
    with pytest.raises(ValueError, match="exercise must be one of"):
        build_autograder(tmp_path / "x.zip", 11)
    assert not (tmp_path / "x.zip").exists()


def test_cli_writes_the_autograder_and_names_bad_arguments(tmp_path, capsys):
    from percolator_ref.commands import main
    out = tmp_path / "ag" / "autograder5.zip"
    assert main(["grade", "--exercise", "5", "--gradescope-autograder", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert "run_autograder" in zipfile.ZipFile(out).namelist()
    (tmp_path / "empty").mkdir()
    runs = [(["--gradescope-autograder", str(tmp_path / "x.zip")], "needs --exercise N"),
            ([], "give a PATH"),
            ([str(tmp_path / "empty")], "no notebooks under"),
            ([str(tmp_path / "empty"), "--exercise", "0"], "--exercise must be one of")]
    for argv, message in runs:
        assert main(["grade", *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert not (tmp_path / "x.zip").exists()


# -- hostile class folders (issue 30, holes 10, 11, 14) -------------------------------------------

def test_a_broken_zip_is_its_own_row_and_the_class_is_graded(tmp_path):
    subs = tmp_path / "class"
    (subs / "honest").mkdir(parents=True)
    nb = student_notebook(subs / "honest" / own_name(5), 5, solution_answer(5))
    expected = broken_zips(subs, nb, own_name(5))
    grades = grade_submissions(subs, REPO / "exercises", LIMITS, only=5)
    by = {g.submission: g for g in grades}
    assert sorted(by) == sorted([*expected, "honest"]) and len(grades) == len(by)
    assert by["honest"].n_passed == N5 and by["honest"].passed
    for name, why in expected.items():
        assert by[name].n_passed == 0 and why in by[name].problems[0], by[name].problems
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("percolator-unpack-*/zip-*"))


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret" / "grader_key.txt"
    path.parent.mkdir()
    path.write_text("TOPSECRET-0123456789-abcdefghij-do-not-show")
    return path


def test_links_in_a_class_folder_are_refused(tmp_path, secret):
    subs = tmp_path / "class"
    (subs / "honest").mkdir(parents=True)
    nb = student_notebook(subs / "honest" / own_name(5), 5, solution_answer(5))
    (subs / "copier").mkdir()
    (subs / "copier" / own_name(5)).symlink_to(nb)                    # a classmate's notebook
    (subs / "sols.ipynb").symlink_to(next((REPO / "solutions").glob("05_*.ipynb")))
    (subs / "whole").symlink_to(subs / "honest", target_is_directory=True)
    (subs / "nested").mkdir()
    (subs / "nested" / "in").symlink_to(subs / "honest", target_is_directory=True)
    (subs / "keyholder").mkdir()
    (subs / "keyholder" / own_name(5)).symlink_to(secret)
    grades = grade_submissions(subs, REPO / "exercises", LIMITS, only=5)
    by = {}
    for g in grades:
        by.setdefault(g.submission, []).append(g)
    assert sorted(by) == ["copier", "honest", "keyholder", "nested", "sols", "whole"]
    assert [g.n_passed for g in by["honest"]] == [N5]
    for name in ("copier", "keyholder", "nested", "sols", "whole"):
        assert sum(g.n_passed for g in by[name]) == 0, name
        assert any("symbolic link" in p for g in by[name] for p in g.problems), name
    assert "TOPSECRET" not in json.dumps(gradescope(grades)) + "".join(g.summary() for g in grades)


def test_the_gradescope_path_never_quotes_a_file(tmp_path, secret):
    """Gradescope's submission folder: a link to a secret is refused, and a file that is not
    a notebook is reported without its contents."""
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / own_name(5)).symlink_to(secret)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / own_name(5)).write_text(secret.read_text())
    for folder in (linked, plain):
        grades = grade_submissions(folder, REPO / "exercises", LIMITS, only=5, whole=True)
        shown = json.dumps(gradescope(grades))
        assert "TOPSECRET" not in shown and "0123456789" not in shown, shown
        assert sum(g.n_passed for g in grades) == 0
        assert sum(t["max_score"] for t in gradescope(grades)["tests"]) >= N5
    assert "symbolic link" in json.dumps(gradescope(grade_submissions(
        linked, REPO / "exercises", LIMITS, only=5, whole=True)))


NOSY = '''
import json, sys


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        pass

    def get_timestamp(self):
        return 1


frame, job = sys._getframe(), None
while frame is not None and job is None:
    job = frame.f_locals.get("job") if isinstance(frame.f_locals.get("job"), dict) else None
    frame = frame.f_back
raise ValueError(f"found job {job is not None}, lists a classmate {'qz' + 'honest' in json.dumps(job)}")
'''


def test_a_childs_job_lists_no_other_submission(tmp_path):
    subs = tmp_path / "class"
    (subs / "qzhonest").mkdir(parents=True)
    student_notebook(subs / "qzhonest" / own_name(5), 5, solution_answer(5))
    student_notebook(subs / "nosy.ipynb", 5, NOSY)
    grades = grade_submissions(subs, REPO / "exercises", LIMITS, only=5)
    by = {g.submission: g for g in grades}
    assert by["qzhonest"].n_passed == N5
    assert "found job True, lists a classmate False" in by["nosy"].problems[0], by["nosy"].problems


def test_cli_refuses_one_gradescope_result_for_a_class(tmp_path, capsys):
    from percolator_ref.commands import main
    subs = tmp_path / "class"
    subs.mkdir()
    for name in ("ann", "bob"):
        student_notebook(subs / f"{name}.ipynb", 5, solution_answer(5))
    out = tmp_path / "results.json"
    runs = [([str(subs), "--exercise", "5"], "holds 2 submissions"),
            ([str(subs / "ann.ipynb")], "give --exercise N")]
    for argv, message in runs:
        assert main(["grade", *argv, "--gradescope", str(out)]) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert not out.exists()
