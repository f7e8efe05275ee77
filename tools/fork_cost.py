"""What one client process costs before it does anything (issue 27 item 7: where the rest goes).

Forks this process N times after importing what a sandboxed client imports (the
template's state, ``gc.freeze()``-d as the template does) and prints the CPU each fork
costs its child and this parent, for: a fork that exits at once; one that reads every
module's namespace (as a client's first calls do: each object it touches has its
reference count written, so the page it lies on is copied); one that builds a
``Cluster``. Copy-on-write faults, not Python, are most of a client's fixed cost:

    nice -n 10 .venv/bin/python tools/fork_cost.py          # 200 forks each
    ... --forks 1000

A measurement under whatever load the machine has, never asserted.
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from percolator_ref.cluster import Cluster                        # noqa: E402
from percolator_ref.grading.client import host, roles              # noqa: E402,F401
from percolator_ref.grading.sandbox import processes               # noqa: E402,F401


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def per_fork(body, forks: int) -> tuple:
    """``(ms of CPU in each child, ms in this parent)`` for ``forks`` forks running ``body``."""
    kids, own = children_cpu(), time.process_time()
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            try:
                body()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return (1000 * (children_cpu() - kids) / forks, 1000 * (time.process_time() - own) / forks)


def touch_modules() -> None:
    for module in list(sys.modules.values()):
        for _ in list(getattr(module, "__dict__", {}).values()):
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=200)
    args = parser.parse_args()
    if args.forks < 1:
        parser.error(f"--forks must be a positive number, got {args.forks}")
    gc.collect()
    gc.freeze()
    for label, body in (("fork, exit", lambda: None), ("read every module", touch_modules),
                        ("build a Cluster", Cluster)):
        child, parent = per_fork(body, args.forks)
        print(f"{label:20s} {child:6.2f} ms in the child, {parent:5.2f} ms in the parent")
    print(f"this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
