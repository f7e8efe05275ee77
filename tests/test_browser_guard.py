"""A notebook that cannot run in a browser keeps its recorded run visible there (issue 28, item 5).

Without a browser: the guard cell's source finds the notebook's recorded cells, and, through a
stand-in for the site's Pyodide kernel (its list of line transforms), a recorded cell run
unchanged is swapped for :func:`show_recorded`, which shows the saved outputs; an edited
cell runs as written. tests/test_lite.py runs the real thing in Chromium.
"""
from __future__ import annotations

import asyncio
import json
import sys
import types
from pathlib import Path

import pytest

from percolator_ref.viz import browser

ROOT = Path(__file__).resolve().parent.parent
GUARDED = {"03_crash_and_cleanup": "it starts Redis servers and runs concurrent clients in threads",
           "04_timestamp_oracle": "it races transactions in threads",
           "06_tpce_workload": "it times the workload against SQLite on the CPU clock, which the kit "
                               "checks only in a local Python",
           "07_bigtable_vs_percolator_benchmark": "it starts Redis servers and benchmark client "
                                                  "processes"}


def code_cells(name: str) -> list:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_every_cell_below_the_guard_is_recorded(name):
    cells = code_cells(name)
    assert "needs_local_python" in "".join(cells[0]["source"])
    found = browser.recorded_cells(json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text()),
                                   GUARDED[name])
    below = {"".join(c["source"]).strip() for c in cells[1:] if "".join(c["source"]).strip()}
    assert set(found) == below and len(found) >= 5


def test_in_cpython_the_guard_does_nothing(capsys):
    browser.needs_local_python("anything")
    assert capsys.readouterr().out == "" and browser.replay_recorded_cells("anything") == 0


@pytest.fixture
def site_kernel(monkeypatch):
    """A stand-in for the site's ``pyodide_kernel`` (its transform list) in a 'browser'."""
    manager = types.SimpleNamespace(line_transforms=[])
    module = types.SimpleNamespace(kernel_instance=types.SimpleNamespace(
        lite_transform_manager=manager))
    monkeypatch.setitem(sys.modules, "pyodide_kernel", module)
    monkeypatch.setattr(browser, "IN_BROWSER", True)
    monkeypatch.setattr(browser, "RECORDED", {})
    return manager


def run_through(manager, source: str) -> str:
    lines = source.splitlines(keepends=True)
    for transform in manager.line_transforms:
        lines = asyncio.run(transform(lines))
    return "".join(lines)


def test_on_the_site_a_recorded_cell_shows_its_saved_outputs(site_kernel, monkeypatch, capsys):
    name = "03_crash_and_cleanup"
    monkeypatch.chdir(ROOT / "notebooks")
    browser.needs_local_python(GUARDED[name])
    assert "show a recorded run" in capsys.readouterr().out
    cell = next(c for c in code_cells(name)[1:]
                if any(o["output_type"] in ("display_data", "execute_result") for o in c["outputs"]))
    source = "".join(cell["source"])
    swapped = run_through(site_kernel, source)
    assert swapped.startswith("from percolator_ref.viz.browser import show_recorded")
    assert "import redis" not in swapped and "pandas" not in swapped.split("show_recorded(")[0]
    shown = []
    monkeypatch.setattr("IPython.display.publish_display_data",
                        lambda data, metadata=None: shown.append(data))
    exec(compile(swapped, "cell", "exec"), {})
    saved = [o["data"] for o in cell["outputs"] if o["output_type"] in ("display_data",
                                                                      "execute_result")]
    assert [d.get("text/plain") for d in shown] == [
        "".join(d["text/plain"]) if isinstance(d.get("text/plain"), list) else d.get("text/plain")
        for d in saved]
    assert all("application/vnd.jupyter.widget-view+json" not in d for d in shown)
    edited = source + "\nx = 1"                  # an edited cell runs as written
    assert run_through(site_kernel, edited) == edited


def test_without_the_sites_kernel_the_guard_stops_with_its_note(monkeypatch):
    monkeypatch.setattr(browser, "IN_BROWSER", True)
    monkeypatch.setitem(sys.modules, "pyodide_kernel", None)       # import fails
    with pytest.raises(browser.NeedsLocalPython, match="needs a local Python: it races"):
        browser.needs_local_python(GUARDED["04_timestamp_oracle"])
