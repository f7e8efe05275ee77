"""The grading child: one fresh interpreter per notebook, locked down before student code runs.

``percolator grade`` (:mod:`.grader`) starts ``python -I -B -c BOOT`` in a new
session, in a throwaway working directory, with a scrubbed environment, and
hands it a job on stdin. :func:`child_main` then, in this order:

1. imports everything grading needs (while the grader's sources are readable);
2. sets rlimits (address space, CPU seconds, file size, open files, processes,
   no core dumps);
3. where the kernel has Landlock, restricts itself: writes only under the
   working directory, reads only the Python installation and the kit's
   package (not ``grading/``, not the hidden reference's source), no
   ``execve``, no TCP, no signals to processes outside the sandbox;
4. installs :func:`make_guard` with ``sys.addaudithook`` (it cannot be
   removed): no file written outside the working directory, no reading of
   the repository (solutions, tests, exercises, .git), the grader's modules,
   the hidden reference or other submissions; no subprocess, fork, exec,
   kill, socket, ctypes, sub-interpreter or rlimit change;
5. runs the pristine context cells, then replaces the hidden reference
   (:func:`hide`) by stubs raising :class:`~.framework.ReferenceHidden`;
6. runs the student's answer cells, then each scenario (with a time limit),
   and writes the observations as one JSON document to its result fd.

The verdicts are never computed here: the parent judges the observations.
"""
from __future__ import annotations

import builtins
import gc
import importlib
import json
import os
import pathlib
import posix
import resource
import signal
import stat
import sys
import types
import weakref

from .framework import ANSWER_FILENAME, ReferenceHidden, ScenarioTimeout, describe_exception, \
    run_scenario

BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
        "from percolator_ref.grading.sandbox import child_main; child_main()")

DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill", "os.startfile",
    "os.link", "os.symlink", "resource.setrlimit", "resource.prlimit",
    "cpython.PyInterpreterState_New", "pty.spawn", "os.setuid", "os.setgid",
})
DENIED_PREFIXES = ("socket.", "ctypes.", "_winapi.", "winreg.", "msvcrt.")
DENIED_MODULES = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters",
                            "_xxinterpchannels", "socket", "_socket", "ssl", "_ssl"})
WRITE_EVENTS = (          # (event, indices of the paths it writes); a tuple: immutable
    ("os.remove", (0,)), ("os.rmdir", (0,)), ("os.mkdir", (0,)), ("os.rename", (0, 1)),
    ("os.chmod", (0,)), ("os.chown", (0,)), ("os.utime", (0,)), ("os.truncate", (0,)),
    ("os.chflags", (0,)), ("os.lchflags", (0,)), ("os.setxattr", (0,)),
    ("os.removexattr", (0,)), ("os.mkfifo", (0,)), ("os.mknod", (0,)),
    ("shutil.rmtree", (0,)), ("shutil.chown", (0,)), ("shutil.copyfile", (1,)),
    ("shutil.copymode", (1,)), ("shutil.copystat", (1,)), ("shutil.move", (0, 1)),
    ("shutil.make_archive", (0,)), ("shutil.unpack_archive", (1,)),
)
PATH_TYPES = (str, bytes, pathlib.PosixPath, pathlib.PurePosixPath)
READ_EVENTS = frozenset({"os.listdir", "os.scandir", "glob.glob", "glob.glob/2"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


# -- the audit hook ------------------------------------------------------------

def resolve(path, _fspath=posix.fspath, _getcwd=posix.getcwd, _lstat=posix.lstat,
            _readlink=posix.readlink, _islnk=stat.S_ISLNK, _isinstance=isinstance,
            _bytes=bytes, _OSError=OSError, _PermissionError=PermissionError):
    """The absolute, symlink-free form of ``path`` (missing tails kept), from C primitives only.

    Every dependency is a default argument (setting ``__defaults__`` is an audited
    event the guard refuses), so student code cannot swap what this calls.
    """
    p = _fspath(path)
    if _isinstance(p, _bytes):
        p = p.decode("utf-8", "surrogateescape")
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    todo = [x for x in p.split("/") if x][::-1]
    done, hops = [], 0
    while todo:
        part = todo.pop()
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = "/" + "/".join(done + [part])
        try:
            mode = _lstat(candidate).st_mode
        except _OSError:
            done.append(part)
            continue
        if _islnk(mode):
            hops += 1
            if hops > 40:
                raise _PermissionError("sandbox: too many symbolic links")
            target = _readlink(candidate)
            if target.startswith("/"):
                done = []
            todo.extend([x for x in target.split("/") if x][::-1])
        else:
            done.append(part)
    return "/" + "/".join(done)


def make_guard(workdir: str, allow_read: tuple, deny_read: tuple, hard_deny: tuple,
               hidden_types: tuple):
    """The audit hook enforcing the sandbox's rules (its state is immutable defaults)."""
    def guard(event, args, _W=workdir.rstrip("/") + "/", _Wd=workdir.rstrip("/"),
              _allow=allow_read, _deny=deny_read, _hard=hard_deny, _hidden=hidden_types,
              _events=DENIED_EVENTS, _prefixes=DENIED_PREFIXES, _modules=DENIED_MODULES,
              _writes=WRITE_EVENTS, _reads=READ_EVENTS, _wflags=WRITE_FLAGS,
              _resolve=resolve, _lstat=posix.lstat, _isdir=stat.S_ISDIR, _pid=posix.getpid(),
              _isinstance=isinstance, _str=str, _bytes=bytes, _int=int, _len=len, _any=any,
              _bool=bool, _type=type, _paths=PATH_TYPES, _PE=PermissionError, _OSError=OSError):
        def inside(p):
            return p == _Wd or p.startswith(_W)

        def readable(p):
            if inside(p):
                return True
            if _any(p == h or p.startswith(h + "/") for h in _hard) or "/.git/" in p + "/":
                return False
            if p.startswith("/proc/") and p[6:].split("/")[0].isdigit() \
                    and p[6:].split("/")[0] != _str(_pid):
                return False
            if _any(p == a or p.startswith(a + "/") for a in _allow):
                return True
            return not _any(p == d or p.startswith(d + "/") for d in _deny)

        if event == "open":
            path, mode, flags = args
            if _type(path) is _int or path is None:
                return
            if _type(path) not in _paths:
                raise _PE("sandbox: open() takes a str, bytes or pathlib path during grading")
            p = _resolve(path)
            writing = (mode is not None and _any(c in _str(mode) for c in "wax+")) or \
                (mode is None and _isinstance(flags, _int) and flags & _wflags)
            if writing and not inside(p) and p != "/dev/null":
                raise _PE(f"sandbox: writing outside the grading directory is refused: {p}")
            if not writing and not readable(p):
                raise _PE(f"sandbox: reading {p} is refused during grading")
            if not inside(p):
                try:
                    if _isdir(_lstat(p).st_mode):
                        raise _PE(f"sandbox: opening the directory {p} is refused")
                except _OSError as exc:
                    if _isinstance(exc, _PE):
                        raise
            return
        if event in _events or event.startswith(_prefixes):
            raise _PE(f"sandbox: {event} is refused during grading")
        if event == "import" and args[0] in _modules:
            raise _PE(f"sandbox: importing {args[0]} is refused during grading")
        if event == "object.__setattr__" or event == "object.__delattr__":
            if args[0] in _hidden or (_len(args) > 1 and args[1] in
                                      ("__code__", "__defaults__", "__kwdefaults__")):
                raise _PE(f"sandbox: changing {args[1]!s} of a {_type(args[0]).__name__} is refused")
            return
        indices = [ix for ev, ix in _writes if ev == event]
        if indices:
            written = [args[i] for i in indices[0] if i < _len(args)]
            dir_fd = _any(_isinstance(a, _int) and not _isinstance(a, _bool)
                          for a in args[2:] if event == "os.rename") or \
                (_len(args) > 1 and _isinstance(args[-1], _int) and not _isinstance(args[-1], _bool))
            for a in written:
                if _type(a) is _int or a is None:
                    continue
                if _type(a) not in _paths:
                    raise _PE(f"sandbox: {event} takes a str, bytes or pathlib path during grading")
                text = _str(a) if _type(a) not in (_str, _bytes) else a
                if _isinstance(text, _bytes):
                    text = text.decode("utf-8", "surrogateescape")
                if not inside(_resolve(text)):
                    raise _PE(f"sandbox: {event} outside the grading directory is refused")
                if dir_fd and ".." in text.split("/"):
                    raise _PE(f"sandbox: {event} with dir_fd and a climbing path is refused")
            return
        if event in _reads and args and _isinstance(args[0], (_str, _bytes)):
            if not readable(_resolve(args[0])):
                raise _PE(f"sandbox: listing {args[0]!s} is refused during grading")
    return guard


# -- hiding the reference ----------------------------------------------------

def _stub(qualname: str):
    def hidden(*args, **kwargs):
        raise ReferenceHidden(f"the reference {qualname} is hidden during grading: "
                              "write the step yourself")
    hidden.__qualname__ = hidden.__name__ = qualname.rsplit(".", 1)[-1]
    return hidden


def _locate(target: str):
    module_name, _, qualname = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return module_name, qualname, obj


def _hide_class(cls, qualname: str, codes: list) -> None:
    for name, value in list(vars(cls).items()):
        fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(fn, types.FunctionType):
            codes.append(weakref.ref(fn.__code__))
            setattr(cls, name, _stub(f"{qualname}.{name}"))
        elif isinstance(value, property):
            setattr(cls, name, property(_stub(f"{qualname}.{name}")))


def _hide_function(fn, qualname: str, codes: list) -> None:
    codes.append(weakref.ref(fn.__code__))
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", {})
        for name in [n for n, v in list(namespace.items()) if v is fn]:
            setattr(module, name, _stub(qualname))


def hide(targets) -> tuple:
    """Replace each hidden reference by stubs; return ``(hidden classes, source files)``.

    Raises RuntimeError when a replaced function is still reachable afterwards.
    """
    codes, classes, files = [], [], []
    for target in targets:
        module_name, qualname, obj = _locate(target)
        module = sys.modules[module_name]
        files += [os.path.realpath(f) for f in (getattr(module, "__file__", None),
                                                getattr(module, "__cached__", None)) if f]
        if isinstance(obj, type):
            classes.append(obj)
            _hide_class(obj, qualname, codes)
        else:
            _hide_function(obj, qualname, codes)
        obj = None
    import linecache
    linecache.clearcache()
    gc.collect()
    alive = [ref() for ref in codes if ref() is not None]
    leftovers = [f"{f.__module__}.{f.__qualname__}" for f in gc.get_objects()
                 if isinstance(f, types.FunctionType) and any(f.__code__ is c for c in alive)]
    if leftovers:
        raise RuntimeError(f"cannot hide the reference: still reachable: {leftovers}")
    return tuple(classes), tuple(files)


# -- limits ---------------------------------------------------------------------

def set_limits(limits: dict) -> None:
    """Hard and soft rlimits from the job (``{"RLIMIT_AS": bytes, ...}``)."""
    for name, value in limits.items():
        if value is not None:
            resource.setrlimit(getattr(resource, name), (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a too-large file is an error, not death


def _alarm(signum, frame):
    raise ScenarioTimeout(_alarm.seconds)


# -- the child -------------------------------------------------------------------

def _run_cell(cell: dict, namespace: dict):
    filename = ANSWER_FILENAME.format(cell["id"]) if cell["kind"] == "answer" else \
        f"<context cell {cell['id']}>"
    exec(compile(cell["source"], filename, "exec"), namespace)


def _run(job: dict, report: dict) -> None:
    from . import exercise as exercise_module
    from .legacy import spec_of
    spec = spec_of(exercise_module(job["exercise"]), job["answer"])
    checks = {c.name: c for c in spec.checks}
    for target in spec.hidden:           # imported while its source is still readable
        _locate(target)
    set_limits(job["limits"])
    from . import landlock
    report["landlock"] = landlock.restrict(job["workdir"], job["landlock"])
    for name in list(sys.modules):
        if name in DENIED_MODULES or name.startswith("ctypes."):
            del sys.modules[name]
    os.chdir(job["workdir"])
    guard_args = (job["workdir"], tuple(job["allow_read"]), tuple(job["deny_read"]))
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    for cell in [c for c in job["cells"] if c["kind"] == "context"]:
        try:
            _run_cell(cell, namespace)
        except BaseException as exc:      # noqa: BLE001 - reported, not raised
            report["internal"] = f"context cell {cell['id']} failed: {describe_exception(exc)}"
            return
    hidden_types, hidden_files = hide(spec.hidden)
    sys.addaudithook(make_guard(*guard_args, tuple(job["hard_deny"]) + hidden_files, hidden_types))
    report["guarded"] = True
    _run_student(job, spec, checks, namespace, report)


def _run_student(job, spec, checks, namespace, report) -> None:
    for cell in [c for c in job["cells"] if c["kind"] == "answer"]:
        try:
            _run_cell(cell, namespace)
        except BaseException as exc:      # noqa: BLE001 - SystemExit too: the student's error
            report["answer_error"] = describe_exception(exc)
            return
    if spec.answer not in namespace:
        report["answer_error"] = f"your answer cells do not define {spec.answer}"
        return
    answer = namespace[spec.answer]
    signal.signal(signal.SIGALRM, _alarm)
    _alarm.seconds = job["scenario_timeout"]
    results = report["results"] = {}
    for k, name in enumerate(job["params"]):
        directory = os.path.join(job["workdir"], "scenarios", str(k))
        os.makedirs(directory)
        signal.setitimer(signal.ITIMER_REAL, job["scenario_timeout"])
        try:
            results[name] = run_scenario(checks[name], answer, job["params"][name], directory)
        except BaseException as exc:      # noqa: BLE001 - a timeout outside the scenario's try
            results[name] = {"error": describe_exception(exc)}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


def child_main() -> None:
    """Entry point in the grading child: read the job on stdin, report on its result fd."""
    sys.dont_write_bytecode = True
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    fd = job["result_fd"]
    report = {"nonce": job["nonce"], "guarded": False}
    try:
        _run(job, report)
    except BaseException as exc:          # noqa: BLE001 - whatever happened, report it
        report.setdefault("internal", f"the sandbox failed: {describe_exception(exc)}")
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(fd, data):]
    os._exit(0)
