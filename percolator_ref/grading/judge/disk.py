"""The trusted side of exercise 5's virtual disk: the world's files, and the calls that change them.

The student's oracle reaches it from its ordinary file calls, which the client
side (:mod:`percolator_ref.grading.client.vdisk`) turns into ``disk`` messages
(:mod:`..channel`); the world (:class:`~.ex05_oracle.OracleWorld`) applies each
one here. Every call that changes the disk is a crash point.
"""
from __future__ import annotations

import errno
from typing import Optional

from ..channel import DISK_MAX_FILE, DISK_MUTATIONS, DISK_ROOT


class Disk:
    """The world's disk: ``{name: text}`` in the flat directory :data:`DISK_ROOT`.

    ``apply(fn, path, to, data, mode)`` -> the reply (an ``{"errno"}`` dict on an
    error). ``mutations`` counts the calls that change it (each a crash point);
    ``kinds`` names them in order (``"put"``: a write, also a torn crash point).
    """

    def __init__(self):
        self.files: dict = {}
        self.mutations = 0
        self.kinds: list = []
        self.strays: list = []

    def name(self, path: str) -> Optional[str]:
        if path == DISK_ROOT:
            return ""
        if not path.startswith(DISK_ROOT + "/") or len(path) > 200:
            return None
        name = path[len(DISK_ROOT) + 1:]
        return name if name and "/" not in name and name not in (".", "..") else None

    def apply(self, fn: str, path: str, to=None, data=None, mode=None):
        if fn == "stray":
            self.strays.append(path[:200])
            return None
        name = self.name(path)
        if name is None:
            return {"errno": errno.EACCES}
        if fn in DISK_MUTATIONS:
            self.mutations += 1
            self.kinds.append(fn)
        return getattr(self, "_" + fn)(name, to, data, mode)

    def _stat(self, name, to, data, mode):
        if name == "":
            return {"dir": True}
        return {"size": len(self.files[name])} if name in self.files else None

    def _read(self, name, to, data, mode):
        if name not in self.files:
            return {"errno": errno.EISDIR if name == "" else errno.ENOENT}
        return self.files[name]

    def _list(self, name, to, data, mode):
        return sorted(self.files) if name == "" else {"errno": errno.ENOTDIR}

    def _open(self, name, to, data, mode):
        if name == "":
            return {"errno": errno.EISDIR}
        if mode == "x" and name in self.files:
            return {"errno": errno.EEXIST}
        if mode in ("w", "x") or name not in self.files:
            self.files[name] = ""
        return self.files[name]

    def torn(self, path: str, data, keep=lambda n: n // 2) -> None:
        """A crash in the middle of a write of ``data`` to ``path``: the file holds its first
        ``keep(len(data))`` characters (default: half, rounded down), the rest never reached the
        disk (a write into a file ``open(path, "w")`` emptied, or a new one, leaves a prefix of
        what it wrote)."""
        if isinstance(data, str) and self.name(path):
            self.apply("put", path, data=data[:keep(len(data))])

    def _put(self, name, to, data, mode):
        if name == "" or not isinstance(data, str) or len(data) > DISK_MAX_FILE:
            return {"errno": errno.EINVAL}
        self.files[name] = data
        return None

    def _replace(self, name, to, data, mode):
        target = self.name(to) if isinstance(to, str) else None
        if not name or not target:
            return {"errno": errno.EINVAL}
        if name not in self.files:
            return {"errno": errno.ENOENT}
        self.files[target] = self.files.pop(name)
        return None

    def _remove(self, name, to, data, mode):
        if name not in self.files:
            return {"errno": errno.ENOENT}
        del self.files[name]
        return None

    def _sync(self, name, to, data, mode):
        return None
