"""Drive the built site in headless Chromium, offline (shared by tests/test_lite.py and bench.py).

Chromium gets a dead proxy and a resolver that knows no host but 127.0.0.1,
so the only thing it can reach is the loopback server of lite/serve.py.
"""
from __future__ import annotations

import json
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
OFFLINE_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--proxy-server=http://127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
KERNEL_IDLE = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
               " const k = w && w.sessionContext && w.sessionContext.session"
               " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }")


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=OFFLINE_ARGS)


def open_notebook(page, base: str, path: str, timeout_s: float = 60) -> None:
    """Open ``path`` in the site's JupyterLab and wait for an idle Pyodide kernel."""
    page.goto(f"{base}/lab/index.html?path={path}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=40_000)
    page.wait_for_function(KERNEL_IDLE, timeout=timeout_s * 1000)


def run_cell(page, index: int) -> None:
    """Select cell ``index`` of the open notebook and run it (as Shift+Enter does)."""
    page.evaluate(
        "(i) => { const nb = window.jupyterapp.shell.currentWidget.content;"
        " nb.activeCellIndex = i; return window.jupyterapp.commands.execute('notebook:run-cell'); }",
        index)


def run_all(page) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def set_cell_source(page, index: int, source: str) -> None:
    """Type ``source`` into cell ``index`` (replacing what it held), as a student would."""
    page.evaluate(
        "([i, s]) => window.jupyterapp.shell.currentWidget.content.widgets[i]"
        ".model.sharedModel.setSource(s)", [index, source])


def solution_answer(exercise: Path, solution: Path) -> tuple:
    """(index, source): the exercise's answer cell (``YOUR CODE HERE``) and the solution's text for it."""
    cells = json.loads(exercise.read_text())["cells"]
    index = next(i for i, c in enumerate(cells)
                 if c["cell_type"] == "code" and "YOUR CODE HERE" in "".join(c["source"]))
    solved = json.loads(solution.read_text())["cells"]
    answer = "".join(next(c for c in solved if c["id"] == cells[index]["id"])["source"])
    if "YOUR CODE HERE" in answer:
        raise ValueError(f"solution {solution} still says YOUR CODE HERE")
    return index, answer
