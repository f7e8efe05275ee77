"""Landlock (Linux >= 5.13): the kernel's file, network and signal sandbox for the grading child.

The child builds a :class:`Ruleset` before any student code runs, and each client
process enforces it (:meth:`Ruleset.enforce`) once its own disk is mounted (a
process under Landlock may mount nothing); :func:`restrict` does both at once.
After it, the process and everything it could start may only:

- read the directories in ``spec["read_dirs"]`` and the single files in
  ``spec["read_files"]``, list the directories in ``spec["list_dirs"]``;
- read, write, create and remove anything under ``workdir``;
- never ``execve`` a file, never connect or bind a TCP port (ABI >= 4),
  never signal a process outside the sandbox (ABI >= 6).

The restriction cannot be lifted. Without Landlock (another OS, an older or
differently built kernel) it returns why, and the audit hook of
:mod:`.child` remains the only file and process guard.
"""
from __future__ import annotations

import os
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
ABI_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
                 5: (1 << 16) - 1}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)   # + TRUNCATE, IOCTL_DEV


def restrict(workdir: str, spec: dict) -> str:
    """Restrict this process with Landlock; return ``"landlock ABI N"`` or why not."""
    rules = Ruleset(workdir, spec)
    try:
        return rules.enforce()
    finally:
        if rules.fd >= 0:
            os.close(rules.fd)


class Ruleset:
    """A Landlock ruleset built once (in the sandbox's template) and enforced by each
    process that needs it (:meth:`enforce`: two calls, in a client process).

    ``fd``: the ruleset (-1 if none could be built); ``layer``: ``"landlock ABI N"`` or
    why Landlock is unavailable. Rules are bound to the files they name, so the ruleset
    holds wherever those files are mounted when it is enforced.
    """

    def __init__(self, workdir: str, spec: dict):
        self.fd, self.layer = -1, ""
        if not sys.platform.startswith("linux"):
            self.layer = f"unavailable: {sys.platform} is not Linux"
            return
        try:
            import ctypes
        except ImportError as exc:
            self.layer = f"unavailable: {exc}"
            return
        self.ctypes, self.libc = ctypes, ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.fd, self.layer = _build(ctypes, self.libc, workdir, spec)

    def enforce(self) -> str:
        """Restrict this process (and all it starts) for good; ``"landlock ABI N"`` or why
        not. The ruleset's descriptor stays open (a fork closes its own copy)."""
        if self.fd < 0:
            return self.layer
        errno = self.ctypes.get_errno
        if self.libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"unavailable: prctl: {os.strerror(errno())}"
        if self.libc.syscall(SYS_RESTRICT_SELF, self.fd, self.ctypes.c_uint32(0)) != 0:
            return f"unavailable: restrict_self: {os.strerror(errno())}"
        return self.layer


def _build(ctypes, libc, workdir: str, spec: dict) -> tuple:
    """``(ruleset fd, "landlock ABI N")``, or ``(-1, why not)``: writes beneath ``workdir``
    only, reads as ``spec`` says (see :func:`restrict`)."""
    abi = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return -1, f"unavailable: {os.strerror(ctypes.get_errno())}"
    handled = ABI_FS_RIGHTS[min(abi, 5)]
    ruleset = _ruleset(ctypes, libc, abi, handled)
    if ruleset < 0:
        return -1, f"unavailable: create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        allow = _rule_adder(ctypes, libc, ruleset, handled)
        allow(workdir, handled & ~EXECUTE)
        for path in spec.get("read_dirs", ()):
            allow(path, READ_FILE | READ_DIR)
        for path in spec.get("list_dirs", ()):
            allow(path, READ_DIR)
        for path in spec.get("read_files", ()):
            allow(path, READ_FILE)
        allow("/dev/null", READ_FILE | WRITE_FILE)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset, f"landlock ABI {abi}"


def _ruleset(ctypes, libc, abi: int, handled: int) -> int:
    """A new ruleset handling every file right of ``abi``, TCP (>= 4) and scopes (>= 6)."""
    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    attr = RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                       SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    return libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                        ctypes.c_uint32(0))


def _rule_adder(ctypes, libc, ruleset: int, handled: int):
    """``allow(path, rights)``: grant ``rights`` beneath ``path`` (file rights for a file)."""
    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    def allow(path, rights):
        if not os.path.exists(path):
            return
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            if not os.path.isdir(path):
                rights &= FILE_RIGHTS
            rule = PathBeneath(rights & handled, fd)
            if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule),
                            ctypes.c_uint32(0)) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(fd)
    return allow
