"""Build the kit as a static JupyterLite site in build/lite/ (``make lite``).

Run with the kit's venv Python (it has jupyterlite-core and
jupyterlite-pyodide-kernel, pinned in requirements.txt). What it does:

1. Pyodide from the npm package ``pyodide`` at exactly the version the
   pyodide kernel was built for (``jupyterlite_pyodide_kernel.constants``);
   the npm package holds the interpreter and the standard library only.
2. The pure-Python wheels that the kernel, the kit and the widgets need at
   start-up, downloaded from PyPI at the versions of Pyodide's own
   ``pyodide-lock.json`` (micropip, packaging, ipython and friends), plus the
   kit's own wheel and ``lite/requirements-browser.txt``. They are served
   from ``static/pyodide/`` and the lock file is rewritten to point at them
   (with their sha256). Packages with compiled code (pandas, numpy,
   matplotlib, ...) keep an absolute URL to Pyodide's CDN: a notebook that
   imports them fetches them there at run time, as Pyodide always does.
3. ``jupyter lite build`` with the exercises and notebooks as contents and
   the federated extensions of this environment (the ipywidgets manager and
   the pyodide kernel).

Nothing but the package registries (PyPI, npm) is contacted. Downloads are
cached in build/lite-cache/, so a rebuild is offline.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from jupyterlite_pyodide_kernel import constants as kernel_constants

ROOT = Path(__file__).resolve().parent.parent
LITE = ROOT / "lite"
PYODIDE_VERSION = kernel_constants.PYODIDE_VERSION
PYODIDE_CDN = kernel_constants.PYODIDE_CDN_URL          # the kernel's own default
PYODIDE_PYTHON = kernel_constants.PYODIDE_PYTHON_VERSION
# What the kernel installs at start (see the kernel's worker: micropip, then
# ipykernel, comm, pyodide-kernel, jedi, ipython) and what the kit imports.
LOCAL_FROM_LOCK = ["micropip", "packaging", "ipython", "jedi", "traitlets",
                   "sortedcontainers", "tqdm", "typing-extensions"]
CONTENT_DIRS = ["exercises", "notebooks"]


def run(*cmd, cwd=None) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=cwd)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_pyodide(cache: Path, dest: Path) -> None:
    """npm's ``pyodide`` package at the kernel's Pyodide version, unpacked into ``dest``."""
    tarball = cache / f"pyodide-{PYODIDE_VERSION}.tgz"
    if not tarball.exists():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("make lite needs npm (Debian: apt-get install npm); .ci/run installs it")
        run(npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", cache,
            "--silent")
    with tarfile.open(tarball) as tar:
        tar.extractall(cache / "npm", filter="data")
    shutil.copytree(cache / "npm" / "package", dest, dirs_exist_ok=True)


def pip_download(specs: list, dest: Path) -> list:
    """Pure-Python wheels for Pyodide's Python, no dependencies resolved."""
    dest.mkdir(parents=True, exist_ok=True)
    run(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--python-version", PYODIDE_PYTHON, "--implementation", "py", "--abi", "none",
        "--platform", "any", "-d", dest, *specs)
    return specs


def wheel_for(folder: Path, name: str, version: str) -> Path:
    stem = name.replace("-", "_").lower()
    found = [p for p in folder.glob("*.whl")
             if p.name.lower().startswith(f"{stem}-{version}-")]
    if len(found) != 1:
        raise SystemExit(f"expected one wheel of {name}=={version} in {folder}, found {found}")
    return found[0]


def normalise(name: str) -> str:
    """PEP 503: the lock file's keys; its ``depends`` lists are not always normalised."""
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(packages: dict, roots: list) -> list:
    """``roots`` and everything they depend on, by the lock file's ``depends``."""
    seen, todo = [], list(roots)
    while todo:
        name = normalise(todo.pop())
        if name not in seen:
            seen.append(name)
            todo.extend(packages[name]["depends"])
    return sorted(seen)


def browser_pins() -> list:
    lines = (LITE / "requirements-browser.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def build_kit_wheel(dest: Path, source: Path = ROOT) -> Path:
    for old in dest.glob("percolator_ref-*.whl"):
        old.unlink()
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
        "-w", dest, source)
    return next(dest.glob("percolator_ref-*.whl"))


def entry(wheel: Path, name: str, version: str, imports: list, depends: list) -> dict:
    return {"name": name, "version": version, "file_name": wheel.name, "install_dir": "site",
            "sha256": sha256(wheel), "package_type": "package", "imports": imports,
            "depends": depends, "unvendored_tests": False, "shared_library": False}


def extra_entries(wheels: Path, kit: Path, pins: dict) -> dict:
    """Lock entries for the wheels Pyodide does not ship: the kit, widgets, greenlet, and the
    kernel's own (piplite, pyodide-kernel, its ipykernel shim), so that all load at once."""
    kernel = {name: copy_kernel_wheel(name, wheels)
              for name in ("piplite", "pyodide_kernel", "ipykernel", "widgetsnbextension-4")}
    kit_version = kit.name.split("-")[1]
    return {
        "percolator-ref": entry(kit, "percolator-ref", kit_version, ["percolator_ref"],
                                ["sortedcontainers", "tqdm", "greenlet-pyodide"]),
        "greenlet-pyodide": entry(wheel_for(wheels, "greenlet_pyodide", pins["greenlet-pyodide"]),
                                  "greenlet-pyodide", pins["greenlet-pyodide"], ["greenlet"], []),
        "comm": entry(wheel_for(wheels, "comm", pins["comm"]), "comm", pins["comm"],
                      ["comm"], ["traitlets"]),
        "jupyterlab-widgets": entry(wheel_for(wheels, "jupyterlab_widgets",
                                              pins["jupyterlab-widgets"]),
                                    "jupyterlab-widgets", pins["jupyterlab-widgets"],
                                    ["jupyterlab_widgets"], []),
        "widgetsnbextension": kernel_entry(kernel["widgetsnbextension-4"], []),
        "ipywidgets": entry(wheel_for(wheels, "ipywidgets", pins["ipywidgets"]), "ipywidgets",
                            pins["ipywidgets"], ["ipywidgets"],
                            ["comm", "ipython", "traitlets", "jupyterlab-widgets",
                             "widgetsnbextension"]),
        "piplite": kernel_entry(kernel["piplite"], ["micropip"]),
        "pyodide-kernel": kernel_entry(kernel["pyodide_kernel"], ["comm", "ipython"]),
        "ipykernel": kernel_entry(kernel["ipykernel"], ["pyodide-kernel"]),
    }


def kernel_entry(wheel: Path, depends: list) -> dict:
    name, version = wheel.name.split("-")[:2]
    return entry(wheel, name.replace("_", "-"), version, [name], depends)


def copy_kernel_wheel(prefix: str, wheels: Path) -> Path:
    """One of the pyodide kernel's own wheels (shipped in its lab extension), copied to ``wheels``."""
    share = Path(sys.prefix) / "share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension"
    found = sorted((share / "static/pypi").glob(f"{prefix}*.whl"))
    if len(found) != 1:
        raise SystemExit(f"expected one {prefix}*.whl in the pyodide kernel's extension, found {found}")
    shutil.copy(found[0], wheels / found[0].name)
    return wheels / found[0].name


def assemble_pyodide(cache: Path, src: Path, source: Path = ROOT) -> None:
    """static/pyodide: npm's Pyodide, local pure-Python wheels, a lock file pointing at them."""
    pyodide = src / "static" / "pyodide"
    fetch_pyodide(cache, pyodide)
    lock_path = pyodide / "pyodide-lock.json"
    lock = json.loads(lock_path.read_text())
    packages = lock["packages"]
    local = closure(packages, LOCAL_FROM_LOCK)
    wheels = cache / "wheels"
    pip_download([f"{name}=={packages[name]['version']}" for name in local], wheels)
    pins = dict(p.split("==") for p in browser_pins())
    pip_download(browser_pins(), wheels)
    kit = build_kit_wheel(cache / ("kit" if source == ROOT else "release-kit"), source)
    for name, spec in packages.items():
        if name in local:
            wheel = wheel_for(wheels, name.replace("-", "_"), spec["version"])
            spec.update(file_name=wheel.name, sha256=sha256(wheel))
            shutil.copy(wheel, pyodide / wheel.name)
        else:
            spec["file_name"] = f"{PYODIDE_CDN}/{spec['file_name']}"
    extra = extra_entries(wheels, kit, pins)
    for name, spec in extra.items():
        shutil.copy(wheels / spec["file_name"] if name != "percolator-ref" else kit, pyodide)
        packages[name] = spec
    lock_path.write_text(json.dumps(lock, indent=1, sort_keys=True))
    print(f"pyodide {PYODIDE_VERSION}: {len(local)} lock packages served locally, "
          f"{len(packages) - len(local) - len(extra)} from Pyodide's CDN on demand")


def assemble_contents(src: Path, source: Path = ROOT) -> Path:
    contents = src / "contents"
    for folder in CONTENT_DIRS:
        shutil.copytree(source / folder, contents / folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return contents


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "build" / "lite")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "lite-cache")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="the tree whose package and exercises/notebooks the site holds "
                             "(make release: the student edition)")
    parser.add_argument("--lite-dir", type=Path, help="work folder (default: CACHE/lite-dir)")
    args = parser.parse_args(argv)
    src = args.lite_dir or args.cache_dir / "lite-dir"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(args.output_dir, ignore_errors=True)
    src.mkdir(parents=True)
    shutil.copy(LITE / "jupyter-lite.json", src / "jupyter-lite.json")
    assemble_pyodide(args.cache_dir, src, args.source.resolve())
    contents = assemble_contents(src, args.source.resolve())
    run(Path(sys.executable).parent / "jupyter", "lite", "build", "--lite-dir", src,
        "--contents", contents, "--output-dir", args.output_dir.resolve(), cwd=src)
    print(f"built {args.output_dir}: serve it with make serve-lite "
          f"(python lite/serve.py --directory {args.output_dir})")


if __name__ == "__main__":
    main()
