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
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from test_browser import CHROMIUM, CHROMIUM_ARGS, _free_port

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "02_transfer_example.ipynb"
KERNEL_IDLE = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
               " const k = w && w.sessionContext && w.sessionContext.session"
               " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }")
pytestmark = [pytest.mark.browser, pytest.mark.timeout(170)]


@contextmanager
def jupyterlab(root: Path, home: Path):
    """JupyterLab on 127.0.0.1 over ``root``, with jupyter/overrides.json as its overrides.

    Both servers of a test share ``root``'s parent as their data directory: the
    notebook signatures that make a saved notebook trusted live there."""
    settings = home / "app-settings"
    settings.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "jupyter" / "overrides.json", settings / "overrides.json")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(lab_env(root.parent), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    log = open(home / "lab.log", "a")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         f"--LabApp.app_settings_dir={settings}", "--LabApp.news_url=",
         "--LabApp.extension_manager=readonly"] + (["--allow-root"] if os.geteuid() == 0 else []),
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 40
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" +
                                       (home / "lab.log").read_text()[-3000:])
                time.sleep(0.3)
        yield f"{base}/lab/tree/{NOTEBOOK}?token={token}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def lab_env(shared: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), JUPYTER_DATA_DIR=str(shared / "data"))


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
                   env=lab_env(tmp_path), check=True, capture_output=True)
    stepper_cell = next(i for i, c in enumerate(cells) if "playground.widget()" in "".join(c["source"]))
    with sync_playwright() as p:
        with jupyterlab(root, tmp_path / "first") as url:
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

        with jupyterlab(root, tmp_path / "second") as url:    # a new server, a new kernel
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
