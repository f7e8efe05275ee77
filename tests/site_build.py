"""The built sites some tests need, built when the first of them asks.

``make test`` does not build ``build/lite`` (``make lite``) or ``build/release``
(``make release``) before the unit tests start: the first test that needs one calls
:func:`require_built`, which builds it once per test run, while the other test
process goes on with unit tests. A file lock keeps the two test processes from building
at once, and a stamp holding the run's id (``PYTEST_XDIST_TESTRUNUID``, the same in
every process of one run) says whether this run built it already.

- ``PERCOLATOR_BUILD_SITES=1`` (``make test`` sets it): build what is asked for, once per
  run, and fail the test if the build fails;
- otherwise (a developer running one test file): use what is there, and skip the test
  where the site is missing; ``PERCOLATOR_REQUIRE_LITE=1`` /
  ``PERCOLATOR_REQUIRE_RELEASE=1`` make a missing site fail instead.
"""
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
SITES = {"lite": BUILD / "lite", "release": BUILD / "release" / "site"}
# What `make lite` and `make release` run (the Makefile's recipes, without make's
# dependency on the other site: `release` needs the lite cache, so lite comes first).
COMMANDS = {"lite": [sys.executable, "lite/build.py", "--output-dir", "build/lite"],
            "release": [sys.executable, "release/build.py", "--output-dir", "build/release"]}
REQUIRE = {"lite": "PERCOLATOR_REQUIRE_LITE", "release": "PERCOLATOR_REQUIRE_RELEASE"}
ORDER = {"lite": ("lite",), "release": ("lite", "release")}


def run_id() -> str:
    """The same string in every test process of one pytest run, different in the next."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"


def built(kind: str) -> bool:
    return (SITES[kind] / "jupyter-lite.json").exists()


def build_once(kind: str) -> None:
    """Build ``kind`` (and what it needs) unless this run did; raises with the build's log."""
    BUILD.mkdir(exist_ok=True)
    with open(BUILD / ".site-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)             # the other test process waits here
        for part in ORDER[kind]:
            stamp = BUILD / f".{part}-built-by"
            if built(part) and stamp.exists() and stamp.read_text() == run_id():
                continue
            log = BUILD / f"{part}-build.log"
            with open(log, "w") as out:
                done = subprocess.run(COMMANDS[part], cwd=ROOT, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if done.returncode != 0 or not built(part):
                tail = log.read_text()[-3000:]
                raise RuntimeError(f"building {part} failed (exit {done.returncode}): {tail}")
            stamp.write_text(run_id())


def require_built(kind: str) -> Path:
    """The built site ``kind`` ("lite" or "release"): built now if ``make test`` asked
    for builds; else skip (or fail, if required) where it is missing."""
    if kind not in SITES:
        raise ValueError(f"kind must be one of {sorted(SITES)}, not {kind!r}")
    if os.environ.get("PERCOLATOR_BUILD_SITES") == "1":
        try:
            build_once(kind)
        except RuntimeError as e:
            pytest.fail(str(e))
    if not built(kind):
        target = "make lite" if kind == "lite" else "make release"
        if os.environ.get(REQUIRE[kind]):
            pytest.fail(f"{SITES[kind]} is not built: run {target}")
        pytest.skip(f"{SITES[kind]} is not built ({target}; make test builds it)")
    return SITES[kind]


def require_lite() -> Path:
    """The JupyterLite site: ``PERCOLATOR_LITE_DIR`` as it is where that is set (it must
    hold a built site), else build/lite through :func:`require_built`."""
    given = os.environ.get("PERCOLATOR_LITE_DIR")
    if given is None:
        return require_built("lite")
    if not (Path(given) / "jupyter-lite.json").exists():
        pytest.fail(f"PERCOLATOR_LITE_DIR={given} holds no built site")
    return Path(given)
