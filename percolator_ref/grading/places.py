"""Which folders a grading child is denied, named without naming any one submission.

A child's job lists the places its sandbox refuses to read. Listing every
submission's path there would tell a notebook its classmates' names; the job
lists the outermost folders that hold the notebooks instead (the class folder,
the folder of unpacked zips), which deny the same files.
"""
from __future__ import annotations

import os

from .sandbox import inside


def private_roots(paths) -> tuple:
    """The outermost folders holding ``paths`` (real paths, sorted)."""
    folders = sorted({os.path.dirname(os.path.realpath(p)) for p in paths})
    return tuple(f for f in folders if not any(f != g and inside(f, g) for g in folders))
