"""How fast the browser site is on this machine (``make bench-lite``).

From lite/serve.py's loopback server, in an offline headless Chromium with a
fresh profile each run (nothing cached):

- ``kernel``: from opening exercise 01 to an idle Pyodide kernel, with the CPU
  seconds Chromium's processes spent until then (less sensitive than the wall
  time to what else the machine runs) and the synchronous ``/api/drive``
  requests the kernel's start made;
- ``check``: exercise 01's self-check cell alone, with the solution's answer
  in its answer cell and the cells above it already run.

Goals: a kernel in at most 20 s (issue 28), the check in at most 10 s (issue 22).
``python lite/bench.py [--runs 3]`` prints each run and the medians.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import drive  # noqa: E402  (lite/ is tooling, not a package)
import serve  # noqa: E402

EXERCISE = "exercises/01_snapshot_read.ipynb"
ALL_PASSED = re.compile(r"\b(\d+)/\1 checks passed")


def chromium_cpu_s() -> float:
    """User + system CPU seconds of this process's Chromium descendants so far."""
    import psutil
    total = 0.0
    for process in psutil.Process().children(recursive=True):
        try:
            if "chrom" in process.name():
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:            # gone meanwhile
            pass
    return total


def one_run(playwright, base: str) -> tuple:
    browser = drive.launch(playwright)
    try:
        page = browser.new_page()
        drive_calls = []
        page.context.on("request", lambda r: drive_calls.append(r.url)
                        if r.url.endswith("/api/drive") else None)
        index, answer = drive.solution_answer(ROOT / EXERCISE,
                                              ROOT / "solutions" / Path(EXERCISE).name)
        started = time.perf_counter()
        drive.open_notebook(page, base, EXERCISE, timeout_s=120)
        kernel = time.perf_counter() - started
        cpu, calls = chromium_cpu_s(), len(drive_calls)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        drive.set_cell_source(page, index, answer)
        cells = page.locator(".jp-Notebook .jp-Cell")
        last = cells.count() - 1
        for i in range(last):
            drive.run_cell(page, i)
        page.wait_for_function(drive.KERNEL_IDLE, timeout=60_000)
        output = cells.nth(last).locator(".jp-OutputArea-output")
        started = time.perf_counter()
        drive.run_cell(page, last)
        output.filter(has_text=ALL_PASSED).wait_for(timeout=60_000)
        check = time.perf_counter() - started
        return kernel, cpu, calls, check
    finally:
        browser.close()


def main(argv=None) -> None:
    from playwright.sync_api import sync_playwright
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--site", type=Path, default=serve.SITE, help="the built site (build/lite)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    server = serve.start(args.site)
    base = f"http://127.0.0.1:{server.server_port}"
    results = []
    with sync_playwright() as playwright:
        for run in range(args.runs):
            kernel, cpu, calls, check = one_run(playwright, base)
            results.append((kernel, cpu, check))
            print(f"run {run + 1}: kernel {kernel:.1f} s (Chromium CPU {cpu:.1f} s, "
                  f"{calls} /api/drive requests), exercise 01 check {check:.1f} s", flush=True)
    server.shutdown()
    kernel, cpu, check = (statistics.median(column) for column in zip(*results))
    print(f"median of {args.runs}: kernel {kernel:.1f} s (goal <= 20 s; Chromium CPU "
          f"{cpu:.1f} s), check {check:.1f} s (goal <= 10 s)")


if __name__ == "__main__":
    main()
