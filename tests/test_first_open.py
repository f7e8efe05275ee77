"""A shipped notebook opened before anything runs (issue 28, items 2 and 4), in Chromium.

A student on a fresh clone opens a notebook in JupyterLab (untrusted: no signature in a new
Jupyter data dir), or on the browser site; nothing runs. Every cell is scrolled into view
(JupyterLab draws only the cells on screen) and its rendered text read: no widget's Python
repr (``StepperWidget(...)``, ``VBox(children=...``) shows, the stepper's saved view does,
and exercise 01's worked example shows its dollar amounts as written, not typeset as math.

Notebook 02 is edited in branch ``facts``: its committed outputs hold the old reprs until it
is re-executed with this kit's widgets, so its case is an expected failure while they do.
"""
import contextlib
import importlib.util
import os
import re
import shutil
from pathlib import Path

import pytest

from lab_server import CHROMIUM, CHROMIUM_ARGS, jupyterlab
from site_build import require_lite

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("PERCOLATOR_LITE_DIR", ROOT / "build" / "lite"))
REPR = re.compile(r"\w*Widget\(|VBox\(children=|HBox\(children=")
# 600 s: the first site test of a run also builds the site (site_build), minutes under load
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

STALE_02 = "StepperWidget(frame" in (ROOT / "notebooks" / "02_transfer_example.ipynb").read_text()
NOTEBOOKS = [
    pytest.param("exercises/01_snapshot_read.ipynb", id="exercise-01"),
    pytest.param("notebooks/02_transfer_example.ipynb", id="notebook-02", marks=pytest.mark.xfail(
        STALE_02, strict=True, reason="notebooks/02's saved outputs predate the widgets' saved "
        "view: re-execute it (branch facts)")),
]

# Scroll every cell into view, let it render, read its text (and whether MathJax typeset it).
READ_CELLS = """async () => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const cells = [];
  for (let i = 0; i < nb.widgets.length; i++) {
    await nb.scrollToItem(i, 'start');
    await new Promise(r => setTimeout(r, 150));
    const node = nb.widgets[i].node;
    cells.push({type: nb.widgets[i].model.type, text: node.innerText,
                math: node.querySelectorAll('mjx-container, .MathJax').length,
                tables: node.querySelectorAll('.jp-OutputArea-output table').length});
  }
  return cells;
}"""


def require_browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api")


# Exercise 01's worked example has rendered, as text or typeset as math (then the checks
# below fail): a loaded machine can take seconds past the first cell to render it.
EXAMPLE_RENDERED = """() => [...document.querySelectorAll('.jp-RenderedMarkdown')].some(m =>
  m.innerText.includes('5: 10 dollars') || m.querySelector('mjx-container, .MathJax'))"""


def read_cells(page, path: str = "") -> list:
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    if path.startswith("exercises/01"):
        page.wait_for_function(EXAMPLE_RENDERED, timeout=60_000)
    page.wait_for_timeout(1500)                    # outputs and MathJax render
    return page.evaluate(READ_CELLS)


def check_first_open(cells: list, path: str) -> None:
    shown = "\n".join(c["text"] for c in cells)
    assert not REPR.search(shown), REPR.search(shown).group(0) + ": " + shown[
        max(0, REPR.search(shown).start() - 200):REPR.search(shown).start() + 200]
    assert "saved view of the stepper" in shown         # the stepper's cell: its saved view
    assert any(c["tables"] for c in cells if c["type"] == "code")
    if path.startswith("exercises/01"):
        example = next(c for c in cells if c["type"] == "markdown" and "10 dollars" in c["text"])
        assert example["math"] == 0 and "8: 3 dollars, 5: 10 dollars" in example["text"]
        assert not any(c["math"] for c in cells), "a markdown cell was typeset as math"


@contextlib.contextmanager
def lab_page(root: Path, tmp_path: Path, path: str):
    """A Chromium page on ``path`` in a JupyterLab over ``root`` with a new data dir (no
    notebook signature: untrusted, as in a fresh clone)."""
    from playwright.sync_api import sync_playwright
    with jupyterlab(root, tmp_path / "home", data_dir=tmp_path / "data") as (base, token):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{base}/lab/tree/{path}?token={token}")
                yield page
            finally:
                browser.close()


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_untrusted_in_jupyterlab_shows_saved_views_not_reprs(tmp_path, path):
    require_browser()
    root = tmp_path / "kit"
    (root / Path(path).parent).mkdir(parents=True)
    shutil.copy(ROOT / path, root / path)
    with lab_page(root, tmp_path, path) as page:
        cells = read_cells(page, path)
        trusted = page.evaluate("() => window.jupyterapp.shell.currentWidget.content"
                                ".widgets.filter(c => c.model.type === 'code')"
                                ".some(c => c.model.trusted)")
        assert trusted is False
        check_first_open(cells, path)


def load_lite(name: str):
    spec = importlib.util.spec_from_file_location(f"lite_{name}", ROOT / "lite" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_on_the_site_shows_saved_views_not_reprs(path):
    require_browser()
    require_lite()
    built = SITE / "files" / path
    if built.exists() and built.read_bytes() != (ROOT / path).read_bytes():
        pytest.fail(f"{built} is not the repository's {path}: rebuild the site (make lite)")
    from playwright.sync_api import sync_playwright
    drive, serve = load_lite("drive"), load_lite("serve")
    server = serve.start(SITE)
    try:
        with sync_playwright() as p:
            browser = drive.launch(p)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"http://127.0.0.1:{server.server_port}/lab/index.html?path={path}")
                check_first_open(read_cells(page, path), path)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


def test_reset_then_step_in_jupyterlab_through_the_buttons(tmp_path):
    """Issue 28, item 6: run a stepper to its end, show its widget, click Reset then Step.
    The kernel may handle the two clicks on different threads; Step must still step."""
    require_browser()
    import nbformat
    from playwright.sync_api import expect
    from lab_server import KERNEL_IDLE
    root = tmp_path / "kit"
    root.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(
        "from percolator_ref.viz import figure4_stepper\n"
        "s = figure4_stepper()\ns.run()\ns.widget()")]
    nbformat.write(nb, root / "reset.ipynb")
    with lab_page(root, tmp_path, "reset.ipynb") as page:
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        widget = page.locator(".jupyter-widgets.widget-vbox").first
        expect(widget).to_contain_text("transfer finished: committed", timeout=60_000)
        widget.get_by_role("button", name="Reset", exact=True).click()
        expect(widget).to_contain_text("frame 0: initial state", timeout=30_000)
        step = widget.get_by_role("button", name="Step", exact=True)
        step.click()
        expect(widget).to_contain_text("frame 1: T7 get Bob", timeout=30_000)
        step.click()
        expect(widget).to_contain_text("frame 2: T7 get Joe", timeout=30_000)
        expect(widget).not_to_contain_text("different thread")
