"""Generate exercise notebooks from solution notebooks (the one source of truth).

In every code cell of ``solutions/NN_*.ipynb``, each region

    # BEGIN SOLUTION
    ...
    # END SOLUTION

becomes ``raise NotImplementedError("Exercise N")`` at the indentation of
the ``# BEGIN SOLUTION`` line, under a ``# YOUR CODE HERE`` comment. Every
other cell, the outputs included, is copied unchanged, except the check cell
(tagged ``check``): it is left unrun, with no output, so an unsolved exercise
never shows a passing report. The check cell raises ``ChecksFailed`` while any
check fails (``report.raise_if_failed()``), so nbval fails the exercise until the
student's code passes every check. ``N`` comes from ``metadata.percolator.exercise``.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_BEGIN_RE = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")


def exercise_number(nb) -> int:
    try:
        n = nb.metadata["percolator"]["exercise"]
    except KeyError:
        raise ValueError("notebook metadata has no percolator.exercise number") from None
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"metadata percolator.exercise must be an int, got {n!r}")
    return n


def strip_solutions(source: str, n: int) -> str:
    """Replace each BEGIN/END SOLUTION region of ``source`` by the stub."""
    out, inside = [], None
    for line in source.splitlines():
        match = _BEGIN_RE.match(line)
        if inside is None and match:
            inside = match.group(1)
            out.append(f"{inside}# YOUR CODE HERE")
            out.append(f'{inside}raise NotImplementedError("Exercise {n}")')
        elif inside is not None and line.strip() == END:
            inside = None
        elif inside is None:
            if line.strip() == END:
                raise ValueError(f"exercise {n}: '{END}' without '{BEGIN}'")
            out.append(line)
    if inside is not None:
        raise ValueError(f"exercise {n}: '{BEGIN}' without '{END}'")
    return "\n".join(out)


def exercise_from_solution(solution):
    """The exercise notebook for a solution notebook (a new object)."""
    nb = copy.deepcopy(solution)
    n = exercise_number(nb)
    regions = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and BEGIN in cell.source:
            regions += cell.source.count(BEGIN)
            cell.source = strip_solutions(cell.source, n)
        if "check" in cell.metadata.get("tags", []):
            cell.outputs, cell.execution_count = [], None
    if regions == 0:
        raise ValueError(f"exercise {n}: no '{BEGIN}' region in the solution")
    nb.metadata["percolator"]["role"] = "exercise"
    return nb


def render(nb) -> str:
    return nbformat.writes(nb) + "\n"


def generate(solutions_dir, exercises_dir, check: bool = False) -> list:
    """Write (or with ``check``, compare) every exercise; return the names that differ."""
    solutions_dir, exercises_dir = Path(solutions_dir), Path(exercises_dir)
    drift = []
    for path in sorted(solutions_dir.glob("[0-9][0-9]_*.ipynb")):
        text = render(exercise_from_solution(nbformat.read(path, as_version=4)))
        target = exercises_dir / path.name
        current = target.read_text() if target.exists() else None
        if current != text:
            drift.append(path.name)
            if not check:
                exercises_dir.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    return drift
