"""Each client process's own view of the machine: its own disk at one path, no ``/proc``.

Two incarnations of a client must not pass each other anything but through the
world, and a client must not tell which incarnation it is (:mod:`.processes`).
A folder per client on the sandbox's shared disk broke both: the disk's free
space and free inodes are registers every client can set (write until "No space
left") and read, a new file's inode number counts every file the disk was given
before, the folder's name carried the client's serial number, its parent's link
count the number of folders, and ``/proc`` shows every process's pid.

So each client process, right after its fork and before any student code
(:meth:`ClientSpace.enter`), makes a user namespace of its own (an unprivileged
one, its uid and gid mapped to themselves) and a mount namespace, mounts a fresh
``tmpfs`` of :data:`DISK_MB` megabytes and :data:`INODES` inodes on the one folder
every client sees (``<workdir>/clients/client``), lays an empty folder over
``/proc``, drops every capability and sets its RLIMIT_NPROC to :data:`THREADS` + 1
(counted per user namespace: the private uid's shared limit was one more register,
"can't start a new thread" telling how many threads the others held). What one
client writes, how full its disk is, which inode numbers it hands out and how many
threads it runs are its own, and vanish with its process; every client finds the
same empty folder at the same path. Then Landlock, the seccomp filter and the
audit hook are installed (a process under Landlock may mount nothing, so Landlock
comes after the mounts).

Its pid is not news either: the forker (:class:`.processes.Forker`) makes a user
and a PID namespace once (:meth:`ClientSpace.nursery`) and forks each client as the
init of a PID namespace of its own (:meth:`ClientSpace.new_pids`): pid 1, parent 0,
threads 2, 3, ... in every client (the sandbox's pids were a counter that every
client's threads advanced).

Where the kernel refuses (no unprivileged user namespaces; the template tries once,
in a throwaway fork), :attr:`ClientSpace.own` is False and the layer line says why:
each client then has a folder with a random name on the shared disk.
"""
from __future__ import annotations

import os
import resource
import secrets

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 2, 4, 8, 4096
PR_SET_DUMPABLE = 4
CAP_VERSION_3 = 0x20080522
DISK_MB = 16
"""Size of a client process's own disk (its folder, a tmpfs in its own mount namespace)."""
INODES = 1024
"""Files and folders a client process may have on its disk at once."""
THREADS = 8
"""Threads a client process may run besides its main one (its RLIMIT_NPROC, counted in its
own user namespace). The world keeps a handful of clients alive at once and the forker
reaps the dead before each fork (:class:`.processes.Forker`), so the private uid's tasks
in all stay far below the sandbox's RLIMIT_NPROC (:data:`.privileges.NPROC`): "can't start
a new thread" is news of this client's own threads, never of another's."""
ROOM, FOLDER, COVER = "clients", "client", "nothing"
"""Under the sandbox's work directory: the folder of the clients' folders (the only one
their Landlock ruleset lets them write below: a rule on a mount point itself is hidden by
the mount), every client's folder in it (the mount point of its own disk), and the empty
folder laid over ``/proc`` in each client."""


class ClientSpace:
    """Made once in the template (it checks, in a fork, that a client process can enter
    one); entered by every client process (:meth:`enter`).

    ``own``: each client gets a disk of its own (else a folder on the shared disk);
    ``room``: the folder that holds the clients' folders; ``layer``: a sentence for the
    sandbox's layer line.
    """

    def __init__(self, workdir: str, disk_mb: int = DISK_MB, inodes: int = INODES,
                 threads: int = THREADS):
        self.own, self.layer, self.tasks = False, "", threads + 1
        self.room = os.path.join(workdir, ROOM)
        self.folder = os.path.join(self.room, FOLDER)
        self.cover = os.path.join(workdir, COVER)
        for path in (self.folder, self.cover):
            os.makedirs(path, mode=0o700, exist_ok=True)
        self.options = f"size={disk_mb}m,nr_inodes={inodes},mode=0700".encode()
        uid, gid = os.getuid(), os.getgid()
        self.maps = ((b"/proc/self/setgroups", b"deny"),
                     (b"/proc/self/uid_map", b"%d %d 1" % (uid, uid)),
                     (b"/proc/self/gid_map", b"%d %d 1" % (gid, gid)))
        try:
            import ctypes
        except ImportError as exc:
            self.layer = f"clients share the sandbox's disk (no ctypes: {exc})"
            return
        self.ctypes, self.libc = ctypes, ctypes.CDLL(None, use_errno=True)
        self.no_caps = (ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_uint32) * 2),
                        ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_uint32) * 6))
        ctypes.memmove(self.no_caps[0], CAP_VERSION_3.to_bytes(4, "little") + bytes(4), 8)
        why = self._tried()
        self.own = not why
        self.layer = ("each client its own disk, tasks and no /proc" if self.own else
                      f"clients share the sandbox's disk ({why})")

    def _tried(self) -> str:
        """Enter a client's space in a throwaway fork: "" if it could, else why not."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                self._own()
            except OSError as exc:
                os.write(write, str(exc).encode()[:500] or b"?")
            finally:
                os._exit(0)
        os.close(write)
        try:
            why = b""
            while chunk := os.read(read, 512):
                why += chunk
        finally:
            os.close(read)
            os.waitpid(pid, 0)
        return why.decode(errors="replace")

    def _fail(self, step: str):
        raise OSError(self.ctypes.get_errno(), f"{step}: {os.strerror(self.ctypes.get_errno())}")

    def nursery(self) -> int:
        """In the forker (single-threaded): a user namespace and a PID namespace of its own,
        of which a fork of it becomes the init; only that fork returns, with a descriptor of
        its PID namespace (:meth:`new_pids`, :meth:`back_to`), or -1 if they could not be made
        (the forker then forks in the sandbox's PID namespace). The forker itself waits for it
        and exits as it did."""
        if not self.own:
            return -1
        libc = self.libc
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        try:
            if libc.unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0:
                return -1
            self._write_maps()
        except OSError:
            return -1
        finally:
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        pid = os.fork()
        if pid:
            status = os.waitpid(pid, 0)[1]
            os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)
        return os.open("/proc/self/ns/pid", os.O_RDONLY)

    def new_pids(self) -> None:
        """The next fork is the init (pid 1) of a PID namespace of its own: its pid, its
        threads' ids and its parent's (0) are the same in every client."""
        if self.libc.unshare(CLONE_NEWPID) != 0:
            self._fail("unshare(CLONE_NEWPID)")

    def back_to(self, nursery: int) -> None:
        """After that fork: forks go to the nursery's PID namespace again."""
        if self.libc.setns(nursery, CLONE_NEWPID) != 0:
            self._fail("setns(CLONE_NEWPID)")

    def _write_maps(self) -> None:
        for path, text in self.maps:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)

    def _own(self) -> None:
        """A user namespace (this uid and gid mapped to themselves), a mount namespace, a
        tmpfs on the folder, ``/proc`` covered, no capability, :data:`THREADS` threads."""
        libc = self.libc
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)      # /proc/self/*_map are root's otherwise
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            self._fail("unshare")
        self._write_maps()
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        if libc.mount(b"tmpfs", self.folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      self.options) != 0:
            self._fail("mount tmpfs")
        if libc.mount(self.cover.encode(), b"/proc", None, MS_BIND, None) != 0:
            self._fail("cover /proc")
        if libc.capset(*self.no_caps) != 0:
            self._fail("capset")
        resource.setrlimit(resource.RLIMIT_NPROC, (self.tasks, self.tasks))

    def enter(self) -> str:
        """In a fresh client process: its own user and mount namespaces, disk, task count
        and no ``/proc``, no capability left; the folder to work in. OSError if a step
        fails (the client must not run)."""
        if not self.own:
            return shared_folder(self.room)
        self._own()
        return self.folder


def shared_folder(room: str) -> str:
    """Without a disk of its own: a new folder in ``room`` on the sandbox's disk, its name
    random (a serial number would tell the client its incarnation)."""
    folder = os.path.join(room, f"{FOLDER}-{secrets.token_hex(8)}")
    os.mkdir(folder, 0o700)
    return folder
