"""The student edition (``make release``, ``release/build.py``): no answers in it, and it runs.

The folder and the zip are built here, in a temporary directory; the browser site is
the one ``make release`` builds in ``build/release/site`` (under ``make test``, the first
test that needs it builds it: ``tests/site_build.py``).

*Readable* means: more than half of a reference's distinctive lines are lines of one file
of the edition (a text file, in the folder, in the zip, in the site, or inside a
wheel or zip there), or in one notebook's cells. A reference is each step an
exercise's grader hides (a function, or a class with its methods) and each reference
module whole; its distinctive lines are the code lines of its functions (docstrings
and comments left out: the bytecode keeps docstrings as documentation), stripped, of
at least 16 characters, each counted once. A file's lines end at line breaks and at
escaped ones (``\\n`` in a JSON or JavaScript string), and are stripped too.

In the repository itself: the READMEs print no reference, and no exercise cell imports a
step its grader hides.
"""
import ast
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
import zipfile
from pathlib import Path

import pytest

from site_build import require_built

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "release" / "site"
MIN_CHARS = 16
MIN_LINES = 3              # a step with fewer distinctive lines is judged with its module
# A line ends at a line break, or at an escaped one ("\\n" in a JSON or JavaScript string).
LINE_BREAK = re.compile(r"\r?\n|\\n")


def load_builder():
    spec = importlib.util.spec_from_file_location("release_build", ROOT / "release" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = load_builder()


# -- what a reference's source looks like --------------------------------------------------

def code_lines(source: str, nodes) -> list:
    """The stripped code lines of the functions in ``nodes`` (docstrings, comments out)."""
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.start[1]
    lines, found = source.splitlines(), []
    for node in nodes:
        for fn in [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef,
                                                                  ast.AsyncFunctionDef))]:
            body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
            for stmt in body:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    continue
                for number in range(stmt.lineno, stmt.end_lineno + 1):
                    line = lines[number - 1][:comments.get(number)].strip()
                    if len(line) >= MIN_CHARS and line not in found:
                        found.append(line)
    return found


def find(tree: ast.Module, qualname: str):
    node = tree
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    return node


def references() -> dict:
    """``{name: distinctive lines}``: each hidden step, each reference module whole."""
    refs = {}
    for module in build.reference_modules():
        source = build.module_path(ROOT, module).read_text()
        refs[module] = code_lines(source, [ast.parse(source)])
    for module, qualname in build.hidden_targets():
        source = build.module_path(ROOT, module).read_text()
        lines = code_lines(source, [find(ast.parse(source), qualname)])
        if len(lines) >= MIN_LINES:
            refs[f"{module}:{qualname}"] = lines
    return refs


REFERENCES = references()


# -- where an edition could hold them -------------------------------------------------------

def texts(name: str, data: bytes):
    """``(name, text)`` of a file and of every member of it that is a zip (a wheel, a
    zip), recursively; a notebook's cells are read as their own text too."""
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield from texts(f"{name}!{info.filename}", z.read(info))
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:           # not text: bytecode, wasm, images
        return
    yield name, text
    if name.endswith(".ipynb") or name.endswith(".json"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return
        yield f"{name} (its strings)", "\n".join(strings(parsed))


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            yield "".join(value)          # a notebook cell's source, line by line
        else:
            for v in value:
                yield from strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)


def walk(path: Path):
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        yield from texts(str(f), f.read_bytes())


def readable(path: Path) -> dict:
    """``{reference: (file, lines of it found there, of how many)}`` for each reference
    readable in ``path`` (a folder or a file)."""
    found = {}
    for name, text in walk(path):
        present = set(map(str.strip, LINE_BREAK.split(text)))
        for ref, lines in REFERENCES.items():
            hits = sum(line in present for line in lines)
            if hits * 2 > len(lines) and hits > found.get(ref, (None, 0))[1]:
                found[ref] = (name, hits, len(lines))
    return found


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    folder = build.build_folder(out / build.NAME)
    return folder, build.build_zip(folder, out / f"{build.NAME}.zip")


# -- the tests -------------------------------------------------------------------------------

def test_the_references_are_every_hidden_step_and_exercise_7s_aggregation():
    modules = build.reference_modules()
    for module in ("percolator_ref.transaction", "percolator_ref.cleanup",
                   "percolator_ref.services.oracle", "percolator_ref.observers.notifications",
                   "percolator_ref.variants.rollback_records",
                   "percolator_ref.variants.async_commit",
                   "percolator_ref.workloads.tpce.transactions", "percolator_ref.grading.demos"):
        assert module in modules
        assert len(REFERENCES[module]) >= 2, module
    assert "percolator_ref.transaction:snapshot_read" in REFERENCES
    assert "percolator_ref.services.oracle:TimestampOracle" in REFERENCES


def test_the_check_finds_a_reference_in_source_and_in_a_wheel_inside_a_zip(tmp_path):
    """The leak check can fail: the repository's own package is readable to it, also as a
    wheel inside a zip."""
    assert set(readable(ROOT / "percolator_ref")) == set(REFERENCES)
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(ROOT / "percolator_ref" / "transaction.py", "percolator_ref/transaction.py")
    with zipfile.ZipFile(tmp_path / "outer.zip", "w") as z:
        z.writestr("site/kit-0.1-py3-none-any.whl", wheel.getvalue())
    found = readable(tmp_path / "outer.zip")
    assert "percolator_ref.transaction:snapshot_read" in found
    assert "percolator_ref.transaction:Transaction.prewrite" in found


def test_no_reference_is_readable_in_the_folder_or_the_zip(edition):
    folder, archive = edition
    assert readable(folder) == {}
    assert readable(archive) == {}


def test_the_edition_holds_what_students_need_and_no_instructor_file(edition):
    folder, archive = edition
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    exercises = sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb"))
    assert {f"exercises/{n}" for n in exercises} <= names
    assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb")} <= names
    assert {"README.md", "Makefile", "pyproject.toml", "requirements.txt"} <= names
    assert not [n for n in names if n.split("/")[0] in ("solutions", "tests", "docs", "lite")
                or n == "exercises/README.md" or "__pycache__" in n]
    for module in build.reference_modules():
        stem = module.replace(".", "/")
        assert f"{stem}.pyc" in names and f"{stem}.py" not in names, module
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(f"{build.NAME}/{n}" for n in names)


EX01 = "exercises/01_snapshot_read.ipynb"
RUN_EX01 = r'''
import inspect, json, sys
edition, answer = sys.argv[1], sys.argv[2]
sys.path.insert(0, edition)
import percolator_ref, percolator_ref.transaction
from percolator_ref.transaction import Transaction
assert percolator_ref.__file__.startswith(edition), percolator_ref.__file__
assert percolator_ref.transaction.__file__.endswith("transaction.pyc")
try:
    inspect.getsource(Transaction.snapshot_read)
except (OSError, TypeError):
    pass
else:
    raise SystemExit("the reference's source is readable")
cells = json.load(open(edition + "/exercises/01_snapshot_read.ipynb"))["cells"]
namespace = {"__name__": "__main__"}
for cell in cells:
    if cell["cell_type"] != "code":
        continue
    source = "".join(cell["source"])
    if "raise NotImplementedError" in source and answer != "-":
        source = open(answer).read()
    exec(compile(source, cell["id"], "exec"), namespace)
print("EXERCISE-01-PASSED")
'''


def run_ex01(folder: Path, answer: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Every code cell of the edition's exercise 01 in a fresh interpreter with the edition's
    package first on sys.path, the repository's source nowhere on it; ``answer``: a file with
    the answer cell's code, or "-" for the stub."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    return subprocess.run([sys.executable, "-I", "-B", "-c", RUN_EX01, str(folder), answer],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def solution_answer_cell() -> str:
    exercise = json.loads((ROOT / EX01).read_text())["cells"]
    stub = next(c["id"] for c in exercise if "raise NotImplementedError" in "".join(c["source"]))
    solution = json.loads((ROOT / "solutions" / "01_snapshot_read.ipynb").read_text())["cells"]
    return "".join(next(c for c in solution if c["id"] == stub)["source"])


@pytest.mark.slow
def test_exercise_01_passes_with_the_solution_and_fails_unsolved_inside_the_edition(
        edition, tmp_path):
    folder, _ = edition
    answer = tmp_path / "answer.py"
    answer.write_text(solution_answer_cell())
    solved = run_ex01(folder, str(answer), tmp_path)
    assert solved.returncode == 0, solved.stderr[-3000:]
    assert "EXERCISE-01-PASSED" in solved.stdout and "17/17 checks passed" in solved.stdout
    unsolved = run_ex01(folder, "-", tmp_path)
    assert unsolved.returncode != 0 and "EXERCISE-01-PASSED" not in unsolved.stdout
    assert "NotImplementedError" in unsolved.stdout + unsolved.stderr, unsolved.stderr[-3000:]


def require_site() -> None:
    """build/release/site, built once per run under make test (site_build)."""
    require_built("release")


@pytest.mark.slow
def test_no_reference_is_readable_in_the_site():
    require_site()
    assert readable(SITE) == {}


PYODIDE_RUN = r"""
import { pathToFileURL } from "node:url";
const [dir, code] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(dir + "/pyodide.mjs").href);
const pyodide = await loadPyodide({ indexURL: dir + "/" });
await pyodide.loadPackage(["percolator-ref"], { messageCallback: () => {} });
console.log(pyodide.runPython(code));
"""
RUN_IN_PYODIDE = """
import importlib, inspect, json, platform
modules = %r
files = {m: importlib.import_module(m).__file__ for m in modules}
from percolator_ref import Cluster, ManualClock
from percolator_ref.transaction import Transaction
try:
    inspect.getsource(Transaction.snapshot_read)
    source = "readable"
except (OSError, TypeError):
    source = "absent"
cluster = Cluster(first_timestamp=5, clock=ManualClock())
t = cluster.begin(); t.set("Bob", "bal", 10); t.set("Joe", "bal", 2); assert t.commit()
t = cluster.begin(); t.set("Bob", "bal", 3); t.set("Joe", "bal", 9); assert t.commit()
r = cluster.begin()
json.dumps({"python": platform.python_version(), "files": files, "source": source,
            "balances": [r.get("Bob", "bal"), r.get("Joe", "bal")]})
"""


@pytest.mark.slow
def test_the_sites_kit_runs_the_references_as_bytecode_in_pyodide(tmp_path):
    """The site's own Pyodide (under Node) loads the kit's wheel from the site, imports every
    reference module from its .pyc (no .py in the wheel), and runs Figure 4's transfer."""
    require_site()
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run the site's Pyodide")
    pyodide = SITE / "static" / "pyodide"
    with zipfile.ZipFile(next(pyodide.glob("percolator_ref-*.whl"))) as z:
        names = set(z.namelist())
    modules = build.reference_modules()
    assert not [m for m in modules if f"{m.replace('.', '/')}.py" in names]
    script = tmp_path / "run.mjs"
    script.write_text(PYODIDE_RUN)
    done = subprocess.run([node, str(script), str(pyodide), RUN_IN_PYODIDE % (modules,)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    from jupyterlite_pyodide_kernel.constants import PYODIDE_PYTHON_VERSION
    assert ran["python"].startswith(PYODIDE_PYTHON_VERSION + "."), ran
    assert all(f.endswith(".pyc") for f in ran["files"].values()), ran
    assert ran["source"] == "absent" and ran["balances"] == [3, 9], ran
    listed = {p.relative_to(SITE / "files").as_posix() for p in (SITE / "files").rglob("*")
              if p.is_file()}
    assert "exercises/01_snapshot_read.ipynb" in listed and "exercises/README.md" not in listed


def test_the_readmes_print_no_reference():
    """The README once printed exercise 9's graded ``rollback_writes`` whole, as its example of
    a variant; its example is now a variant no exercise grades."""
    for page in ("README.md", "exercises/README.md", "release/README.md"):
        assert readable(ROOT / page) == {}, page


def hidden_functions(n: int) -> dict:
    """``{name: module}`` of the module-level functions exercise ``n`` hides."""
    from percolator_ref import grading
    found = {}
    for target in grading.exercise(n).exercise.hidden:
        module, _, qualname = target.partition(":")
        if "." not in qualname:
            obj = getattr(importlib.import_module(module), qualname)
            if not isinstance(obj, type):
                found[qualname] = module
    return found


@pytest.mark.parametrize("n", range(1, 11))
def test_no_exercise_cell_imports_a_reference_step_it_hides(n):
    """Exercise 01's demo imported the reference ``snapshot_read``; no cell of an exercise
    imports a function its grader hides (a base class such as ``Transaction`` is no step)."""
    hidden = hidden_functions(n)
    notebook = next((ROOT / "exercises").glob(f"{n:02d}_*.ipynb"))
    imported = [(cell["id"], alias.name)
                for cell in json.loads(notebook.read_text())["cells"] if cell["cell_type"] == "code"
                for node in ast.walk(ast.parse("".join(cell["source"])))
                if isinstance(node, ast.ImportFrom)
                for alias in node.names if alias.name in hidden]
    assert imported == []
