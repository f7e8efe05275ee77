"""The static JupyterLite site (``make lite``) in headless Chromium, offline.

``build/lite`` is served from a loopback HTTP server in this process; Chromium
runs with every other address unreachable (a dead proxy and a resolver that
knows no host), and the test asserts that no request left the loopback. In
the browser, Pyodide runs the kit from the site's own wheels:

- exercise 01 with the solution's answer typed into its answer cell: run all
  cells, the self-check passes;
- notebook 02's stepper: ``Step`` three times shows the primary lock; the
  two-transfer stepper then steps a branch (``Back``, then the other
  transaction) and the table shows the new branch.

The site is built by ``make lite`` (``make test`` builds it first and sets
``PERCOLATOR_REQUIRE_LITE=1``, so a missing site fails instead of skipping).
"""
import importlib.util
import json
import os
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("PERCOLATOR_LITE_DIR", ROOT / "build" / "lite"))
OFFLINE_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--proxy-server=http://127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
KERNEL_START_S = 60          # generous: about 10 s on this machine
pytestmark = [pytest.mark.browser, pytest.mark.timeout(170)]


def load_serve():
    """lite/serve.py (build tooling, not part of the package)."""
    spec = importlib.util.spec_from_file_location("lite_serve", ROOT / "lite" / "serve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site():
    """The base URL of build/lite served on 127.0.0.1 (a free port)."""
    if not (SITE / "jupyter-lite.json").exists():
        if os.environ.get("PERCOLATOR_REQUIRE_LITE"):
            pytest.fail(f"{SITE} is not built: run make lite")
        pytest.skip(f"{SITE} is not built (make lite; make test builds it)")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api")
    server = load_serve().start(SITE)
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
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=OFFLINE_ARGS)
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


def open_notebook(page, base: str, path: str) -> None:
    """Open ``path`` in the lite JupyterLab and wait for an idle Pyodide kernel."""
    page.goto(f"{base}/lab/index.html?path={path}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=40_000)
    page.wait_for_function(
        "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " const k = w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }",
        timeout=KERNEL_START_S * 1000)


def run_cell(page, index: int) -> None:
    """Select code cell ``index`` of the open notebook and run it (as Shift+Enter does)."""
    page.evaluate(
        "(i) => { const nb = window.jupyterapp.shell.currentWidget.content;"
        " nb.activeCellIndex = i; return window.jupyterapp.commands.execute('notebook:run-cell'); }",
        index)


def set_cell_source(page, index: int, source: str) -> None:
    page.evaluate(
        "([i, s]) => window.jupyterapp.shell.currentWidget.content.widgets[i]"
        ".model.sharedModel.setSource(s)", [index, source])


def answer_cell(path: Path) -> tuple:
    """(index, source) of the cell the student writes in (it says ``YOUR CODE HERE``)."""
    cells = json.loads(path.read_text())["cells"]
    index = next(i for i, c in enumerate(cells) if "YOUR CODE HERE" in "".join(c["source"]))
    return index, cells[index]["id"]


def test_exercise_01_with_the_solutions_answer_passes_its_self_check(lite):
    from playwright.sync_api import expect
    base, page = lite
    index, cell_id = answer_cell(ROOT / "exercises" / "01_snapshot_read.ipynb")
    solution = json.loads((ROOT / "solutions" / "01_snapshot_read.ipynb").read_text())["cells"]
    answer = "".join(next(c for c in solution if c["id"] == cell_id)["source"])
    assert "YOUR CODE HERE" not in answer
    open_notebook(page, base, "exercises/01_snapshot_read.ipynb")
    set_cell_source(page, index, answer)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    last = page.locator(".jp-Notebook .jp-CodeCell").last
    expect(last.locator(".jp-OutputArea-output")).to_contain_text(
        "checks passed", timeout=60_000)
    outputs = " ".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    assert "Traceback" not in outputs and "Error" not in outputs, outputs[-2000:]
    assert "failed" not in last.inner_text()


def test_notebook_02_steps_the_transfer_and_a_branch(lite):
    from playwright.sync_api import expect
    base, page = lite
    open_notebook(page, base, "notebooks/02_transfer_example.ipynb")
    cells = json.loads((ROOT / "notebooks" / "02_transfer_example.ipynb").read_text())["cells"]
    playground = next(i for i, c in enumerate(cells) if "playground.widget()" in "".join(c["source"]))
    duel = next(i for i, c in enumerate(cells) if "duel.widget()" in "".join(c["source"]))
    run_cell(page, playground)
    widget = page.locator(".jupyter-widgets.widget-vbox").first
    table = widget.locator(".percolator-cells")
    expect(table).to_contain_text("5: 10", timeout=60_000)
    for _ in range(3):                 # get Bob, get Joe, prewrite the primary
        widget.get_by_role("button", name="Step", exact=True).click()
    expect(table).to_contain_text("I am primary", timeout=20_000)
    expect(widget).to_contain_text("prewrite Bob.bal")

    run_cell(page, duel)               # T7: Bob -> Joe $7; T8: Joe -> Bob $1
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
