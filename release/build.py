"""Build the student edition in build/release/ (``make release``).

The edition is what a class gets: the exercises, the notebooks, the package and
a README for students (``release/README.md``), never ``solutions/``, ``tests/``
(the wrong-answer catalogue), ``docs/`` or ``exercises/README.md`` (the
instructor pages). Three forms of it:

- ``build/release/percolator-kit-student/``: the folder (``make lab`` in it);
- ``build/release/percolator-kit-student.zip``: that folder, zipped;
- ``build/release/site/``: the browser site (JupyterLite) built from it.

No graded reference ships as source. The *reference modules*
(:func:`reference_modules`) are every module that defines a step some exercise's
grader hides while grading (``Exercise.hidden``), exercise 7's aggregation
(``workloads/tpce/transactions.py``: nothing is hidden for exercise 7, the
package has no reference of it, but that module is a near-twin), the wrong
reader exercise 1's demo runs (``grading/demos.py``), and the modules that hold
most of a graded step under another name (:data:`EXTRA_REFERENCE_MODULES`). Each ships as sourceless
bytecode compiled for the interpreter that runs it: this Python (the edition's
``pyproject.toml`` requires its minor version) in the folder and the zip,
Pyodide's Python (compiled by Pyodide itself under Node) in the site's wheel.
The code objects are named ``<frozen MODULE>``: a traceback names the module
and line, linecache looks for no file, and the grader's feedback counts those
frames as the library's (as it counts the standard library's frozen modules).

This keeps a student from reading or copying the reference; it does not stop
one who disassembles bytecode (``dis``), and grading never depends on it (the
grader hides the reference while grading, with or without its source).
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "release"
NAME = "percolator-kit-student"
PACKAGE = "percolator_ref"
# Not where a grader-hidden step is defined, shipped as bytecode all the same: each holds
# most of a graded answer (tests/test_release.py finds them readable otherwise).
EXTRA_REFERENCE_MODULES = (
    "percolator_ref.workloads.tpce.transactions",   # exercise 7's side table and aggregation
    "percolator_ref.grading.demos",                 # exercise 1's demo reader, right but once
    "percolator_ref.grading.client.ex09_rollback_records",  # LatePrimary: exercise 3's commit, reordered
    "percolator_ref.variants.lock_ttl",             # settle(): exercise 4's roll forward or back
)
# Copied as they are (besides the package): folder -> the files of it that ship.
CONTENT = {"exercises": "*.ipynb", "notebooks": "**/*", "jupyter": "**/*"}
TEMPLATES = {"release/README.md": "README.md", "release/Makefile": "Makefile"}   # @PY_VERSION@
# requirements.txt without what only the kit's own tests and site build use.
NOT_FOR_STUDENTS = ("playwright", "jupyterlite-core", "jupyterlite-pyodide-kernel", "pytest-xdist",
                    "hypothesis")
SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints"}
ZIP_DATE = (2026, 1, 1, 0, 0, 0)          # fixed: the same tree zips to the same bytes


def hidden_targets() -> list:
    """``(module, qualname)`` of every step some exercise hides while grading, ``module``
    being where the step is defined (``percolator_ref.observers:run_observer`` is defined in
    ``percolator_ref.observers.notifications``)."""
    from percolator_ref import grading
    found = []
    for n in sorted(grading.MODULES):
        for target in grading.exercise(n).exercise.hidden:
            module_name, _, qualname = target.partition(":")
            obj = importlib.import_module(module_name)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            # unwrapped: a grader may wrap a step at run time (exercise 4's plugged reader),
            # and the list must not depend on what ran before in this process
            defined = inspect.unwrap(obj).__module__
            if (defined, qualname) not in found:
                found.append((defined, qualname))
    return found


def reference_modules() -> list:
    """The modules that ship as bytecode only: see the module doc."""
    return sorted({module for module, _ in hidden_targets()} | set(EXTRA_REFERENCE_MODULES))


def module_path(root: Path, module: str) -> Path:
    """``root/percolator_ref/x/y.py`` of ``percolator_ref.x.y`` (a package: its __init__.py)."""
    path = root.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def shown_name(module: str) -> str:
    return f"<frozen {module}>"


def pyproject(python=None) -> str:
    """The repository's pyproject.toml for the edition: the bytecode shipped as package data,
    and the minor version ``python`` ("3.11") required if given (not for the site's wheel,
    which this Python builds and Pyodide's loads without asking)."""
    text = (ROOT / "pyproject.toml").read_text()
    text, n = re.subn(r'(?m)^requires-python = ".*"$',
                      f'requires-python = "=={python}.*"' if python else r"\g<0>", text)
    if n != 1:
        raise SystemExit("pyproject.toml: expected one requires-python line")
    text, n = re.subn(r"(?ms)^\[tool\.pytest\.ini_options\].*?(?=^\[|\Z)", "", text)
    return text.rstrip() + ('\n\n[tool.setuptools.package-data]\n'
                            '"*" = ["*.pyc"]    # the reference modules: bytecode only\n')


def shipped(folder: Path, pattern: str) -> list:
    return sorted(p for p in folder.glob(pattern)
                  if p.is_file() and not SKIP_PARTS & set(p.relative_to(folder).parts))


def python_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def requirements() -> str:
    lines = (ROOT / "requirements.txt").read_text().splitlines(keepends=True)
    return "".join(line for line in lines
                   if re.split(r"[=<>~ ]", line.strip())[0].lower() not in NOT_FOR_STUDENTS)


def copy_tree(out: Path) -> None:
    """The edition's files, every module still as source."""
    for folder, pattern in CONTENT.items():
        for path in shipped(ROOT / folder, pattern):
            target = out / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    for path in shipped(ROOT / PACKAGE, "**/*"):
        if path.suffix != ".pyc":
            target = out / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    for source, name in TEMPLATES.items():
        (out / name).write_text((ROOT / source).read_text().replace("@PY_VERSION@",
                                                                     python_version()))
    (out / "requirements.txt").write_text(requirements())


def compile_here(out: Path, modules: list) -> None:
    """Replace each module's source in ``out`` by bytecode for this Python."""
    for module in modules:
        source = module_path(out, module)
        py_compile.compile(str(source), cfile=str(source.with_suffix(".pyc")),
                           dfile=shown_name(module), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        source.unlink()


def compile_pyodide(out: Path, modules: list, pyodide: Path) -> str:
    """Replace each module's source in ``out`` by bytecode compiled by Pyodide (under Node);
    return Pyodide's Python version ("3.14")."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("make release needs node (Debian: apt-get install nodejs) for the site")
    if not (pyodide / "pyodide.mjs").exists():
        raise SystemExit(f"no Pyodide in {pyodide}: run make lite first")
    job = [(str(module_path(out, m).resolve()), str(module_path(out, m).with_suffix(".pyc")
                                                    .resolve()), shown_name(m)) for m in modules]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        done = subprocess.run([node, str(RELEASE / "compile_pyodide.mjs"), str(pyodide), f.name],
                              check=True, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    for source, _, _ in job:
        os.unlink(source)
    return ".".join(done.stdout.strip().splitlines()[-1].split(".")[:2])


def check_imports(folder: Path, modules: list) -> None:
    """Every reference module imports from ``folder``, as bytecode, in a fresh interpreter."""
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    m = importlib.import_module(name)\n"
            "    assert m.__file__.endswith('.pyc'), m.__file__\n")
    subprocess.run([sys.executable, "-I", "-B", "-c", f"import sys; sys.path.insert(0, {str(folder)!r})\n"
                    + code], check=True, cwd=tempfile.gettempdir())


def build_folder(out: Path) -> Path:
    """The edition's folder, run by this Python (see the module doc)."""
    out = out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    copy_tree(out)
    (out / "pyproject.toml").write_text(pyproject(python_version()))
    modules = reference_modules()
    compile_here(out, modules)
    check_imports(out, modules)
    return out


def build_zip(folder: Path, target: Path) -> Path:
    """``folder`` zipped under its own name, in a fixed order with fixed dates."""
    target.unlink(missing_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{folder.name}/{path.relative_to(folder).as_posix()}", ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, path.read_bytes())
    return target


def build_site(folder: Path, output: Path, cache: Path) -> Path:
    """The browser site of the edition: ``lite/build.py`` over a copy of ``folder`` whose
    reference modules are compiled by Pyodide (the kit's wheel is built from that copy)."""
    source = cache / "release-site-source"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(folder, source)
    modules = reference_modules()
    for module in modules:                       # back to source, for Pyodide to compile
        module_path(source, module).with_suffix(".pyc").unlink()
        shutil.copy2(module_path(ROOT, module), module_path(source, module))
    python = compile_pyodide(source, modules, cache / "npm" / "package")
    print(f"the site's reference modules: bytecode of Pyodide's Python {python}")
    (source / "pyproject.toml").write_text(pyproject())
    subprocess.run([sys.executable, str(ROOT / "lite" / "build.py"), "--source", str(source),
                    "--output-dir", str(output), "--cache-dir", str(cache),
                    "--lite-dir", str(cache / "release-lite-dir")], check=True)
    return output


def size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(
        p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "build" / "release")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "lite-cache",
                        help="make lite's cache (npm's Pyodide, the wheels)")
    parser.add_argument("--no-site", action="store_true", help="the folder and the zip only")
    args = parser.parse_args(argv)
    args.output_dir, args.cache_dir = args.output_dir.resolve(), args.cache_dir.resolve()
    folder = build_folder(args.output_dir / NAME)
    archive = build_zip(folder, args.output_dir / f"{NAME}.zip")
    print(f"{folder}: {size(folder) / 1e6:.1f} MB; {archive}: {size(archive) / 1e6:.1f} MB")
    print(f"as bytecode only: {', '.join(reference_modules())}")
    if not args.no_site:
        site = build_site(folder, args.output_dir / "site", args.cache_dir)
        print(f"{site}: {size(site) / 1e6:.1f} MB (serve it: python lite/serve.py "
              f"--directory {site})")


if __name__ == "__main__":
    main()
