"""A disk owned by the trusted world, reached from a client's ordinary file calls.

Exercise 5's oracle keeps its mark in a file. During grading the file lives in
the grader's world (:class:`~percolator_ref.grading.judge.disk.Disk`), not in the
sandbox: paths under :data:`~..channel.DISK_ROOT` (a directory that exists nowhere) are virtual, and while a client
of the world runs a call (:func:`serving`), ``open``/``io.open``,
``os.open``/``write``/``read``/``close``/``fsync``, ``os.replace``/``rename``,
``os.remove``/``unlink``, ``os.stat``/``lstat`` (so ``os.path.exists``),
``os.listdir`` and ``os.mkdir`` on them become ``disk`` messages to the world
(:mod:`..channel`); in a notebook, IPython's own ``open`` (which wraps
``io.open``) is routed too. Every other path goes to the real call unchanged. A write
reaches the disk when the file is flushed or closed (``os.write``: at once),
as one ``put`` of the file's whole content; opening for writing truncates or
creates at once; so the world sees every state a crash could leave.

A disk call from any other thread (a background writer the oracle started)
is refused with PermissionError: only the oracle's own calls reach its disk.
While a call is served, opening a real file for writing is reported to the
world (``stray``) and then done.
"""
from __future__ import annotations

import builtins
import errno
import io
import os
import posixpath
import stat
import sys
import threading
from typing import Optional

from ..channel import DISK_MAX_FILE, DISK_ROOT

FD_BASE = 1 << 20
_local = threading.local()
_real: dict = {}
_fds: dict = {}
_install_lock = threading.Lock()


# -- client side -------------------------------------------------------------------------

class serving:
    """``with serving(request):`` disk calls of this thread go to the world through ``request``."""

    def __init__(self, request):
        self.request = request

    def __enter__(self):
        install()
        self.saved = getattr(_local, "request", None)
        _local.request = self.request
        return self

    def __exit__(self, *exc):
        _local.request = self.saved
        return False


def virtual(path) -> Optional[str]:
    """The normalised virtual path, or None for a real one (or an fd)."""
    if isinstance(path, int):
        return None
    try:
        p = os.fspath(path)
    except TypeError:
        return None
    if isinstance(p, bytes):
        p = p.decode("utf-8", "surrogateescape")
    if not isinstance(p, str) or not p.startswith("/"):
        return None
    p = posixpath.normpath(p)
    return p if p == DISK_ROOT or p.startswith(DISK_ROOT + "/") else None


def call(fn: str, path: str, to=None, data=None, mode=None):
    """One disk message; an error the world reports becomes the OSError a disk raises."""
    request = getattr(_local, "request", None)
    if request is None:
        raise PermissionError(errno.EACCES, "the oracle's disk answers only the oracle's own "
                                            "calls (not a thread it started)", path)
    out = request({"op": "disk", "fn": fn, "path": path, "to": to, "data": data, "mode": mode})
    if isinstance(out, dict) and "errno" in out:
        raise OSError(int(out["errno"]), os.strerror(int(out["errno"])), path)
    return out


class VirtualFile(io.IOBase):
    """An open file of the world's disk: its content is buffered here, put on flush/close."""

    def __init__(self, path: str, mode: str, content: str):
        super().__init__()
        self.path, self.name, self.mode = path, path, mode
        self.binary = "b" in mode
        self.content = content
        self.pos = len(content) if "a" in mode else 0
        self.readable_ = "r" in mode or "+" in mode
        self.writable_ = any(m in mode for m in "wax+")
        self.dirty = False
        self.fd = None

    def readable(self):
        return self.readable_

    def writable(self):
        return self.writable_

    def seekable(self):
        return True

    def _out(self, text: str):
        return text.encode("latin-1") if self.binary else text

    def read(self, n=-1):
        self._check(self.readable_, "not readable")
        end = len(self.content) if n is None or n < 0 else self.pos + n
        text, self.pos = self.content[self.pos:end], min(end, len(self.content))
        return self._out(text)

    def readline(self, size=-1):
        self._check(self.readable_, "not readable")
        nl = self.content.find("\n", self.pos)
        end = len(self.content) if nl < 0 else nl + 1
        if size is not None and size >= 0:
            end = min(end, self.pos + size)
        text, self.pos = self.content[self.pos:end], end
        return self._out(text)

    def write(self, data):
        self._check(self.writable_, "not writable")
        text = data.decode("latin-1") if isinstance(data, (bytes, bytearray)) else str(data)
        if "a" in self.mode:
            self.pos = len(self.content)
        self.content = self.content[:self.pos] + text + self.content[self.pos + len(text):]
        self.pos += len(text)
        if len(self.content) > DISK_MAX_FILE:
            raise OSError(errno.EFBIG, "the oracle's state file is limited to 4 KiB", self.path)
        self.dirty = True
        return len(data)

    def seek(self, pos, whence=0):
        self.pos = max(0, pos if whence == 0 else self.pos + pos if whence == 1
                       else len(self.content) + pos)
        return self.pos

    def tell(self):
        return self.pos

    def truncate(self, size=None):
        self._check(self.writable_, "not writable")
        self.content = self.content[:self.pos if size is None else size]
        self.dirty = True
        return len(self.content)

    def flush(self):
        if self.dirty and not self.closed:
            call("put", self.path, data=self.content)
            self.dirty = False

    def fileno(self):
        if self.fd is None:
            self.fd = FD_BASE + len(_fds)
            _fds[self.fd] = self
        return self.fd

    def close(self):
        if not self.closed:
            try:
                self.flush()
            finally:
                super().close()

    def _check(self, ok: bool, what: str) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if not ok:
            raise io.UnsupportedOperation(what)


class DirectoryHandle:
    """``os.open(DISK_ROOT)``: a descriptor of the disk's directory, for ``os.fsync`` after a rename."""

    def __init__(self):
        self.path, self.closed = DISK_ROOT, False
        self.fd = FD_BASE + len(_fds)
        _fds[self.fd] = self

    def flush(self):
        pass

    def close(self):
        self.closed = True

    def read(self, n=-1):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", DISK_ROOT)

    write = read


def open_virtual(path: str, mode: str = "r") -> VirtualFile:
    base = mode.replace("b", "").replace("t", "")
    if base.startswith("r"):
        content = call("read", path)
    elif base.startswith("w") or base.startswith("x"):
        content = call("open", path, mode=base[0])
    elif base.startswith("a"):
        content = call("open", path, mode="a")
    else:
        raise ValueError(f"invalid mode: {mode!r}")
    return VirtualFile(path, mode, content)


def _open(file, mode="r", *args, **kwargs):
    if isinstance(file, int) and file in _fds:
        return _fds[file]
    path = virtual(file)
    if path is None:
        if getattr(_local, "request", None) is not None and any(m in str(mode) for m in "wax+"):
            call("stray", str(os.fspath(file)) if not isinstance(file, int) else f"fd {file}")
        return _real["open"](file, mode, *args, **kwargs)
    return open_virtual(path, mode)


def _os_open(path, flags, mode=0o777, *, dir_fd=None):
    p = virtual(path)
    if p is None:
        if getattr(_local, "request", None) is not None and flags & (os.O_WRONLY | os.O_RDWR):
            call("stray", str(os.fspath(path)))
        return _real["os.open"](path, flags, mode, dir_fd=dir_fd)
    if p == DISK_ROOT:
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", p)
        return DirectoryHandle().fd
    if flags & os.O_CREAT and flags & os.O_EXCL:
        f = open_virtual(p, "xb+")
    elif flags & os.O_TRUNC:
        f = open_virtual(p, "wb+")
    elif flags & os.O_CREAT:
        f = open_virtual(p, "ab+" if flags & os.O_APPEND else "rb+" if call("stat", p) else "wb+")
    else:
        f = open_virtual(p, "rb+" if flags & (os.O_WRONLY | os.O_RDWR) else "rb")
    return f.fileno()


def _fd_call(name):
    real = _real[f"os.{name}"]

    def shim(fd, *args):
        key = fd.fileno() if isinstance(fd, VirtualFile) else fd      # os.fsync(f) takes a file too
        f = _fds.get(key) if isinstance(key, int) else None
        if f is None:
            return real(fd, *args)
        if name == "write":
            n = f.write(args[0])
            f.flush()
            return n
        if name == "read":
            return f.read(args[0])
        if name == "close":
            _fds.pop(fd, None)
            return f.close()
        f.flush()
        return call("sync", f.path)          # fsync, fdatasync
    return shim


def _two_paths(name):
    real = _real[f"os.{name}"]

    def shim(src, dst, *args, **kwargs):
        a, b = virtual(src), virtual(dst)
        if a is None and b is None:
            return real(src, dst, *args, **kwargs)
        if a is None or b is None:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return call("replace", a, to=b)
    return shim


def _one_path(name, fn):
    real = _real[f"os.{name}"]

    def shim(*args, **kwargs):
        p = virtual(args[0]) if args else None                  # os.listdir() lists "."
        return real(*args, **kwargs) if p is None else fn(p)
    return shim


def _stat(p):
    found = call("stat", p)
    if not found:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", p)
    kind = stat.S_IFDIR | 0o755 if found.get("dir") else stat.S_IFREG | 0o644
    return os.stat_result((kind, 0, 0, 1, 0, 0, found.get("size", 0), 0, 0, 0))


def _mkdir(p):
    if p == DISK_ROOT:
        raise FileExistsError(errno.EEXIST, "File exists", p)
    raise PermissionError(errno.EACCES, "the oracle's disk has no directories", p)


def install() -> None:
    """Route the virtual paths' file calls to the world (once per process; real paths unchanged)."""
    with _install_lock:
        if _real:
            return
        _real.update({"open": builtins.open, **{f"os.{n}": getattr(os, n) for n in (
            "open", "write", "read", "close", "fsync", "fdatasync", "replace", "rename",
            "remove", "unlink", "stat", "lstat", "listdir", "mkdir")}})
        builtins.open = io.open = _open
        shell = sys.modules.get("IPython.core.interactiveshell")     # a notebook's own ``open``
        if shell is not None and getattr(shell, "io_open", None) is _real["open"]:
            shell.io_open = _open                                     # wraps io.open: route it too
        os.open = _os_open
        for name in ("write", "read", "close", "fsync", "fdatasync"):
            setattr(os, name, _fd_call(name))
        os.replace, os.rename = _two_paths("replace"), _two_paths("rename")
        os.remove = _one_path("remove", lambda p: call("remove", p))
        os.unlink = _one_path("unlink", lambda p: call("remove", p))
        os.stat, os.lstat = _one_path("stat", _stat), _one_path("lstat", _stat)
        os.listdir = _one_path("listdir", lambda p: call("list", p))
        os.mkdir = _one_path("mkdir", _mkdir)
