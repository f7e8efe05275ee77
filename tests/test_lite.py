"""The static JupyterLite site (``make lite``) in headless Chromium, offline.

``build/lite`` is served from a loopback HTTP server in this process; Chromium
runs with every other address unreachable (a dead proxy and a resolver that
knows no host), and the test asserts that no request left the loopback. In
the browser, Pyodide runs the kit from the site's own wheels:

- exercise 01 with the solution's answer typed into its answer cell: run all
  cells, the self-check passes;
- notebook 02's stepper: ``Step`` three times shows the primary lock; the
  two-transfer stepper then steps a branch (``Back``, then the other
  transaction) and the table shows the new branch;
- notebook 07 (Redis, processes) stops at its first cell with a note;
- notebooks 01, 02, 05, 08 and 10 run all to their end, with no error output (one
  Chromium, one context and kernel per notebook);
- a stepper with parked scripts, then a garbage collection on a deep stack: the kernel
  lives on (before issue 28's fix Pyodide died of it, and so did notebook 05's Run All).

Without a browser: the site serves npm's Pyodide at the kernel's version, and
every wheel loaded at start is in the site with the lock file's sha256.

The site is built by ``make lite``; under ``make test`` the first test that needs it builds
it (``tests/site_build.py``), and a failed build fails the test.
"""
import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from site_build import require_lite

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("PERCOLATOR_LITE_DIR", ROOT / "build" / "lite"))
SCREENSHOT = ROOT / "artifacts" / "lite_branch.png"     # git-ignored
KERNEL_START_S = 120         # generous: 15-30 s on this machine (make bench-lite)
# 600 s: the first site test of a run also builds the site (site_build), minutes under load
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


def load(name: str):
    """lite/<name>.py (build tooling, not part of the package)."""
    spec = importlib.util.spec_from_file_location(f"lite_{name}", ROOT / "lite" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


drive, serve = load("drive"), load("serve")
ALL_PASSED = re.compile(r"\b(\d+)/\1 checks passed")     # "13/13 checks passed", not "0/13"


def require_site() -> None:
    """build/lite, built once per run under make test (see site_build)."""
    require_lite()


def test_the_site_serves_its_own_pyodide_and_every_local_wheel_matches_the_lock():
    require_site()
    from jupyterlite_pyodide_kernel.constants import PYODIDE_VERSION
    config = json.loads((SITE / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["pyodideUrl"] == "./static/pyodide/pyodide.mjs"
    assert kernel["disablePyPIFallback"] is True
    pyodide = SITE / "static" / "pyodide"
    assert json.loads((pyodide / "package.json").read_text())["version"] == PYODIDE_VERSION
    lock = json.loads((pyodide / "pyodide-lock.json").read_text())["packages"]
    local = {name: spec for name, spec in lock.items() if "://" not in spec["file_name"]}
    for name, spec in local.items():
        wheel = pyodide / spec["file_name"]
        assert wheel.exists(), f"{name}: {wheel.name} is not in the site"
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == spec["sha256"], name
    wanted = kernel["loadPyodideOptions"]["packages"]
    todo, needed = list(wanted), set()          # everything loaded at start is local
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name not in needed:
            needed.add(name)
            todo.extend(lock[name]["depends"])
    assert needed <= local.keys(), f"fetched from a CDN at start: {sorted(needed - local.keys())}"
    assert {"percolator-ref", "greenlet-pyodide", "ipywidgets", "pyodide-kernel"} <= needed
    assert "pandas" in lock and "pandas" not in local          # on demand, from Pyodide's CDN


def test_browser_wheels_are_pinned_at_the_versions_jupyterlab_uses_here():
    """lite/requirements-browser.txt: exact pins; the widget packages as in .venv / requirements.txt."""
    import importlib.metadata
    lines = (ROOT / "lite" / "requirements-browser.txt").read_text().splitlines()
    pins = dict(line.split("#")[0].strip().split("==") for line in lines
                if line.split("#")[0].strip())
    assert "greenlet-pyodide" in pins
    for name in ("ipywidgets", "comm", "jupyterlab-widgets"):
        assert pins[name] == importlib.metadata.version(name), name
    required = (ROOT / "requirements.txt").read_text()
    assert f"ipywidgets=={pins['ipywidgets']}" in required


@pytest.fixture(scope="module")
def site():
    """The base URL of build/lite served on 127.0.0.1 (a free port)."""
    require_site()
    if not os.path.exists(drive.CHROMIUM):
        pytest.skip(f"{drive.CHROMIUM} is missing (install Debian's chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api")
    server = serve.start(SITE)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def lite(site):
    """``(base_url, page)`` in an offline Chromium; afterwards, no request left the loopback."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = drive.launch(p)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            asked = []
            context.on("request", lambda r: asked.append(r.url))   # the kernel's worker too
            page = context.new_page()
            yield site, page
            assert any(u.endswith("/pyodide-lock.json") for u in asked), \
                "the kernel's requests were not seen: the offline check below would be hollow"
            outside = [u for u in asked if not u.startswith((site, "data:", "blob:"))]
            assert not outside, f"the site asked for non-loopback URLs: {outside[:5]}"
        finally:
            browser.close()


def test_exercise_01_with_the_solutions_answer_passes_its_self_check(lite):
    from playwright.sync_api import expect
    base, page = lite
    index, answer = drive.solution_answer(ROOT / "exercises" / "01_snapshot_read.ipynb",
                                          ROOT / "solutions" / "01_snapshot_read.ipynb")
    drive.open_notebook(page, base, "exercises/01_snapshot_read.ipynb", KERNEL_START_S)
    check = page.locator(".jp-Notebook .jp-CodeCell").last.locator(".jp-OutputArea")
    # The committed notebook may carry outputs: clear them, so what we see is this run's.
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    expect(check).not_to_contain_text("checks passed")
    drive.run_all(page)                # the unanswered exercise fails its check
    expect(check).to_contain_text("NotImplementedError", timeout=60_000)
    expect(check).not_to_contain_text(ALL_PASSED)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    drive.set_cell_source(page, index, answer)
    drive.run_all(page)
    expect(check).to_contain_text(ALL_PASSED, timeout=60_000)
    outputs = " ".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    assert "Traceback" not in outputs and "Error" not in outputs, outputs[-2000:]
    assert "FAIL" not in check.inner_text()


def test_notebook_02_steps_the_transfer_and_a_branch(lite):
    from playwright.sync_api import expect
    base, page = lite
    drive.open_notebook(page, base, "notebooks/02_transfer_example.ipynb", KERNEL_START_S)
    cells = json.loads((ROOT / "notebooks" / "02_transfer_example.ipynb").read_text())["cells"]
    playground = next(i for i, c in enumerate(cells) if "playground.widget()" in "".join(c["source"]))
    duel = next(i for i, c in enumerate(cells) if "duel.widget()" in "".join(c["source"]))
    drive.run_cell(page, playground)
    widget = page.locator(".jupyter-widgets.widget-vbox").first
    table = widget.locator(".percolator-cells")
    expect(table).to_contain_text("5: 10", timeout=60_000)
    for _ in range(3):                 # get Bob, get Joe, prewrite the primary
        widget.get_by_role("button", name="Step", exact=True).click()
    expect(table).to_contain_text("I am primary", timeout=20_000)
    expect(widget).to_contain_text("prewrite Bob.bal")

    drive.run_cell(page, duel)               # T7: Bob -> Joe $7; T8: Joe -> Bob $1
    widget = page.locator(".jupyter-widgets.widget-vbox").nth(1)
    table = widget.locator(".percolator-cells")
    expect(table).to_contain_text("5: 10", timeout=60_000)
    step = widget.get_by_role("button", name="Step", exact=True)
    for _ in range(3):                 # T7 gets Bob, gets Joe, locks Bob
        step.click()
    expect(widget).to_contain_text("frame 3: T7 prewrite-primary Bob", timeout=20_000)
    expect(table).to_contain_text("I am primary")
    widget.get_by_role("button", name="Back", exact=True).click()
    expect(widget).to_contain_text("frame 2: T7 get Joe", timeout=20_000)
    widget.get_by_role("button", name="T8", exact=True).click()
    step.click()                       # the branch: T8 moves where T7 locked Bob before
    expect(widget).to_contain_text("frame 3: T8 get Joe", timeout=20_000)
    expect(table).not_to_contain_text("I am primary")
    expect(table).to_contain_text("6: data @ 5")
    expect(widget).to_contain_text("a new branch from frame 2")
    widget.scroll_into_view_if_needed()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))


def saved_outputs(path: Path) -> int:
    """How many outputs the committed notebook's code cells hold, the first cell's left out."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return sum(len(c.get("outputs", [])) for c in cells[1:])


@pytest.mark.parametrize("name", ["03_crash_and_cleanup", "07_bigtable_vs_percolator_benchmark"])
def test_a_notebook_that_needs_a_local_python_notes_it_and_keeps_its_recorded_run(lite, name):
    """Run All on a notebook that cannot run in a browser: its first cell prints the note,
    and every cell below shows its recorded outputs again (before, the note stopped Run All
    with an error and JupyterLab had already cleared every output below it)."""
    from playwright.sync_api import expect
    base, page = lite
    drive.open_notebook(page, base, f"notebooks/{name}.ipynb", KERNEL_START_S)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    drive.run_all(page)
    guard = page.locator(".jp-Notebook .jp-CodeCell").first.locator(".jp-OutputArea")
    expect(guard).to_contain_text("This notebook needs a local Python", timeout=60_000)
    expect(guard).to_contain_text("show a recorded run")
    expect(guard).not_to_contain_text("Traceback")
    page.wait_for_function(drive.KERNEL_IDLE, timeout=60_000)
    page.wait_for_timeout(2000)
    counts = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code').map(c => c.model.outputs.length)")
    assert sum(counts[1:]) == saved_outputs(ROOT / "notebooks" / f"{name}.ipynb"), counts
    errors = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code').flatMap(c => c.model.outputs.toJSON())"
        ".filter(o => o.output_type === 'error').map(o => o.ename)")
    assert errors == []


# -- every browser-runnable notebook runs to its end on the site (issue 28, item 5) -----------

RUN_ALL_S = 240              # one notebook's Run All in Pyodide, generous on a loaded machine
RUNNABLE_NOTEBOOKS = [
    "01_snapshot_isolation",
    "02_transfer_example",
    # 05 used to hang here: Pyodide died (see test_a_parked_stepper_survives_a_deep_collection)
    "05_observers_and_notifications",
    "08_scale_and_failure",
    "10_percolator_and_spanner",
]
# Run All has ended: an error stopped it, or the last code cell ran and the kernel is idle.
RUN_ALL_ENDED = """() => {
  const nb = window.jupyterapp.shell.currentWidget;
  const code = nb.content.widgets.filter(c => c.model.type === 'code');
  const failed = code.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
  const last = code[code.length - 1].model;
  return failed || (last.executionCount !== null && nb.sessionContext.session.kernel.status === 'idle');
}"""
CODE_OUTPUTS = ("() => window.jupyterapp.shell.currentWidget.content.widgets"
                ".filter(c => c.model.type === 'code').map(c => c.model.outputs.toJSON())")


@pytest.fixture(scope="module")
def chromium(site):
    """One offline Chromium for the notebooks below (each gets a context, a page and a kernel)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = drive.launch(p)
        try:
            yield site, browser
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.timeout(KERNEL_START_S + RUN_ALL_S + 60)
@pytest.mark.parametrize("name", RUNNABLE_NOTEBOOKS)
def test_a_browser_notebook_runs_all_to_its_end_on_the_site_offline(chromium, name):
    """Run All, from cleared outputs: no cell ends in an error and the last code cell shows
    its output. Every request stays on the loopback server (Chromium cannot reach anything
    else: a dead proxy, a resolver that knows only 127.0.0.1); asserted below."""
    base, browser = chromium
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    asked = []
    context.on("request", lambda r: asked.append(r.url))    # the kernel's worker too
    try:
        page = context.new_page()
        drive.open_notebook(page, base, f"notebooks/{name}.ipynb", KERNEL_START_S)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        assert not any(page.evaluate(CODE_OUTPUTS)), "the committed outputs were not cleared"
        drive.run_all(page)
        page.wait_for_function(RUN_ALL_ENDED, timeout=RUN_ALL_S * 1000, polling=500)
        outputs = page.evaluate(CODE_OUTPUTS)
    finally:
        context.close()
    errors = [f"{o['ename']}: {o['evalue']}" for cell in outputs for o in cell
              if o["output_type"] == "error"]
    assert errors == [], errors
    assert outputs[-1], "the last code cell showed no output"
    assert any(u.endswith("/pyodide-lock.json") for u in asked), \
        "the kernel's requests were not seen: the offline check below would be hollow"
    outside = [u for u in asked if not u.startswith((base, "data:", "blob:"))]
    assert not outside, f"the site asked for non-loopback URLs: {outside[:5]}"


# Run code in the open notebook's kernel; resolves to [ms, text] (stream and error output).
EXECUTE = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const out = [];
  const future = kernel.requestExecute({code, stop_on_error: true});
  future.onIOPub = (m) => {
    if (m.header.msg_type === 'stream') out.push(m.content.text);
    if (m.header.msg_type === 'error') out.push(m.content.ename + ': ' + m.content.evalue);
  };
  const t0 = performance.now();
  await future.done;
  return [performance.now() - t0, out.join('')];
}"""
# A parked stepper (notebook 05's observer race, one step in), then collections at a C-stack
# depth of up to 800 calls (each level goes through map(), a C function).
PARKED_THEN_DEEP_GC = """
import gc
from percolator_ref.viz import observer_race_stepper
race = observer_race_stepper()
race.step()

def down(n):
    return list(map(down, [n - 1])) if n else gc.collect()

for depth in (100, 400, 800):
    down(depth)
print("alive after collections at depth 800; frame", race.cursor, "of", len(race.frames) - 1)
"""


@pytest.mark.timeout(KERNEL_START_S + 180)
def test_a_parked_stepper_survives_a_deep_collection(chromium):
    """Issue 28: with a stepper's script parked on a suspended stack (greenlet-pyodide), a
    garbage collection on a deep stack killed Pyodide ("memory access out of bounds"; the
    kernel never answered again). Notebook 05's Run All met it at part 5, whose first import
    of tqdm compiles on a deep stack, and looked like a slow cell. In a browser the stepper
    now leaves nothing parked between calls. The future is raced against a timeout, since a
    dead kernel never resolves it."""
    base, browser = chromium
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    asked, fatal = [], []
    context.on("request", lambda r: asked.append(r.url))
    try:
        page = context.new_page()
        page.on("console", lambda m: fatal.append(m.text) if "fatal error" in m.text else None)
        drive.open_notebook(page, base, "notebooks/05_observers_and_notifications.ipynb",
                            KERNEL_START_S)
        ms, out = page.evaluate(
            "async ([run, code]) => Promise.race([eval(run)(code), new Promise(r => setTimeout("
            "() => r([-1, 'no answer in 120 s']), 120000))])", [EXECUTE, PARKED_THEN_DEEP_GC])
    finally:
        context.close()
    assert fatal == [], fatal[:1]
    assert "alive after collections at depth 800; frame 1 of 1" in out, out
    outside = [u for u in asked if not u.startswith((base, "data:", "blob:"))]
    assert not outside, f"the site asked for non-loopback URLs: {outside[:5]}"
