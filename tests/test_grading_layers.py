"""The trust line is the layout: what each folder of ``percolator_ref/grading`` may import.

The rules are the package docstring's (``percolator_ref/grading/__init__.py``): the code
that runs beside the student's (``client/``, the shared modules, the child's side of
``sandbox/``) imports no judge, no grader, no visualisation; the judge takes from
``client/`` only what the client side declares for it; no module uses another module's
underscore names. Each rule is checked on the imports (parsed, never run), and the checker
is shown to catch a module that breaks it. A runtime test then asks a real sandboxed child
which modules it loaded after it ran a student's notebook and served the checks' clients.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import nbformat
import pytest

from percolator_ref import grading
from percolator_ref.grading.grade.answers import answer_cell_ids, plan
from percolator_ref.grading.grade.grader import Limits, grade
from percolator_ref.grading.sandbox.launcher import InteractiveChild

from grading_helpers import pristine_path, solution_path

PACKAGE = Path(grading.__file__).resolve().parent
G = "percolator_ref.grading"
SHARED = {f"{G}", f"{G}.framework", f"{G}.channel", f"{G}.battery", f"{G}.demos"}
CHILD_SANDBOX = {f"{G}.sandbox.child", f"{G}.sandbox.landlock", f"{G}.sandbox.privileges"}
CLIENT_FOR_JUDGE = {f"{G}.client.host", f"{G}.client.roles", f"{G}.client.observe"}
NOT_IN_CHILD = (f"{G}.judge", f"{G}.grade", f"{G}.sandbox.launcher", f"{G}.sandbox.policy",
                f"{G}.sandbox.reach", "percolator_ref.viz")
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name an ``ImportFrom`` reads from."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, source: str, is_package: bool, top_level_only: bool = False):
    """``[(imported module, names, line)]``; ``from pkg import sub`` also yields ``pkg.sub``."""
    tree = ast.parse(source)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(a.name, (), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = resolve(module, is_package, node)
            names = tuple(a.name for a in node.names)
            found.append((target, names, node.lineno))
            found += [(f"{target}.{n}", (), node.lineno) for n in names
                      if (PACKAGE.parent.parent / Path(*f"{target}.{n}".split("."))).exists()
                      or (PACKAGE.parent.parent / Path(*f"{target}.{n}".split("."))).with_suffix(
                          ".py").exists()]
    return found


def underscore_uses(module: str, source: str, is_package: bool) -> list:
    """Another module's underscore names this module uses: ``from m import _x`` or ``m._x``."""
    tree = ast.parse(source)
    bad, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names
                        if a.name.startswith("percolator_ref")}
        elif isinstance(node, ast.ImportFrom):
            target = resolve(module, is_package, node)
            if not target.startswith("percolator_ref") or node.module == "__future__":
                continue
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    bad.append(f"line {node.lineno}: from {target} import {a.name}")
                aliases.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return bad


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def runs_in_child(module: str) -> bool:
    return module in SHARED or module in CHILD_SANDBOX or within(module, (f"{G}.client",))


def broken_rules(module: str, source: str, is_package: bool = False) -> list:
    """Every import of ``module`` that breaks a layer rule, as a sentence."""
    out = [f"{module} uses another module's underscore name, {u}"
           for u in underscore_uses(module, source, is_package)]
    top_only = module == G            # the package's own lazy names load inside functions
    for target, _, line in imports_of(module, source, is_package, top_level_only=top_only):
        if runs_in_child(module) and within(target, NOT_IN_CHILD):
            out.append(f"{module} (runs in the child) imports {target} (line {line})")
        if within(module, (f"{G}.judge",)):
            if within(target, (f"{G}.client",)) and target not in CLIENT_FOR_JUDGE \
                    and not target.startswith(f"{G}.client.ex") and target != f"{G}.client":
                out.append(f"{module} (judge) imports the client side's {target} (line {line})")
            if within(target, (f"{G}.sandbox", f"{G}.grade")):
                out.append(f"{module} (judge) imports {target} (line {line})")
        if within(module, (f"{G}.sandbox",)) and module not in CHILD_SANDBOX \
                and within(target, (f"{G}.grade",)):
            out.append(f"{module} (the launcher's side) imports the grader's {target} (line {line})")
    return out


def grading_sources():
    return sorted(PACKAGE.rglob("*.py"))


# -- the rules, on the package -------------------------------------------------------------

def test_every_grading_module_keeps_to_its_layer():
    broken = []
    for path in grading_sources():
        broken += broken_rules(module_name(path), path.read_text(), path.name == "__init__.py")
    assert broken == []


def test_the_folders_hold_what_the_docstring_says():
    folders = {p.parent.name for p in grading_sources() if p.parent != PACKAGE}
    assert folders == {"client", "judge", "sandbox", "grade"}
    for n, name in grading.MODULES.items():     # each exercise: its roles, apart from its checks
        assert (PACKAGE / "client" / f"{name}.py").is_file()
        assert (PACKAGE / "judge" / f"{name}.py").is_file()
        assert grading.roles(n).exercise is grading.exercise(n).exercise
        assert "@exercise.check" not in (PACKAGE / "client" / f"{name}.py").read_text()
        assert "@exercise.role" not in (PACKAGE / "judge" / f"{name}.py").read_text()


@pytest.mark.parametrize("module, source, expected", [
    (f"{G}.client.host", "from ..judge.trusted import Hub\n", "runs in the child"),
    (f"{G}.client.ex01_snapshot_read", "from percolator_ref.viz.tables import CellTable\n",
     "runs in the child"),
    (f"{G}.sandbox.child", "def f():\n    from ..grade.grader import grade\n", "runs in the child"),
    (f"{G}.framework", "from .judge.schedules import explore\n", "runs in the child"),
    (f"{G}.judge.ex05_oracle", "from ..client.vdisk import serving\n", "client side's"),
    (f"{G}.judge.trusted", "from ..sandbox.child import hide\n", "(judge) imports"),
    (f"{G}.sandbox.launcher", "from ..grade.grader import Limits\n", "launcher's side"),
    (f"{G}.judge.schedules", "from .trusted import _short\n", "underscore"),
    (f"{G}.grade.grader", "from ..judge import trusted\nx = trusted._digest\n", "underscore"),
])
def test_the_checker_catches_a_module_that_breaks_a_rule(module, source, expected):
    broken = broken_rules(module, source)
    assert len(broken) == 1 and expected in broken[0], broken


@pytest.mark.parametrize("module, source", [
    (f"{G}.judge.ex05_oracle", "from ..client.ex05_oracle import exercise\n"
                               "from ..client.host import ClientHost\n"),
    (f"{G}.grade.grader", "from ..judge.interactive import run_trusted\n"),
    (G, "def f():\n    from .judge.interactive import self_check\n"),
])
def test_the_checker_lets_the_allowed_imports_through(module, source):
    assert broken_rules(module, source, is_package=module == G) == []


def test_no_file_in_the_grading_room_is_over_500_lines():
    lines = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in grading_sources()}
    assert len(lines) > 40
    assert {name: n for name, n in lines.items() if n > MAX_LINES} == {}


# -- the child, asked at run time ----------------------------------------------------------

PROBE = '''
import sys as _probe_sys
_probe_seen = [0, 0]


def _probe(when="served"):
    """Print every module this process has loaded: from the answer cell, at the first call of a
    graded method, and at any later call once the set has grown."""
    calls, seen = _probe_seen
    if when != "served" or calls == 0 or len(_probe_sys.modules) != seen:
        print(f"PROBE {when} " + " ".join(sorted(_probe_sys.modules)), flush=True)
        _probe_seen[1] = len(_probe_sys.modules)
    if when == "served":
        _probe_seen[0] += 1


_probe("cell")
'''


def probed_notebook(n: int, path: Path) -> Path:
    """Exercise ``n``'s solution with a probe: at the end of its answer cell, and at the start of
    every graded method the world calls, it prints ``sys.modules`` (on the child's stdout)."""
    nb = nbformat.read(solution_path(n), as_version=4)
    ids = answer_cell_ids(nbformat.read(pristine_path(n), as_version=4), n)
    probed = 0
    spec = grading.exercise(n).exercise
    methods = {m for ms in spec.graded.values() for m in ms} or set(spec.graded)
    for cell in nb.cells:
        if cell.get("id") not in ids:
            continue
        lines, out = cell.source.splitlines(), []
        for i, line in enumerate(lines):
            out.append(line)
            stripped = line.lstrip()
            if stripped.startswith("def ") and stripped[4:].split("(")[0] in methods \
                    and line.rstrip().endswith(":"):
                body = next(b for b in lines[i + 1:] if b.strip())
                out.append(" " * (len(body) - len(body.lstrip())) + "_probe()")
        cell.source = PROBE + "\n".join(out) + "\n"
        assert cell.source.count("_probe()") >= 1, "the probe must sit in a graded method"
        probed += 1
    assert probed == len(ids) >= 1
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("n", [2, 5])      # families of schedules with reference writers; a disk
def test_the_sandboxed_child_loads_no_judge_no_checks_no_viz(tmp_path, monkeypatch, n):
    """Grade a correct notebook whose answer prints the child's ``sys.modules`` as it goes:
    from the answer cell (the roles are loaded by then), at the first call of a graded method
    (the world's clients are being served), and at any later call after a new import."""
    pristine = nbformat.read(pristine_path(n), as_version=4)
    context = [c.source for c in plan(pristine, pristine, n)[0] if c.kind == "context"]
    assert not any("viz" in s or "pandas" in s for s in context)    # so only grading could
    outputs = []
    exit_child = InteractiveChild.__exit__

    def keep_output(self, *exc):
        output = self.io / "output"
        outputs.append(output.read_text(errors="replace") if output.exists() else "")
        return exit_child(self, *exc)

    monkeypatch.setattr(InteractiveChild, "__exit__", keep_output)
    g = grade(probed_notebook(n, tmp_path / f"probed{n}.ipynb"), limits=Limits())
    assert g.passed, (g.problems, [r.feedback for r in g.checks if not r.passed])
    prints = [line.split()[1:] for out in outputs for line in out.splitlines()
              if line.startswith("PROBE ")]
    kinds = [p[0] for p in prints]      # each client process runs the cell, then is served
    assert kinds[0] == "cell" and "served" in kinds and set(kinds) == {"cell", "served"}
    prints = [p[1:] for p in prints]
    name = grading.MODULES[n]
    for loaded in prints:
        ours = [m for m in loaded if m.startswith("percolator_ref")]
        assert f"{G}.client.{name}" in ours and f"{G}.client.host" in ours
        assert f"{G}.judge.{name}" not in ours                  # no checks
        assert [m for m in ours if within(m, NOT_IN_CHILD)] == []   # no judge, grader, viz
        assert [m for m in loaded if within(m, ("pandas", "matplotlib", "ipywidgets"))] == []


ATTACK = '''
import sys as _probe_sys
_tried = []
for _name in ("percolator_ref.grading.judge.ex05_oracle", "percolator_ref.grading.judge.trusted",
              "percolator_ref.grading.grade.grader"):
    try:
        __import__(_name)
        _tried.append(_name.rsplit(".", 1)[1] + ":imported")
    except BaseException as _exc:
        _tried.append(_name.rsplit(".", 1)[1] + ":" + type(_exc).__name__)
raise RuntimeError("ATTACK " + " ".join(_tried))


def _probe(when="served"):
    pass
'''


def test_a_students_answer_cannot_reach_the_judge_from_the_child(tmp_path, monkeypatch):
    """The attack: the answer cell imports the judge's modules (a check, the world, the grader)
    to patch them. They are not loaded in the child and the sandbox refuses to read them."""
    monkeypatch.setattr(sys.modules[__name__], "PROBE", ATTACK)
    g = grade(probed_notebook(5, tmp_path / "attack.ipynb"), limits=Limits())
    said = " ".join(g.problems)
    assert "ATTACK ex05_oracle:PermissionError trusted:PermissionError grader:PermissionError" \
        in said, said
