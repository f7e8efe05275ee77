"""A notebook saved by JupyterLab with its widget state reopens, without running, showing its table.

The README promises that a saved notebook still shows its cell tables. In
headless Chromium: JupyterLab (with the kit's settings overrides, which turn
on ipywidgets' ``saveState``) opens notebook 02, runs only the stepper's
cell, steps three times (the primary lock appears) and saves. Then a new
JupyterLab server and a new browser open the saved file and run nothing: the
widget is rebuilt from the saved state and its table shows the lock.
"""
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from lab_server import CHROMIUM, CHROMIUM_ARGS, KERNEL_IDLE, jupyterlab, lab_env

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "02_transfer_example.ipynb"
pytestmark = [pytest.mark.browser, pytest.mark.timeout(170)]


@contextmanager
def lab_on(root: Path, home: Path):
    """JupyterLab over ``root`` with the kit's settings overrides, opened at the notebook.

    Both servers of a test share ``root``'s parent as their data directory: the
    notebook signatures that make a saved notebook trusted live there."""
    with jupyterlab(root, home, overrides=True, data_dir=root.parent / "data") as (base, token):
        yield f"{base}/lab/tree/{NOTEBOOK}?token={token}"


def open_page(playwright, url):
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=40_000)
    page.wait_for_function(KERNEL_IDLE, timeout=40_000)
    return browser, page


def test_a_saved_stepper_reopens_without_running_and_shows_its_table(tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium; .ci/run does)")
    from playwright.sync_api import expect, sync_playwright
    root = tmp_path / "notebooks"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    cells = json.loads((root / NOTEBOOK).read_text())["cells"]
    # The student trusts the notebook (JupyterLab renders widgets only in trusted
    # outputs); outputs made in the session keep it trusted when it is saved.
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(root / NOTEBOOK)],
                   env=lab_env(tmp_path / "data"), check=True, capture_output=True)
    stepper_cell = next(i for i, c in enumerate(cells) if "playground.widget()" in "".join(c["source"]))
    with sync_playwright() as p:
        with lab_on(root, tmp_path / "first") as url:
            browser, page = open_page(p, url)
            try:
                page.evaluate(
                    "(i) => { const nb = window.jupyterapp.shell.currentWidget.content;"
                    " nb.activeCellIndex = i;"
                    " return window.jupyterapp.commands.execute('notebook:run-cell'); }",
                    stepper_cell)
                widget = page.locator(".jupyter-widgets.widget-vbox").first
                expect(widget.locator(".percolator-cells")).to_contain_text("5: 10", timeout=30_000)
                for _ in range(3):             # get Bob, get Joe, prewrite the primary
                    widget.get_by_role("button", name="Step", exact=True).click()
                expect(widget.locator(".percolator-cells")).to_contain_text(
                    "I am primary", timeout=10_000)
                page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
                page.wait_for_function(
                    "() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                    timeout=20_000)
            finally:
                browser.close()
        saved = json.loads((root / NOTEBOOK).read_text())
        state = json.dumps(saved["metadata"]["widgets"])
        assert "I am primary" in state, "JupyterLab did not save the widget state"
        executed = [c.get("execution_count") for c in saved["cells"] if c["cell_type"] == "code"]

        with lab_on(root, tmp_path / "second") as url:    # a new server, a new kernel
            browser, page = open_page(p, url)
            try:
                widget = page.locator(".jupyter-widgets.widget-vbox").first
                table = widget.locator(".percolator-cells")
                expect(table).to_contain_text("I am primary", timeout=30_000)
                expect(widget).to_contain_text("prewrite Bob.bal")
                kernel_ran = page.evaluate(
                    "() => window.jupyterapp.shell.currentWidget.content.widgets"
                    ".filter(c => c.model.type === 'code').map(c => c.model.executionCount)")
                assert kernel_ran == executed, "a cell ran on reopening"
            finally:
                browser.close()
