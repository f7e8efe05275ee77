"""The transfer notebook in a real browser: JupyterLab + headless Chromium (Playwright).

Starts JupyterLab on 127.0.0.1 (a free port, token auth on) over a temporary
copy of ``notebooks/``, opens ``02_transfer_example.ipynb``, runs all cells,
clicks the stepper's ``Step`` button and checks that the table shows the
primary lock and then the commit record, as in the paper's Figure 4. Saves
the screenshot to ``artifacts/transfer_stepper.png`` (git-ignored; set
``PERCOLATOR_SCREENSHOT`` to write elsewhere, e.g. to refresh the README's
``docs/screenshots/transfer_stepper.png``).

Notebook 09 the same way: its rollback-records stepper is stepped until the
reader has rolled the writer back (``rollback @ 7`` in both ``bal:write``
cells), then ``Back`` and the writer's late prewrite fork the run, and the
new branch shows the prewrite refused by the rollback record.
"""
import os
import shutil
from pathlib import Path

import pytest

from lab_server import CHROMIUM, CHROMIUM_ARGS, KERNEL_IDLE, jupyterlab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "02_transfer_example.ipynb"
SCREENSHOT = Path(os.environ.get("PERCOLATOR_SCREENSHOT",
                              ROOT / "artifacts" / "transfer_stepper.png"))

pytestmark = [pytest.mark.browser, pytest.mark.timeout(110)]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server over a copy of notebooks/; yields (base_url, token)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with jupyterlab(root, tmp_path) as (base, token):
        yield base, token


def _open_and_run_all(page, base: str, token: str, notebook: str) -> None:
    """Open ``notebook`` in JupyterLab, wait for its kernel, run every cell."""
    page.goto(f"{base}/lab/tree/{notebook}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=40_000)
    page.wait_for_function(KERNEL_IDLE, timeout=40_000)
    ran = page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    assert ran is not False


def test_transfer_notebook_steps_through_figure4_in_chromium(lab):
    from playwright.sync_api import expect, sync_playwright
    base, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            _open_and_run_all(page, base, token, NOTEBOOK)
            widget = page.locator(".jupyter-widgets.widget-vbox").first
            table = widget.locator(".percolator-cells")
            step = widget.get_by_role("button", name="Step", exact=True)
            expect(table).to_contain_text("5: 10", timeout=30_000)
            expect(table).not_to_contain_text("I am primary")
            for _ in range(3):                 # get Bob, get Joe, prewrite the primary
                step.click()
            expect(table).to_contain_text("I am primary", timeout=10_000)
            expect(widget).to_contain_text("prewrite Bob.bal")
            for _ in range(2):                 # prewrite the secondary, commit the primary
                step.click()
            expect(table).to_contain_text("data @ 7", timeout=10_000)
            expect(table).to_contain_text("8: data @ 7")
            expect(widget).to_contain_text("commit point")
            page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
            no_news = page.locator(".jp-toast-button", has_text="No")
            if no_news.count():
                no_news.first.click()
            widget.scroll_into_view_if_needed()
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT))
            # the data column of the write record sits in the bal:write column
            header = table.locator("thead th").all_inner_texts()
            bob = table.locator("tbody tr").first.locator("td").all_inner_texts()
            assert "8: data @ 7" in bob[header.index("bal:write") - 1]
        finally:
            browser.close()


def _cell_under(table, row: str, column: str):
    """``row``'s cell in ``column`` of a rendered cell table (a locator; versions that the
    frame's step erased are struck through: ``<s>``)."""
    header = table.locator("thead th").all_inner_texts()
    for tr in table.locator("tbody tr").all():
        if tr.locator("th").first.inner_text().strip() == row:
            return tr.locator("td").nth(header.index(column) - 1)
    raise AssertionError(f"no row {row!r} in the table")


def test_notebook_09_steps_rollback_records_and_a_branch_in_chromium(lab):
    from playwright.sync_api import expect, sync_playwright
    base, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            _open_and_run_all(page, base, token, "09_what_tikv_changed.ipynb")
            page.wait_for_function(KERNEL_IDLE, timeout=40_000)
            widget = page.locator(".jupyter-widgets.widget-vbox").filter(
                has=page.locator(".percolator-cells")).first
            table = widget.locator(".percolator-cells")
            step = widget.get_by_role("button", name="Step", exact=True)
            expect(widget).to_contain_text("frame 0: initial state", timeout=30_000)
            expect(table).not_to_contain_text("rollback")
            for frame in (1, 2):               # T7 prewrites Bob (primary), then Joe
                step.click()
                expect(widget).to_contain_text(f"frame {frame}: T7 prewrite", timeout=10_000)
            expect(table).to_contain_text("I am primary")
            widget.get_by_role("button", name="T8", exact=True).click()
            frame = 2
            while "roll-back Joe" not in widget.locator("b").first.inner_text():
                assert frame < 40, "T8 never rolled T7 back"
                step.click()                   # T8 waits on Joe's lock, then cleans up
                frame += 1
                expect(widget).to_contain_text(f"frame {frame}: T8", timeout=10_000)
            for row in ("Bob", "Joe"):         # the variant's mark: a rollback record
                assert "7: rollback @ 7" in _cell_under(table, row, "bal:write").inner_text()
            erased = _cell_under(table, "Joe", "bal:lock").locator("s").all_inner_texts()
            assert erased == ["7: primary @ Bob.bal"]      # T8 rolled Joe back in this step

            widget.get_by_role("button", name="Back", exact=True).click()
            expect(widget).to_contain_text(f"frame {frame - 1}: T8 cleanup-primary Bob",
                                           timeout=10_000)
            joe_lock = _cell_under(table, "Joe", "bal:lock")
            assert joe_lock.inner_text().strip() == "7: primary @ Bob.bal"
            assert joe_lock.locator("s").count() == 0     # not erased: Joe is still locked
            widget.get_by_role("button", name="T7", exact=True).click()
            step.click()                       # the branch: T7's late prewrite of Bob
            expect(widget).to_contain_text(f"frame {frame}: T7 prewrite-primary Bob",
                                           timeout=10_000)
            expect(widget).to_contain_text(f"a new branch from frame {frame - 1}")
            expect(widget).to_contain_text("conflict, abort")
            assert "7: rollback @ 7" in _cell_under(table, "Bob", "bal:write").inner_text()
            assert _cell_under(table, "Bob", "bal:lock").inner_text().strip() == ""
            assert "primary @ Bob.bal" in _cell_under(table, "Joe", "bal:lock").inner_text()
            # T7's abort then rolls back its own lock on Joe (a rollback record there too)
            # before T7 has aborted: one more step
            expect(widget).to_contain_text("T7: next abort-rollback Joe")
            step.click()
            expect(widget).to_contain_text(f"frame {frame + 1}: T7 abort-rollback Joe",
                                           timeout=10_000)
            expect(widget).to_contain_text("T7: aborted")
            assert "7: rollback @ 7" in _cell_under(table, "Joe", "bal:write").inner_text()
            erased = _cell_under(table, "Joe", "bal:lock").locator("s").all_inner_texts()
            assert erased == ["7: primary @ Bob.bal"]      # T7 rolled Joe back in this step
        finally:
            browser.close()
