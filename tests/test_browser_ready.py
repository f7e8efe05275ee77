"""What the browser site runs offline needs no pandas, no matplotlib, no thread, no subprocess.

Pyodide has no threads or subprocesses, and the site serves no pandas or
matplotlib (Pyodide would fetch them from its CDN). In a CPython child with
all four made unavailable, every solution notebook runs top to bottom and
passes its self-check, and the stepper steps, crashes and branches: what the
browser tests (tests/test_lite.py) check for exercise 01 and notebook 02
holds for every exercise, and stays so as the kit changes.
"""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))

BROWSER_LIKE = textwrap.dedent("""
    import subprocess, sys, threading
    sys.modules["pandas"] = None                  # import pandas -> ImportError
    sys.modules["matplotlib"] = None

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    def no_process(*args, **kwargs):
        raise OSError("no subprocesses here")
    threading.Thread.start = no_thread
    subprocess.Popen.__init__ = no_process
""")


def run_browser_like(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BROWSER_LIKE + code], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def code_cells(path: Path) -> list:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.stem)
def test_a_solved_exercise_passes_its_check_without_pandas_threads_or_subprocesses(solution):
    cells = code_cells(solution)
    assert not [c for c in cells if c.lstrip().startswith(("%", "!"))], "magics need IPython"
    program = ("namespace = {}\n"
               f"for cell in {cells!r}:\n"
               "    exec(compile(cell, 'cell', 'exec'), namespace)\n")
    done = run_browser_like(program, solution.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checks passed" in done.stdout and "FAIL" not in done.stdout, done.stdout[-2000:]


def test_the_stepper_steps_crashes_and_branches_without_them():
    program = textwrap.dedent("""
        from percolator_ref.viz import two_transfers_stepper
        s = two_transfers_stepper()
        w = s.widget()
        for _ in range(3):
            w.click("Step")
        w.click("Back")
        w.choice.value = "T8"
        w.click("Step")
        assert "T8 get Joe" in w.note.value, w.note.value
        s.crash("T7")
        s.run()
        print(s.frame.status)
    """)
    done = run_browser_like(program, ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "T7: client crashed" in done.stdout


def test_notebook_05_and_08_experiments_write_nothing_to_stderr_where_threads_cannot_start():
    """Building a tqdm bar, even a disabled one, starts its monitor thread; where threads
    cannot start (Pyodide) tqdm warns on stderr, under notebook 05's and 08's cells on the
    site. With progress off, the experiments build no bar."""
    done = run_browser_like(textwrap.dedent("""
        import warnings
        from tqdm import TqdmMonitorWarning
        warnings.simplefilter("error", TqdmMonitorWarning)
        from percolator_ref.workloads import indexing as ix
        from percolator_ref.sim import Calibration, ScaleSettings, sweep
        assert ix.change_rate_experiment(5, shares=(0.2,), seed=0)[0].pages_changed == 1
        fixed = Calibration(row_transaction_s=1.8e-05, worker_cpu_s=6.3e-06, oracle_request_s=1e-05,
                            oracle_timestamp_s=1.2e-08, lock_service_s=1.2e-07,
                            rpc_round_trip_s=1.2e-05, source="fixed")
        assert [p["machines"] for p in sweep([1], ScaleSettings(reference_machines=1, seed=0),
                                             fixed)["points"]] == [1]
        print("ran")
    """), ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ran", done.stderr[-2000:]
    assert done.stderr == ""
