"""Each client process's own view of the machine: its own disk at one path, no ``/proc``.

Two incarnations of a client must not pass each other anything but through the
world, and a client must not tell which incarnation it is (:mod:`.processes`).
A folder per client on the sandbox's shared disk broke both: the disk's free
space and free inodes are registers every client can set (write until "No space
left") and read, a new file's inode number counts every file the disk was given
before, the folder's name carried the client's serial number, its parent's link
count the number of folders, and ``/proc`` shows every process's pid.

So the template makes a user namespace of its own once (:class:`ClientSpace`:
an unprivileged one, the private uid mapped to itself), and each client process,
right after its fork and before any student code (:meth:`ClientSpace.enter`),
makes a mount namespace of its own, mounts a fresh ``tmpfs`` of
:data:`DISK_MB` megabytes and :data:`INODES` inodes on the one folder every
client sees (``<workdir>/clients/client``), lays an empty folder over ``/proc``, and drops
every capability. What one client writes, how full its disk is and which inode
numbers it hands out are that client's alone, and vanish with its process; every
client finds the same empty folder at the same path. Then Landlock, the seccomp
filter and the audit hook are installed (a process under Landlock may mount
nothing, so Landlock comes after the mounts).

Where the kernel refuses the user namespace (``unshare`` not allowed, a threaded
template), :attr:`ClientSpace.own` is False and the layer line says why: each
client then has a folder with a random name on the shared disk.
"""
from __future__ import annotations

import os
import secrets

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 2, 4, 8, 4096
PR_SET_DUMPABLE = 4
CAP_VERSION_3 = 0x20080522
DISK_MB = 16
"""Size of a client process's own disk (its folder, a tmpfs in its own mount namespace)."""
INODES = 1024
"""Files and folders a client process may have on its disk at once."""
ROOM, FOLDER, COVER = "clients", "client", "nothing"
"""Under the sandbox's work directory: the folder of the clients' folders (the only one
their Landlock ruleset lets them write below: a rule on a mount point itself is hidden by
the mount), every client's folder in it (the mount point of its own disk), and the empty
folder laid over ``/proc`` in each client."""


class ClientSpace:
    """Made once in the template (before it starts a thread); entered by every client.

    ``own``: each client gets a disk of its own (else a folder on the shared disk);
    ``room``: the folder that holds the clients' folders; ``layer``: a sentence for the
    sandbox's layer line.
    """

    def __init__(self, workdir: str, disk_mb: int = DISK_MB, inodes: int = INODES):
        self.own, self.layer = False, ""
        self.room = os.path.join(workdir, ROOM)
        self.folder = os.path.join(self.room, FOLDER)
        self.cover = os.path.join(workdir, COVER)
        for path in (self.folder, self.cover):
            os.makedirs(path, mode=0o700, exist_ok=True)
        self.options = f"size={disk_mb}m,nr_inodes={inodes},mode=0700".encode()
        try:
            import ctypes
        except ImportError as exc:
            self.layer = f"clients share the sandbox's disk (no ctypes: {exc})"
            return
        self.ctypes, self.libc = ctypes, ctypes.CDLL(None, use_errno=True)
        self.no_caps = (ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_uint32) * 2),
                        ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_uint32) * 6))
        ctypes.memmove(self.no_caps[0], CAP_VERSION_3.to_bytes(4, "little") + bytes(4), 8)
        why = self._own_user_namespace()
        self.own = not why
        self.layer = ("each client its own disk and no /proc" if self.own else
                      f"clients share the sandbox's disk ({why})")

    def _errno(self) -> str:
        return os.strerror(self.ctypes.get_errno())

    def _own_user_namespace(self) -> str:
        """Enter a new user namespace, this process's uid and gid mapped to themselves: its
        forks may then make mount namespaces. "" or why not."""
        uid, gid = os.getuid(), os.getgid()
        self.libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self/*_map are root's otherwise
        try:
            if self.libc.unshare(CLONE_NEWUSER) != 0:
                return f"unshare: {self._errno()}"
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):
                fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
                try:
                    os.write(fd, text.encode())
                finally:
                    os.close(fd)
        except OSError as exc:
            return f"user namespace: {exc}"
        finally:
            self.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return ""

    def enter(self) -> str:
        """In a fresh client process: its own mount namespace, disk and no ``/proc``, no
        capability left; the folder to work in. OSError if a step fails (the client must
        not run)."""
        if not self.own:
            return shared_folder(self.room)
        libc = self.libc
        if libc.unshare(CLONE_NEWNS) != 0:
            raise OSError(self.ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        if libc.mount(b"tmpfs", self.folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      self.options) != 0:
            raise OSError(self.ctypes.get_errno(), "mount tmpfs")
        if libc.mount(self.cover.encode(), b"/proc", None, MS_BIND, None) != 0:
            raise OSError(self.ctypes.get_errno(), "cover /proc")
        if libc.capset(*self.no_caps) != 0:
            raise OSError(self.ctypes.get_errno(), "capset")
        return self.folder


def shared_folder(room: str) -> str:
    """Without a disk of its own: a new folder in ``room`` on the sandbox's disk, its name
    random (a serial number would tell the client its incarnation)."""
    folder = os.path.join(room, f"{FOLDER}-{secrets.token_hex(8)}")
    os.mkdir(folder, 0o700)
    return folder
