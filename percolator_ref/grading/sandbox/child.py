"""The grading child: one fresh interpreter per notebook, locked down before student code runs.

``percolator grade`` (:mod:`..grade.grader`) starts ``python -I -B -c BOOT`` in a new
session, in a throwaway working directory, with a scrubbed environment, and
hands it a job on stdin. :func:`child_main` then, in this order:

1. imports everything grading needs (while the grader's sources are readable):
   the exercise's spec and roles (:func:`percolator_ref.grading.roles`), never its
   checks or the grader;
2. sets rlimits (address space, CPU seconds, file size, open files, processes,
   no core dumps);
3. makes the user namespace in which each client process will mount its own
   disk (:mod:`.space`), and, where the kernel has Landlock, the ruleset each
   client process enforces: writes only in its own folder, reads only the
   Python installation and the kit's package (not ``grading/``, not the hidden
   reference's source), no ``execve``, no TCP, no signals to processes outside
   the sandbox;
4. runs the pristine context cells, then replaces the hidden reference
   (:func:`hide`) by stubs raising :class:`~..framework.ReferenceHidden`, and
   compiles the answer cells: this state is the template of every client;
5. has one process forked per client incarnation (:mod:`.processes`): each
   mounts its own disk on the one client folder and covers ``/proc``
   (:mod:`.space`), enforces the Landlock ruleset, closes every descriptor but
   its own pipes, installs a seccomp filter (no reading or changing another
   process's state, no pid, no signals, no file locks), moves into its folder,
   installs :func:`make_guard` with ``sys.addaudithook`` (it cannot be
   removed): no file written outside that folder, no reading of the
   repository (solutions, tests, exercises, .git), the grader's modules, the
   hidden reference, other submissions or the other clients' folders; no
   subprocess, fork, exec, kill, socket, ctypes, sub-interpreter or rlimit
   change, and, while a step is hidden, no import of a variant the exercise
   did not load (:data:`VARIANTS`); then it runs the answer cells and serves
   one client;
6. hands each client's pipes to the grader (which then talks to it directly)
   and kills it when the world says so, until the grader closes the channel,
   and writes a short JSON report (its layers, the answer cells' error) to its
   result fd. This process never runs student code.

The verdicts are never computed here: the grader's world judges its own record.
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

from ..framework import ANSWER_FILENAME, ReferenceHidden, describe_exception
from .processes import Template, probe, to_world
from .router import Router
from .seccomp import Seal, sibling_filter

BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
        "from percolator_ref.grading.sandbox.child import child_main; child_main()")

DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill", "os.startfile",
    "os.link", "os.symlink", "resource.setrlimit", "resource.prlimit",
    "cpython.PyInterpreterState_New", "pty.spawn", "os.setuid", "os.setgid",
    "fcntl.ioctl",                    # FS_IOC_SETFLAGS: immutable / append-only flags
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
FD_EVENTS = frozenset({"os.chmod", "os.chown", "os.utime", "os.truncate", "os.chflags",
                       "os.setxattr", "os.removexattr"})
"""Path events whose path may be a file descriptor (fchmod, fchown, futimes, ...)."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""The only device nodes the child may open."""
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


def inside(p: str, workdir: str, _len=len) -> bool:
    """Is the resolved path ``p`` the working directory or below it?"""
    return p == workdir or (p.startswith(workdir) and p[_len(workdir):_len(workdir) + 1] == "/")


def under(p: str, roots: tuple, _any=any, _inside=inside) -> bool:
    return _any(_inside(p, r) for r in roots)


def readable(p: str, rules: tuple, _inside=inside, _under=under, _str=str) -> bool:
    """The read rule: own work dir yes; secrets, .git, other processes no; else allow/deny."""
    workdir, allow, deny, hard, pid = rules
    if _inside(p, workdir):
        return True
    if _under(p, hard) or "/.git/" in p + "/":
        return False
    head = p[6:].split("/")[0] if p.startswith("/proc/") else ""
    if head.isdigit() and head != _str(pid):
        return False
    return _under(p, allow) or not _under(p, deny)


def denied_module(args, modules, _str=str, _isinstance=isinstance, _len=len) -> bool:
    """Is this ``import`` event a denied module, under its name or another (a file's name)?

    ``spec_from_file_location("x._posixsubprocess", path)`` loads the extension
    under a name the plain check would let pass.
    """
    name = args[0] if _isinstance(args[0], _str) else ""
    if name in modules or name.rsplit(".", 1)[-1] in modules:
        return True
    path = args[1] if _len(args) > 1 and _isinstance(args[1], _str) else ""
    return path.rsplit("/", 1)[-1].split(".", 1)[0] in modules


def fd_inside(event, fd, workdir: str, device=None, _readlink=posix.readlink, _fstat=posix.fstat,
              _str=str, _inside=inside, _OSError=OSError, _PE=PermissionError) -> None:
    """Refuse ``event`` on file descriptor ``fd`` unless it is a file inside the work dir:
    one of the work dir's own disk when it has one (``device``: its ``st_dev``; a client
    process has no ``/proc``), else one whose ``/proc/self/fd`` link names a path inside."""
    if device is not None:
        try:
            if _fstat(fd).st_dev == device:
                return
        except _OSError:
            pass
        raise _PE(f"sandbox: {event} on a file descriptor outside the grading directory is refused")
    try:
        target = _readlink("/proc/self/fd/" + _str(fd))
    except _OSError:
        target = ""
    if not (target.startswith("/") and _inside(target, workdir)):
        raise _PE(f"sandbox: {event} on a file descriptor outside the grading directory is refused")


def check_open(args, rules: tuple, _type=type, _int=int, _str=str, _any=any,
               _isinstance=isinstance, _paths=PATH_TYPES, _wflags=WRITE_FLAGS, _resolve=resolve,
               _inside=inside, _readable=readable, _lstat=posix.lstat, _isdir=stat.S_ISDIR,
               _ischr=stat.S_ISCHR, _isblk=stat.S_ISBLK, _devices=DEVICES,
               _PE=PermissionError, _OSError=OSError) -> None:
    """The rule for the ``open`` event: write inside, read what :func:`readable` allows."""
    path, mode, flags = args
    if _type(path) is _int or path is None:
        return
    if _type(path) not in _paths:
        raise _PE("sandbox: open() takes a str, bytes or pathlib path during grading")
    p = _resolve(path)
    writing = (mode is not None and _any(c in _str(mode) for c in "wax+")) or \
        (mode is None and _isinstance(flags, _int) and flags & _wflags)
    if writing and not _inside(p, rules[0]) and p != "/dev/null":
        raise _PE(f"sandbox: writing outside the grading directory is refused: {p}")
    if not writing and not _readable(p, rules):
        raise _PE(f"sandbox: reading {p} is refused during grading")
    if not _inside(p, rules[0]):
        try:
            mode_bits = _lstat(p).st_mode
        except _OSError:
            return
        if _isdir(mode_bits):         # no directory fd outside: dir_fd paths stay inside
            raise _PE(f"sandbox: opening the directory {p} is refused")
        if (_ischr(mode_bits) or _isblk(mode_bits)) and p not in _devices:
            raise _PE(f"sandbox: opening the device {p} is refused")


def check_write(event, args, indices, workdir: str, device=None, _len=len, _type=type, _int=int,
                _str=str, _bytes=bytes, _bool=bool, _any=any, _isinstance=isinstance, _paths=PATH_TYPES,
                _resolve=resolve, _inside=inside, _fd_events=FD_EVENTS, _fd_inside=fd_inside,
                _PE=PermissionError) -> None:
    """The rule for path-changing events: every path they write is inside the work dir,
    and a file descriptor they change (``os.chmod(fd, ...)``) is one of a file inside it."""
    ints = [a for a in args[1:] if _isinstance(a, _int) and not _isinstance(a, _bool)]
    dir_fd = _len(args) > 1 and (_isinstance(args[-1], _int) and not _isinstance(args[-1], _bool)
                                 or (event == "os.rename" and _len(ints) > 0))
    for a in [args[i] for i in indices if i < _len(args)]:
        if _type(a) is _int and event in _fd_events:
            _fd_inside(event, a, workdir, device)
            continue
        if _type(a) is _int or a is None:
            continue
        if _type(a) not in _paths:
            raise _PE(f"sandbox: {event} takes a str, bytes or pathlib path during grading")
        text = a if _type(a) in (_str, _bytes) else _str(a)
        if _isinstance(text, _bytes):
            text = text.decode("utf-8", "surrogateescape")
        if not _inside(_resolve(text), workdir):
            raise _PE(f"sandbox: {event} outside the grading directory is refused")
        if dir_fd and ".." in text.split("/"):
            raise _PE(f"sandbox: {event} with dir_fd and a climbing path is refused")


def from_file(fn) -> bool:
    """Is ``fn`` a function compiled from a file (the kit, the standard library, frozen
    or not, the guard, whose state is its defaults)? Not: the student's own, compiled from
    an answer cell, or generated (``namedtuple`` sets its ``__new__``'s defaults); those
    may take defaults."""
    name = getattr(getattr(fn, "__code__", None), "co_filename", None)
    return not isinstance(name, str) or not name.startswith("<") or name.startswith("<frozen")


VARIANTS = "percolator_ref.variants."
"""TiKV's versions of the paper's steps (``lock_ttl.TTLCleanup.check_txn_status`` decides at
the primary as the hidden ``resolve_primary`` does): while a step is hidden, a variant the
exercise did not load before the answer cells may not be imported."""


def make_guard(workdir: str, allow_read: tuple, deny_read: tuple, hard_deny: tuple,
               hidden_types: tuple, sealed: tuple = (), device=None):
    """The audit hook enforcing the sandbox's rules (its state is immutable defaults).
    ``sealed``: prefixes of module names that may no longer be imported (:data:`VARIANTS`);
    ``device``: the ``st_dev`` of the work dir's own disk, if it has one (:func:`fd_inside`)."""
    rules = (workdir.rstrip("/"), tuple(allow_read), tuple(deny_read), tuple(hard_deny),
             posix.getpid())

    def guard(event, args, _rules=rules, _hidden=hidden_types, _sealed=tuple(sealed),
              _device=device,
              _events=DENIED_EVENTS,
              _prefixes=DENIED_PREFIXES, _modules=DENIED_MODULES, _writes=WRITE_EVENTS,
              _reads=READ_EVENTS, _open=check_open, _write=check_write, _readable=readable,
              _denied_module=denied_module, _from_file=from_file,
              _resolve=resolve, _len=len, _type=type, _str=str, _bytes=bytes,
              _isinstance=isinstance, _PE=PermissionError):
        if event == "open":
            return _open(args, _rules)
        if event in _events or event.startswith(_prefixes):
            raise _PE(f"sandbox: {event} is refused during grading")
        if event == "import" and _denied_module(args, _modules):
            raise _PE(f"sandbox: importing {args[0]!s} is refused during grading")
        if event == "import" and _sealed and _isinstance(args[0], _str) \
                and args[0].startswith(_sealed):
            raise _PE(f"sandbox: importing {args[0]!s} is refused while this exercise's step "
                      "is hidden (a variant holds a version of it)")
        if event == "object.__setattr__" or event == "object.__delattr__":
            if args[0] in _hidden or (_len(args) > 1 and (args[1] == "__code__" or (
                    args[1] in ("__defaults__", "__kwdefaults__") and _from_file(args[0])))):
                raise _PE(f"sandbox: changing {args[1]!s} of a {_type(args[0]).__name__} is refused")
            return
        for name, indices in _writes:
            if name == event:
                return _write(event, args, indices, _rules[0], _device)
        if event in _reads and args and _isinstance(args[0], (_str, _bytes)):
            if not _readable(_resolve(args[0]), _rules):
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
    """``(module name, qualname, owner, object)`` of ``"module:Qual.name"``."""
    module_name, _, qualname = target.partition(":")
    owner = obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        owner, obj = obj, getattr(obj, part)
    return module_name, qualname, owner, obj


STUB_CODE = _stub("stub").__code__


def _hide_class(cls, qualname: str, codes: list) -> None:
    for name, value in list(vars(cls).items()):
        fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(fn, types.FunctionType) and fn.__code__ is not STUB_CODE:
            codes.append(weakref.ref(fn.__code__))
            setattr(cls, name, _stub(f"{qualname}.{name}"))
        elif isinstance(value, property):
            if isinstance(value.fget, types.FunctionType) and value.fget.__code__ is not STUB_CODE:
                codes.append(weakref.ref(value.fget.__code__))
            setattr(cls, name, property(_stub(f"{qualname}.{name}")))


def _hide_function(fn, qualname: str, owner, codes: list) -> None:
    """Replace ``fn`` in its class (a method) or in every module that holds it."""
    if fn.__code__ is STUB_CODE:
        return
    codes.append(weakref.ref(fn.__code__))
    if isinstance(owner, type):
        setattr(owner, qualname.rsplit(".", 1)[-1], _stub(qualname))
        return
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
        module_name, qualname, owner, obj = _locate(target)
        module = sys.modules[module_name]
        files += [os.path.realpath(f) for f in (getattr(module, "__file__", None),
                                                getattr(module, "__cached__", None)) if f]
        if isinstance(obj, type):
            classes.append(obj)
            _hide_class(obj, qualname, codes)
        else:
            _hide_function(obj, qualname, owner, codes)
        obj = owner = None
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


# -- the child -------------------------------------------------------------------

def _run_cell(cell: dict, namespace: dict):
    filename = ANSWER_FILENAME.format(cell["id"]) if cell["kind"] == "answer" else \
        f"<context cell {cell['id']}>"
    exec(compile(cell["source"], filename, "exec"), namespace)


def _run(job: dict, report: dict) -> None:
    from .. import roles
    from ..framework import spec_of
    spec = spec_of(roles(job["exercise"]), job["answer"])      # the roles, not the checks
    targets = tuple(job.get("hidden") or spec.hidden)   # and their helpers (:mod:`.reach`)
    for target in targets:               # imported while its source is still readable
        _locate(target)
    set_limits(job["limits"])
    from .landlock import Ruleset
    from .space import ClientSpace
    space = ClientSpace(job["workdir"])
    ruleset = Ruleset(space.room, job["landlock"])    # writes below the clients' folders only
    report["landlock"], report["spaces"] = ruleset.layer, space.layer
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
    hidden_types, hidden_files = hide(targets)
    hard = tuple(job["hard_deny"]) + hidden_files + (job["workdir"],)   # but its own folder
    sealed = (VARIANTS,) if targets else ()

    def guard(folder: str):           # in a client process: no /proc (:mod:`.space`)
        device = os.stat(folder).st_dev if space.own else None
        return make_guard(folder, *guard_args[1:], hard + ("/proc",), hidden_types, sealed,
                          device)
    codes, error = _compile_answer(job)
    template = Template(spec, namespace, codes, guard, job["workdir"], Seal(sibling_filter()),
                        space=space, landlock=ruleset if ruleset.fd >= 0 else None)
    report["guarded"] = True          # every client installs the guard before the answer runs
    serve_channel(job["channel"], template, error, report, job["fd_socket"])


def _compile_answer(job) -> tuple:
    """The answer cells compiled (not run: each client process runs them); a syntax error."""
    try:
        return [compile(c["source"], ANSWER_FILENAME.format(c["id"]), "exec")
                for c in job["cells"] if c["kind"] == "answer"], ""
    except BaseException as exc:      # noqa: BLE001 - the student's error
        return [], describe_exception(exc)


def serve_channel(fds, template: Template, error: str, report, fd_socket: int) -> None:
    """Interactive grading: the answer's clients talk to the grader's trusted world.

    Runs the answer cells once in a guarded fork (:func:`.processes.probe`), sends
    ``answer_error`` (they failed) or ``ready``, then forks a process for each
    client the world spawns and hands its pipes to the grader
    (:class:`.processes.Router`) until the grader closes the channel.
    """
    error = error or probe(template)
    if error:
        report["answer_error"] = error
        to_world(fds[1], {"op": "answer_error", "text": error})
        return
    layers = "; ".join(str(report[k]) for k in ("landlock", "isolation", "spaces") if report.get(k))
    to_world(fds[1], {"op": "ready", "landlock": layers})
    router = Router(template, fds, fd_socket)
    try:
        router.run()
    finally:                          # what the clients cost (tools/grade_cpu.py prints it)
        own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        report["clients"] = {"processes": router.forked,
                             "cpu": round(kids.ru_utime + kids.ru_stime, 3),
                             "template_cpu": round(own.ru_utime + own.ru_stime, 3)}


def child_main() -> None:
    """Entry point in the grading child: read the job on stdin, report on its result fd."""
    sys.dont_write_bytecode = True
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    fd = job["result_fd"]
    report = {"nonce": job["nonce"], "guarded": False}
    try:
        from .privileges import isolate       # forks: only the PID namespace's init returns
        report["isolation"] = isolate(job.get("privileges", {}), job["workdir"])
        _run(job, report)
    except BaseException as exc:          # noqa: BLE001 - whatever happened, report it
        report.setdefault("internal", f"the sandbox failed: {describe_exception(exc)}")
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(fd, data):]
    os._exit(0)
