"""The reference implementation's shape (issue 12): readable next to the paper.

- no module uses another module's underscore names (checked with ``ast``);
- no function in ``percolator_ref/`` is longer than 40 lines;
- the core protocol stays at most 1,000 code lines (docstrings excluded);
- the README's paper-to-code table names functions that exist.
"""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "percolator_ref"
MAX_FUNCTION_LINES = 40
MAX_CORE_LINES = 1000
# The protocol as the paper describes it: Bigtable and its cells (§2.1, Figure 5),
# transactions and cleanup (§2.2), the oracle (§2.3), notifications (§2.4), and the
# client's session. Wiring (cluster.py), fault injection, interceptors, the worker
# runtime, workloads and tools are outside this count.
CORE = ["bigtable.py", "model.py", "step.py", "session.py", "rows.py", "transaction.py",
        "cleanup.py", "services/oracle.py", "services/lockservice.py",
        "observers/notifications.py"]


# Names that start with "_" but are public protocols of other libraries.
PUBLIC_PROTOCOLS = {"_replace", "_asdict", "_fields", "_make", "_ipython_display_",
                    "_exit"}     # os._exit: the standard way out of a forked child


def is_public_protocol(name: str) -> bool:
    return name in PUBLIC_PROTOCOLS or (name.startswith("_repr_") and name.endswith("_"))


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def defined_private_names(tree) -> set:
    """Underscore names a module defines: functions, classes, attributes assigned, arguments."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return {n for n in names if n.startswith("_")}


def foreign_private_uses(path: Path) -> list:
    tree = ast.parse(path.read_text(), str(path))
    own = defined_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__") and node.attr not in own \
                and not is_public_protocol(node.attr):
            found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_uses_another_modules_underscore_names(path):
    assert foreign_private_uses(path) == []


def test_the_underscore_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from x import _hidden\n\ndef f(txn):\n    return txn._row_txn('t', 'r')\n")
    assert [use for _, use in foreign_private_uses(bad)] == [
        "from x import _hidden", "txn._row_txn"]


def long_functions(path: Path) -> list:
    tree = ast.parse(path.read_text(), str(path))
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_longer_than_40_lines(path):
    assert long_functions(path) == []


def code_lines(path: Path) -> int:
    """Lines of code: not blank, not comments, not docstrings."""
    tree = ast.parse(path.read_text())
    doc_lines = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(path.read_text().splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in doc_lines)


def test_core_protocol_is_at_most_1000_code_lines():
    sizes = {name: code_lines(PACKAGE / name) for name in CORE}
    print(sizes, sum(sizes.values()))
    assert sum(sizes.values()) <= MAX_CORE_LINES, sizes


def paper_table_names(text=None) -> list:
    """``(module, dotted name)`` pairs from the README's paper-to-code table.

    In the last column, a backticked ``x.py`` names the module of the names
    after it; ``A.b/c`` means ``A.b`` and ``A.c``.
    """
    text = text if text is not None else (ROOT / "README.md").read_text()
    table = text[text.index("## From the paper to the code"):]
    table = table[:table.index("\n## ", 5)]
    pairs = []
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) < 4:
            continue
        module = None
        for token in re.findall(r"`([^`]+)`", cells[-2]):
            if token.endswith(".py"):
                module = token[:-3].replace("/", ".")
            elif module and re.fullmatch(r"[A-Za-z_]\w*(\.\w+)?(/\w+)*", token):
                head, _, rest = token.partition("/")
                prefix = head.rsplit(".", 1)[0] + "." if "." in head else ""
                pairs += [(module, head)] + [(module, prefix + name) for name in rest.split("/") if name]
    return pairs


def missing_names(pairs) -> list:
    missing = []
    for module, dotted in pairs:
        obj = importlib.import_module(f"percolator_ref.{module}")
        source = Path(obj.__file__).read_text()
        for part in dotted.split("."):
            found = getattr(obj, part, None)
            if found is None and f"self.{part} =" not in source:      # an instance attribute
                missing.append(f"{module}.py: {dotted}")
            obj = found
            if obj is None:
                break
    return missing


def test_readme_paper_table_names_functions_that_exist():
    pairs = paper_table_names()
    assert len(pairs) >= 20, pairs
    assert missing_names(pairs) == []


def test_the_readme_table_check_can_fail():
    text = ("## From the paper to the code\n| a | b | c |\n| --- | --- | --- |\n"
            "| §2.2 | x | `transaction.py`: `Transaction.get/_commit_primary`, `prewrite_all` |\n\n## End\n")
    pairs = paper_table_names(text)
    assert pairs == [("transaction", "Transaction.get"), ("transaction", "Transaction._commit_primary"),
                     ("transaction", "prewrite_all")]
    assert missing_names(pairs) == ["transaction.py: Transaction._commit_primary",
                                    "transaction.py: prewrite_all"]


# ---------------------------------------------------------------------------
# The house's shape (issue 18): the top floor is the paper, no import cycles,
# no import that runs back up
# ---------------------------------------------------------------------------

MAX_TOP_FLOOR_LINES = 1000

# Lowest layer first: a module may import modules of its own layer and of the layers
# below, never above. A module's layer is the entry naming its longest dotted prefix.
LAYERS = [
    ["errors", "checks", "model", "step", "services"],                 # vocabulary, services
    ["trace", "interceptors", "stores", "bigtable", "rows", "faults"],   # Bigtable (stores/:
    ["session", "cleanup", "transaction", "variants"],                 # URLs, raw operations)
    ["observers", "stores.backend", "stores.redis_store", "stores.redis_services",
     "stores.redis_codec", "checking"],                                # around the protocol
    ["cluster", ""],                                   # the wiring and the package itself
    ["workloads", "viz", "bench", "sim", "harness"],                   # what runs on it
    ["grading"],
    ["commands", "cli", "__main__"],                                   # the command line
]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``percolator_ref/stores/raw.py`` -> ``"stores.raw"``; a package's ``__init__`` -> its name."""
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: Path = PACKAGE) -> dict:
    """``{module: {module it imports, ...}}`` within ``package``, every import statement
    (module level or inside a function). Importing ``a.b.c`` also runs the packages ``a``
    and ``a.b``, except those the importing module is in (they are running already)."""
    paths = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(p, package): p for p in paths}
    graph = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        own = name.split(".") if name else []
        running = {".".join(own[:i]) for i in range(len(own) + 1)}     # "" = the top package
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in imported_modules(node, name, is_package, package.name, modules):
                parts = target.split(".") if target else []
                targets.add(target)
                targets.update(".".join(parts[:i]) for i in range(1, len(parts))
                               if ".".join(parts[:i]) not in running)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def imported_modules(node, name: str, is_package: bool, top: str, modules) -> list:
    """The package-relative modules one import statement loads ("" = the package itself)."""
    if isinstance(node, ast.Import):
        return [a.name[len(top) + 1:] if a.name != top else "" for a in node.names
                if a.name == top or a.name.startswith(top + ".")]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        here = name.split(".") if name else []
        base = here if is_package else here[:-1]
        base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
        base = ".".join(base + ([node.module] if node.module else []))
    elif node.module == top or (node.module or "").startswith(top + "."):
        base = node.module[len(top) + 1:] if node.module != top else ""
    else:
        return []
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}" if base else alias.name
        found.append(sub if sub in modules else base)
    return found


def cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (sorted lists)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer(module: str) -> int:
    best, level = -1, None
    for i, names in enumerate(LAYERS):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".") or prefix == "") \
                    and len(prefix) > best:
                best, level = len(prefix), i
    return level


def upward_imports(graph: dict) -> list:
    """``(module, imported)`` pairs where a lower layer imports a higher one."""
    return sorted((m, t) for m, targets in graph.items() for t in targets
                  if layer(t) > layer(m))


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_no_import_runs_back_up():
    assert upward_imports(import_graph()) == []


def test_every_module_has_a_layer():
    assert all(layer(m) is not None for m in import_graph())


def test_the_import_checks_can_fail(tmp_path):
    package = tmp_path / "pkg"
    (package / "stores").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("def f():\n    from .checks import x\n")
    (package / "checks.py").write_text("from .model import Cell\n")
    (package / "stores" / "__init__.py").write_text("from ..harness import server\n")
    (package / "harness").mkdir()
    (package / "harness" / "__init__.py").write_text("")
    (package / "harness" / "server.py").write_text("import pkg.stores.raw\n")
    (package / "stores" / "raw.py").write_text("from pkg import model\n")
    graph = import_graph(package)
    assert graph["harness.server"] == {"stores", "stores.raw"}
    assert graph["stores.raw"] == {"model"}
    assert cycles(graph) == [["checks", "model"], ["harness.server", "stores"]]
    assert ("stores", "harness") in upward_imports(graph)


def top_floor_lines(package: Path = PACKAGE) -> dict:
    return {p.name: code_lines(p) for p in sorted(package.glob("*.py"))}


def test_the_top_floor_is_at_most_1000_code_lines():
    sizes = top_floor_lines()
    print(sizes, sum(sizes.values()))
    assert sum(sizes.values()) <= MAX_TOP_FLOOR_LINES, sizes


def test_the_top_floor_count_can_fail(tmp_path):
    (tmp_path / "a.py").write_text('"""doc\nstring"""\n# comment\n\nx = 1\n' + "y = 2\n" * 1000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("z = 3\n" * 50)          # not on the top floor
    assert top_floor_lines(tmp_path) == {"a.py": 1001}
    assert sum(top_floor_lines(tmp_path).values()) > MAX_TOP_FLOOR_LINES
