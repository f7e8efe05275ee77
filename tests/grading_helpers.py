"""Build student notebooks from a pristine exercise: only the answer cells change."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nbformat

from percolator_ref.grading.answers import answer_cell_ids
from percolator_ref.grading.generate import BEGIN, END, exercise_number

REPO = Path(__file__).resolve().parents[1]


def pristine_path(n: int) -> Path:
    return next((REPO / "exercises").glob(f"{n:02d}_*.ipynb"))


def solution_path(n: int) -> Path:
    return next((REPO / "solutions").glob(f"{n:02d}_*.ipynb"))


def student_notebook(path, n: int, answer: str, student=None, exercises_dir=None) -> Path:
    """Write the pristine exercise ``n`` with its (single) answer cell replaced by ``answer``."""
    source = Path(exercises_dir) / pristine_path(n).name if exercises_dir else pristine_path(n)
    nb = nbformat.read(source, as_version=4)
    ids = answer_cell_ids(nb, n)
    assert len(ids) == 1, "these helpers fill exactly one answer cell"
    for cell in nb.cells:
        if cell.get("id") in ids:
            cell.source = answer
            cell.outputs = []
    if student is not None:
        nb.metadata["percolator"]["student"] = student
    nbformat.write(nb, path)
    return Path(path)


def solution_answer(n: int) -> str:
    """The solution's answer cell, markers removed (what a correct student writes)."""
    nb = nbformat.read(solution_path(n), as_version=4)
    assert exercise_number(nb) == n
    cells = [c.source for c in nb.cells if c.cell_type == "code" and BEGIN in c.source]
    assert len(cells) == 1
    return "\n".join(line for line in cells[0].splitlines() if line.strip() not in (BEGIN, END))


def load_catalogue(n: int) -> dict:
    """``WRONG`` of tests/wrong_answers/exNN_*.py."""
    paths = sorted((REPO / "tests" / "wrong_answers").glob(f"ex{n:02d}_*.py"))
    if not paths:
        return {}
    spec = importlib.util.spec_from_file_location(f"wrong_answers_ex{n:02d}", paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WRONG


def as_json(value) -> str:
    return json.dumps(value)
