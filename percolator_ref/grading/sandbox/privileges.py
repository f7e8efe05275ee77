"""Least privilege for the grading child: its own user, its own mounts, its own PID namespace.

The grader (:mod:`..grade.grader`) calls :func:`plan` and :func:`prepare_workdir`
before it starts a child, and :func:`sweep` after the child has ended. The
child (:mod:`.child`) calls :func:`isolate` before any student code runs,
before its rlimits, Landlock and audit hook. The layers, each independent of
the others:

- **A private user (grader running as root).** The child gives up root for a
  uid/gid of its own, drawn per notebook from a range no account uses
  (:data:`UID_BASE`), with no supplementary groups, no home and no
  capabilities. Only its work directory belongs to that uid, so files of the
  kit, of other submissions, ``/etc/shadow`` and device nodes are the kernel's
  "permission denied" whatever the code does (a path, a file descriptor, an
  ``ioctl``); it cannot set an immutable flag (``CAP_LINUX_IMMUTABLE``) nor
  signal another notebook's processes. Where the Python installation sits
  below a directory only root may enter (``/root/.pyenv``), the child's mount
  namespace lays an empty ``tmpfs`` over that directory and binds back only
  the installation.
- **Read-only mounts.** In a private mount namespace (inside a user namespace
  when not root) every mount is remounted read-only except a bind of the work
  directory: ``chmod``/``chown``/``utime``/``truncate`` through a path or a file
  descriptor outside the work directory fail with ``EROFS``, even on files the
  grader's own user owns (the case a non-root grader cannot otherwise cover).
- **A PID namespace.** The child forks inside a new PID namespace; the fork
  is the namespace's init (pid 1, with ``PR_SET_PDEATHSIG``), which forks the
  worker that runs the student's code. When the grader kills the child, the
  init dies, and when the worker ends, the init exits: either way the kernel
  kills every process in the namespace, whatever session, process group or
  double fork it made. The init mounts the namespace's ``/proc``, writable: each
  client process maps its own user namespace there, then covers ``/proc`` with
  an empty folder before any student code runs (:mod:`.space`).
- **A disk quota.** In the private mount namespace the work directory (the
  child's ``HOME`` and ``TMPDIR``) is a ``tmpfs`` of its own of
  :data:`DISK_MB` megabytes: a child that fills it gets "No space left" in its
  own directory, never in the grader's temporary folder that the other
  notebooks' children share, and what it wrote vanishes with its namespace.
  Without a mount namespace each file stays bounded by ``RLIMIT_FSIZE`` and the
  layer line says there is no quota.
- **A sweep.** After each notebook the grader SIGKILLs every process of the
  notebook's private uid (root) and every process whose environment names the
  notebook's work directory (``HOME``/``TMPDIR``, which every fork inherits);
  without namespaces it also makes itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so orphans stay below it until then.

:func:`isolate` returns a line naming each layer it set up, and what it
could not set up and why: the report records it (``Grade.sandbox``).
"""
from __future__ import annotations

import os
import pwd
import secrets
import signal
import sys
import time
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MOUNT_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                 "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21}
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
CAP_VERSION_3 = 0x20080522
UID_BASE, UID_SPAN = 1_500_000_000, 1_000_000
"""Private uids (and gids) are drawn from ``[UID_BASE, UID_BASE + UID_SPAN)``."""
NPROC = 160
"""RLIMIT_NPROC of a private uid: processes and threads it may have at once (far more than
its client processes run: each at most :data:`.space.THREADS` + 1 tasks)."""
DISK_MB = 64
"""Size of the child's own work directory (a tmpfs in its mount namespace)."""


# -- the grader's side -------------------------------------------------------------

def plan(expose, namespaces: bool = True) -> dict:
    """The child's privilege spec: a private uid when root; the paths it must reach.

    ``expose``: the directories the child must read (the Python installation,
    the kit); ``namespaces=False`` skips the namespaces (the sweep remains).
    """
    spec = {"namespaces": bool(namespaces), "expose": sorted({str(p) for p in expose}),
            "disk_mb": DISK_MB}
    if os.geteuid() == 0:
        spec["uid"] = spec["gid"] = free_uid()
    if not namespaces:
        subreaper()               # orphans stay below the grader until the sweep
    return spec


def free_uid() -> int:
    """A uid in the private range that no account and no running process has."""
    for _ in range(100):
        uid = UID_BASE + secrets.randbelow(UID_SPAN)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not processes_of(uid):
                return uid
    raise RuntimeError("no free private uid for the grading child")


def prepare_workdir(base: Path, work: Path, spec: dict) -> None:
    """Give the work directory (and only it) to the private uid; let it pass through ``base``.

    The work directory is also the sweep's marker: the child's ``HOME`` and ``TMPDIR``.
    """
    spec["marker"] = str(work)
    if "uid" not in spec:
        return
    os.chmod(base, 0o711)
    for path in [work] + sorted(work.rglob("*")):
        os.chown(path, spec["uid"], spec["gid"], follow_symlinks=False)
    os.chmod(work, 0o700)
    spec["expose"] = sorted(set(spec["expose"]) | {str(work)})


def subreaper() -> bool:
    """Make this process adopt its descendants' orphans (Linux); False where unavailable."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def sweep(spec: dict) -> list:
    """SIGKILL what the child left: its private uid's processes and every process whose
    environment names its work directory (``HOME``/``TMPDIR``, inherited by every fork).

    Returns the pids killed; the ones that were this process's children (adopted as
    a subreaper) are reaped.
    """
    killed = []
    for _ in range(5):
        targets = set(processes_of(spec["uid"])) if "uid" in spec else set()
        if spec.get("marker"):
            targets |= set(processes_with(spec["marker"]))
        targets.discard(os.getpid())
        if not targets:
            break
        for pid in sorted(targets):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    killed = sorted(set(killed))              # one that was still dying may be hit twice
    for pid in killed:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return killed


def processes_of(uid: int) -> list:
    """Pids of live processes whose real uid is ``uid`` (from /proc)."""
    found = []
    for pid, status in _proc_files("status"):
        uids = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
        if uids and str(uid) in uids[0] and "\nState:\tZ" not in status:
            found.append(pid)
    return found


def processes_with(marker: str) -> list:
    """Pids of live processes whose initial environment holds ``marker`` (from /proc)."""
    m, found = marker.encode(), []
    for pid, environ in _proc_files("environ", binary=True):
        values = [v.split(b"=", 1)[1] for v in environ.split(b"\0") if b"=" in v]
        if any(v == m or v.startswith(m + b"/") for v in values) and _alive(pid):
            found.append(pid)
    return found


def _proc_files(name: str, binary: bool = False):
    if not Path("/proc").is_dir():
        return
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                path = entry / name
                yield int(entry.name), path.read_bytes() if binary else path.read_text()
            except OSError:
                continue


# -- the child's side --------------------------------------------------------------

def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
    except ImportError:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    return libc


def _errno() -> str:
    import ctypes
    return os.strerror(ctypes.get_errno())


def isolate(spec: dict, workdir: str) -> str:
    """Enter the layers of ``spec`` (called by the child before student code); say which hold.

    With namespaces, this process forks: the parent waits for the namespace's
    init and exits as it did; only the init returns from this call.
    """
    layers, mounted = [], False
    libc = _libc()
    if libc is None:
        layers.append("namespaces unavailable: not Linux or no ctypes")
    elif spec.get("namespaces", True):
        mounted = _enter_namespaces(libc, spec, workdir, layers)
        if mounted:
            _become_init(libc, layers)
    else:
        layers.append("namespaces off")
    hidden = blockers(list(spec.get("expose", ())) + [workdir])
    if "uid" in spec and hidden:
        layers.append(f"no private uid: it could not enter {', '.join(hidden)}")
        spec = {k: v for k, v in spec.items() if k not in ("uid", "gid")}
    _drop_user(libc, spec, layers)
    return "; ".join(layers)


def _enter_namespaces(libc, spec: dict, workdir: str, layers: list) -> bool:
    """unshare mount + PID namespaces (and a user namespace when not root); remount read-only."""
    root = os.geteuid() == 0
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | (0 if root else CLONE_NEWUSER)
    if libc.unshare(flags) != 0:
        layers.append(f"namespaces unavailable: unshare: {_errno()}")
        return False
    if not root:
        _map_ids(uid, gid)
        layers.append("user namespace")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        layers.append(f"mounts unchanged: {_errno()}")
        return True
    if "uid" in spec:
        for _ in range(8):                 # each round opens one more level of closed directories
            if not blockers(spec["expose"]):
                break
            layers += expose(spec["expose"])
    layers.append(own_disk(libc, spec, workdir))
    layers.append(_read_only(libc, workdir))
    return True


def own_disk(libc, spec: dict, workdir: str) -> str:
    """Mount a tmpfs of ``spec["disk_mb"]`` MB over ``workdir`` (in this mount namespace),
    owned by the child's uid, with the ``tmp`` folder its ``TMPDIR`` names; say what was done.
    What the child writes there is visible only inside its namespace, and gone with it."""
    uid, gid = spec.get("uid", os.getuid()), spec.get("gid", os.getgid())
    size = int(spec.get("disk_mb") or 0)
    if size <= 0:
        return "no disk quota (none asked)"
    options = f"size={size}m,nr_inodes=4096,mode=0700,uid={uid},gid={gid}".encode()
    if libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return f"no disk quota: tmpfs on the work directory: {_errno()}"
    os.chdir(workdir)                      # the new mount, not the directory below it
    os.mkdir("tmp", 0o700)
    if "uid" in spec:
        os.chown("tmp", uid, gid)
    return f"disk quota: its own {size} MB tmpfs"


def _map_ids(uid: int, gid: int) -> None:
    """Inside a new user namespace: keep the same uid and gid (not root there)."""
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def blockers(paths, uid: int = -1) -> dict:
    """``{directory: [child names]}``: the first ancestor of each path others may not enter.

    Those are the directories a private uid could not pass through to reach ``paths``.
    """
    found = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            directory = Path(*parts[:depth])
            try:
                st = os.stat(directory)
            except OSError:
                break
            if not st.st_mode & 0o001 and st.st_uid != uid:
                found.setdefault(str(directory), set()).add(parts[depth])
                break
    return {d: sorted(names) for d, names in found.items()}


def expose(paths) -> list:
    """Over each directory others may not enter on the way to ``paths``, an empty tmpfs with
    only what leads to them (root, in a private mount namespace); what was done, per directory."""
    import ctypes
    libc, layers = _libc(), []
    for directory, names in blockers(paths).items():
        fds = {n: os.open(os.path.join(directory, n), os.O_PATH | os.O_CLOEXEC) for n in names}
        try:
            if libc.mount(b"tmpfs", directory.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                          b"mode=0755,size=64k") != 0:
                layers.append(f"cannot expose {directory}: {_errno()}")
                continue
            for name, fd in fds.items():
                target = os.path.join(directory, name)
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.mkdir(target)
                else:
                    open(target, "w").close()
                if libc.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None,
                              MS_BIND | MS_REC, None) != 0:
                    layers.append(f"cannot bind {target}: {os.strerror(ctypes.get_errno())}")
            layers.append(f"only {', '.join(names)} visible in {directory}")
        finally:
            for fd in fds.values():
                os.close(fd)
    return layers


def mount_points() -> list:
    """``(mount point, options)`` of every mount this process sees, parents first."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")
        points.append((point, fields[5].split(",")))
    return sorted(points, key=lambda p: p[0].count("/") if p[0] != "/" else 0)


def _read_only(libc, workdir: str) -> str:
    """Every mount read-only except a fresh read-write bind of ``workdir``."""
    if libc.mount(workdir.encode(), workdir.encode(), None, MS_BIND, None) != 0:
        return f"mounts writable: bind {workdir}: {_errno()}"
    failed = []
    for point, options in mount_points():
        if point == workdir or point.startswith(workdir + "/"):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in options:
            flags |= MOUNT_OPTIONS.get(option, 0)
        if libc.mount(None, point.encode(), None, flags, None) != 0:
            failed.append(point)
    if "/" in failed:
        return "mounts writable: / could not be remounted read-only"
    return "read-only mounts" + (f" (not {len(failed)} of them: {', '.join(failed[:3])})"
                                 if failed else "")


def _become_init(libc, layers: list) -> None:
    """Fork the PID namespace's init, which forks the worker: only the worker returns.

    The parent (outside) waits for the init and exits as the worker did; the init
    reaps orphans until the worker ends, then exits, and the kernel kills the rest.
    The student's code never runs as pid 1 (which ignores signals it has no handler for).
    """
    parent = os.getpid()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(status_w)
        _wait_and_exit(pid, status_r)
    os.close(status_r)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or not _alive(parent):
        os._exit(70)                      # the parent died before the death signal was set
    if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,  # writable: the
                  None) != 0:        # template maps its user namespace; no client sees it (.space)
        layers.append(f"PID namespace (old /proc: {_errno()})")
    else:
        layers.append("PID namespace")
    worker = os.fork()
    if worker:
        _reap_until(worker, status_w)
    os.close(status_w)


def _reap_until(worker: int, status_w: int) -> None:
    """The init: reap every child until ``worker`` ends; send its wait status; exit."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(70)
        except InterruptedError:
            continue
        if pid == worker:
            os.write(status_w, status.to_bytes(4, "little"))
            os._exit(0)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X")


def _wait_and_exit(pid: int, status_r: int) -> None:
    """Outside the namespace: wait for its init, then exit as the worker did (or its signal)."""
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    raw = b""
    while True:
        try:
            chunk = os.read(status_r, 4)
        except InterruptedError:
            continue
        if not chunk:
            break
        raw += chunk
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if len(raw) == 4:
        status = int.from_bytes(raw, "little")
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def _drop_user(libc, spec: dict, layers: list) -> None:
    """Become the private uid (root), or drop every capability (a user namespace's)."""
    import resource
    if "uid" in spec:
        os.setgroups([])
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
        resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))
        layers.append(f"private uid {spec['uid']}")
    elif libc is not None:
        _drop_capabilities(libc)
    if libc is not None:
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)   # cleared by setresuid: again


def _drop_capabilities(libc) -> None:
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    if libc.capset(ctypes.byref(Header(CAP_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
