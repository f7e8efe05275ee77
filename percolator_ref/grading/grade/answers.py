"""What gets graded: the student's answer cells only, checked statically first.

The instructor's pristine exercise notebook (``exercises/NN_*.ipynb``, made
by :mod:`.generate`) decides which cells are which, by cell id:

- *answer cells*: code cells holding the generator's stub
  (``raise NotImplementedError("Exercise N")``). Their source is taken from
  the student's notebook (the last cell with that id); nothing else is.
- *check cells*: tagged ``check``; never run by the grader;
- *demo cells*: tagged ``demo`` (a worked run shown to the student, e.g. a
  wrong answer's counterexample in the stepper); never run by the grader.
- every other code cell is *context* (imports, the worked example): its
  pristine source runs, whatever the student's copy says.

:func:`static_problems` then rejects a graded step that the answer cells do
not define themselves (see :class:`~..framework.Exercise`).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

STUB = 'raise NotImplementedError("Exercise {}")'


@dataclass(frozen=True)
class Cell:
    id: str
    kind: str          # "context" or "answer"
    source: str


def is_check_cell(cell) -> bool:
    return "check" in cell.get("metadata", {}).get("tags", [])


def is_demo_cell(cell) -> bool:
    return "demo" in cell.get("metadata", {}).get("tags", [])


def answer_cell_ids(pristine, n: int) -> list:
    """Ids of the pristine notebook's answer cells (those holding the stub)."""
    stub = STUB.format(n)
    return [c.get("id") for c in pristine.cells
            if c.cell_type == "code" and stub in c.source and not is_check_cell(c)
            and not is_demo_cell(c)]


def check_answer_name(pristine) -> str:
    """The name the pristine check cell hands to ``grading.check(N, NAME)``."""
    for cell in pristine.cells:
        if cell.cell_type != "code" or not is_check_cell(cell):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "check" and len(node.args) == 2 \
                    and isinstance(node.args[1], ast.Name):
                return node.args[1].id
    raise ValueError("the pristine notebook has no check cell calling grading.check(N, NAME)")


def plan(student, pristine, n: int):
    """``(cells, problems)``: the cells to run, in notebook order, and what is missing."""
    ids = answer_cell_ids(pristine, n)
    if not ids:
        raise ValueError(f"the pristine exercise {n} has no answer cell (no stub)")
    mine = {}
    for cell in student.cells:
        if cell.get("cell_type") == "code" and cell.get("id") in ids:
            mine[cell.get("id")] = cell.get("source", "")
    cells, problems = [], []
    for cell in pristine.cells:
        if cell.cell_type != "code" or is_check_cell(cell) or is_demo_cell(cell):
            continue
        if cell.get("id") in ids:
            if cell.get("id") not in mine:
                problems.append(f"answer cell {cell.get('id')} is missing from the notebook "
                                "(cells are matched by id: answer in the cell that held the stub)")
            cells.append(Cell(cell.get("id"), "answer", str(mine.get(cell.get("id"), ""))))
        else:
            cells.append(Cell(cell.get("id"), "context", cell.source))
    return cells, problems


# -- static checks -------------------------------------------------------------

def syntax_problems(cells) -> list:
    """A syntax error in an answer cell, with its line."""
    problems = []
    for cell in cells:
        if cell.kind != "answer":
            continue
        try:
            ast.parse(cell.source)
        except SyntaxError as exc:
            problems.append(f"SyntaxError in your answer cell {cell.id}, line {exc.lineno}: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            problems.append(f"your answer cell {cell.id} cannot be compiled: {type(exc).__name__}: "
                            f"{str(exc)[:100]}")
    return problems


def static_problems(cells, graded: dict, forbidden_bases=(), hidden=()) -> list:
    """Why the answer cells do not define each graded step themselves (empty: they do)."""
    body = [stmt for cell in cells if cell.kind == "answer" for stmt in ast.parse(cell.source).body]
    reference = {h.rsplit(":", 1)[-1].split(".")[-1] for h in hidden}
    problems = []
    for name, methods in graded.items():
        node = _last_binding(body, name)
        if node is None:
            problems.append(f"your answer cells do not define {name}")
        elif methods and not isinstance(node, ast.ClassDef):
            problems.append(f"{name} is {_how_bound(node)} instead of written as a class in "
                            "your answer cell: the graded code must be your own")
        elif not methods and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            problems.append(f"{name} is {_how_bound(node)} instead of written with def in "
                            "your answer cell: the graded code must be your own")
        elif methods:
            problems += _class_problems(node, methods, forbidden_bases, reference)
            problems += _rebound_later(body, name, methods)
        else:
            problems += _delegation(node, name, name, reference)
    return problems


def _last_binding(body, name):
    found = None
    for stmt in body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            found = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)) and \
                any((a.asname or a.name.split(".")[0]) == name for a in stmt.names):
            found = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(name in _bound_names(t) for t in targets):
                found = stmt
    return found


def _bound_names(target) -> set:
    """Names an assignment target binds (``a``, ``a, b``, ``*a``; not ``a.x`` or ``a[0]``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_bound_names(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return set()


def _how_bound(node) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return f"imported (line {node.lineno})"
    if isinstance(node, ast.ClassDef):
        return f"a class (line {node.lineno})"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"a function (line {node.lineno})"
    return f"assigned (line {node.lineno}: {ast.unparse(node)[:60]})"


def _class_problems(cls, methods, forbidden_bases, reference) -> list:
    problems = []
    for base in cls.bases:
        base_name = ast.unparse(base).split(".")[-1]
        if base_name in forbidden_bases:
            problems.append(f"class {cls.name} inherits from the reference {base_name}: "
                            "write the class yourself")
    for method in methods:
        node = _last_binding(cls.body, method)
        if node is None:
            bases = ", ".join(ast.unparse(b) for b in cls.bases) or "object"
            problems.append(f"class {cls.name} does not define {method} itself: inheriting it "
                            f"from {bases} would grade the reference, not your code")
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            problems.append(f"{cls.name}.{method} is {_how_bound(node)}: write it with def "
                            "in the class body")
        else:
            problems += _delegation(node, f"{cls.name}.{method}", method, reference)
    return problems


def _delegation(fn, label: str, name: str, reference) -> list:
    """A body that only calls the same step elsewhere (super(), the reference) delegates."""
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and \
        isinstance(fn.body[0].value, ast.Constant) and isinstance(fn.body[0].value.value, str) \
        else fn.body
    if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)):
        return []
    call = body[0].value
    if not isinstance(call, ast.Call):
        return []
    target = call.func
    called = target.attr if isinstance(target, ast.Attribute) else \
        target.id if isinstance(target, ast.Name) else None
    if called == name or called in reference:
        return [f"{label} only calls {ast.unparse(target)}(...): it delegates the graded step "
                "instead of implementing it"]
    return []


def _rebound_later(body, name, methods) -> list:
    problems = []
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == name and target.attr in methods:
                    problems.append(f"line {stmt.lineno} replaces {name}.{target.attr} after the "
                                    "class: the graded step must be the def in the class body")
    return problems
