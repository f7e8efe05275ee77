"""A complete Gradescope autograder for one exercise, and the program it runs per submission.

``percolator grade --exercise N --gradescope-autograder OUT.zip`` writes (with
:func:`build_autograder`) a zip to upload as a Gradescope programming
assignment's autograder:

- ``setup.sh``: run once, as root, when Gradescope builds the image: a venv
  at ``/autograder/venv`` with the kit's pinned ``requirements.txt``;
- ``run_autograder``: run for each submission: grades everything under
  ``/autograder/submission`` as *one* submission for exercise N (so only one
  notebook per exercise counts, and a notebook for another exercise scores 0,
  :mod:`.submissions`) and writes ``/autograder/results/results.json``;
- ``source/``: the kit (the ``percolator_ref`` package with its graders, the
  pristine ``exercises/``, ``pyproject.toml`` and ``requirements.txt``); no
  solutions and no tests.

The root is ``/autograder`` unless ``PERCOLATOR_AUTOGRADER_ROOT`` says otherwise
and the interpreter ``$ROOT/venv/bin/python`` unless ``PERCOLATOR_PYTHON`` says
otherwise: a test runs ``run_autograder`` against a fake tree in a temp dir.

The grade is out of exercise N's checks (one point each): two copies of a
notebook score as one, and the notebooks that do not count appear as tests
worth 0 points that say why.
"""
from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
ROOT="${PERCOLATOR_AUTOGRADER_ROOT:-/autograder}"
if ! command -v python3 >/dev/null 2>&1; then
    apt-get update && apt-get install -y python3 python3-venv python3-pip
fi
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install --upgrade pip
"$ROOT/venv/bin/pip" install -r "$ROOT/source/requirements.txt"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission, as root: it grades $ROOT/submission as one
# submission for exercise {exercise} and writes $ROOT/results/results.json.
set -uo pipefail
ROOT="${{PERCOLATOR_AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{PERCOLATOR_PYTHON:-$ROOT/venv/bin/python}}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
PYTHONPATH="$ROOT/source" exec "$PYTHON" -m percolator_ref.grading.grade.gradescope \\
    --root "$ROOT" --exercise {exercise}
"""

KIT_FILES = ("pyproject.toml", "requirements.txt")


def kit_members(repo: Path) -> list:
    """``(path in the zip, file)`` for the kit: the package, the pristine exercises, the pins."""
    members = [(f"source/{name}", repo / name) for name in KIT_FILES if (repo / name).is_file()]
    for folder, pattern in (("percolator_ref", "*"), ("exercises", "*.ipynb")):
        for f in sorted((repo / folder).rglob(pattern)):
            if f.is_file() and "__pycache__" not in f.parts and ".ipynb_checkpoints" not in f.parts \
                    and f.suffix not in (".pyc", ".pyo"):
                members.append((f"source/{f.relative_to(repo)}", f))
    return members


def build_autograder(out, exercise: int, repo=None) -> Path:
    """Write the autograder zip for ``exercise`` to ``out``; return its path.

    Raises ValueError for an exercise number the kit does not have.
    """
    from .. import MODULES
    from .grader import ROOT
    if isinstance(exercise, bool) or exercise not in MODULES:
        raise ValueError(f"exercise must be one of {sorted(MODULES)}, got {exercise!r}")
    repo = Path(repo) if repo is not None else ROOT
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        _add(z, "setup.sh", SETUP_SH, executable=True)
        _add(z, "run_autograder", RUN_AUTOGRADER.format(exercise=exercise), executable=True)
        for name, f in kit_members(repo):
            z.write(f, name)
    partial.replace(out)                     # nothing half-written under the asked name
    return out


def _add(z: zipfile.ZipFile, name: str, text: str, executable: bool) -> None:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, text)


def run(root, exercise: int, limits=None) -> dict:
    """Grade ``root/submission`` as one submission for ``exercise``; write and return results.json."""
    from .grader import EXERCISES, Limits, gradescope
    from .submissions import grade_submissions
    root = Path(root)
    grades = grade_submissions(root / "submission", EXERCISES, limits or Limits(), only=exercise,
                               whole=True)
    results = gradescope(grades)
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m percolator_ref.grading.grade.gradescope",
                                     description="Grade one Gradescope submission.")
    parser.add_argument("--root", default="/autograder", help="the autograder tree")
    parser.add_argument("--exercise", type=int, required=True, help="the assignment's exercise")
    args = parser.parse_args(argv)
    results = run(args.root, args.exercise)
    print(results["output"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
