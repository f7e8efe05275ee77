"""A client process sees no other process: the seccomp filter each client installs.

:func:`sibling_filter` is the program (classic BPF) and :class:`Seal` makes it ready in
the sandbox's template, so that a client process (:mod:`.processes`) only makes the two
calls that install it, before any student code runs.
"""
from __future__ import annotations

import ctypes
import struct

SYS_ARGS = {      # x86_64 syscalls that read or change another process's (or a group's) state:
    "getpriority": (140, (0, 1)), "setpriority": (141, (0, 1)),   # (number, the arguments that
    "sched_setparam": (142, (0,)), "sched_getparam": (143, (0,)),  # must be 0: this process)
    "sched_setscheduler": (144, (0,)), "sched_getscheduler": (145, (0,)),
    "sched_rr_get_interval": (148, (0,)), "sched_setaffinity": (203, (0,)),
    "sched_getaffinity": (204, (0,)), "sched_setattr": (314, (0,)), "sched_getattr": (315, (0,)),
    "getpgid": (121, (0,)), "getsid": (124, (0,)), "prlimit64": (302, (0,)),
}
"""Allowed on the client itself (those arguments 0: PRIO_PROCESS and pid 0), refused on any
other process, its process group or its user: a niceness, an affinity, a process group read
or set there is a message no world sees."""
SYS_DENIED = {"kill": 62, "tkill": 200, "setpgid": 109, "ptrace": 101, "rt_sigqueueinfo": 129,
              "ioprio_set": 251, "ioprio_get": 252, "rt_tgsigqueueinfo": 297,
              "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
              "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438,
              "flock": 73, "statfs": 137, "fstatfs": 138,
              "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66,
              "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220,
              "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
              "mq_notify": 244, "mq_getsetattr": 245,
              "add_key": 248, "request_key": 249, "keyctl": 250,
              "inotify_init": 253, "inotify_add_watch": 254, "inotify_init1": 294,
              "fanotify_init": 300, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
              "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
              "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430,
              "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442}
"""Refused to a client outright (the guard refuses ``os.kill``; these are the kernel's word):
signals, tracing, another process's memory, and what two clients could share without the
world: a lock on a file both may read, the free space of a disk, SysV IPC and POSIX queues,
keyrings, watches on files both read, new namespaces and mounts. (Not ``getpid`` nor
``gettid``: the C library's ``raise`` and ``abort`` signal the process by them.)"""
FCNTL_LOCKS = (5, 6, 7, 36, 37, 38)   # F_GETLK, F_SETLK, F_SETLKW and their OFD versions
SYS_FCNTL = 72
AUDIT_ARCH_X86_64, X32_BIT = 0xC000003E, 0x40000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050000 | 1


def sibling_filter() -> bytes:
    """The seccomp program (classic BPF) each client installs: on x86_64, the syscalls of
    :data:`SYS_DENIED`, those of :data:`SYS_ARGS` naming another process, ``fcntl``'s
    record locks (:data:`FCNTL_LOCKS`) and every x32 syscall fail with EPERM; on another
    architecture nothing is filtered."""
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06           # BPF_LD|W|ABS, JMP|JEQ|K, JGE, RET|K
    prog = [(LD, 0, 0, 4), (JEQ, 0, "allow", AUDIT_ARCH_X86_64),
            (LD, 0, 0, 0), (JGE, "refuse", 0, X32_BIT)]
    prog += [(JEQ, "refuse", 0, nr) for nr in sorted(SYS_DENIED.values())]
    prog += [(LD, 0, 0, 0), (JEQ, 0, 1 + len(FCNTL_LOCKS), SYS_FCNTL),  # fcntl: its command
             (LD, 0, 0, 24)] + [(JEQ, "refuse", 0, cmd) for cmd in FCNTL_LOCKS]
    for nr, args in sorted(SYS_ARGS.values()):
        prog += [(LD, 0, 0, 0), (JEQ, 0, 2 * len(args), nr)]     # not this call: the next one
        for k, arg in enumerate(args):                          # pid_t, int: the low word
            prog += [(LD, 0, 0, 16 + 8 * arg),
                     (JEQ, "allow" if k == len(args) - 1 else 0, "refuse", 0)]
    prog += [(RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_EPERM)]
    at = {"allow": len(prog) - 2, "refuse": len(prog) - 1}
    return b"".join(struct.pack("<HBBI", code, *(at[j] - pc - 1 if isinstance(j, str) else j
                                                 for j in (jt, jf)), k)
                    for pc, (code, jt, jf, k) in enumerate(prog))


class Seal:
    """A seccomp program (:func:`sibling_filter`) made ready in the template, so that a
    client only makes the two calls that install it (:meth:`install`)."""

    def __init__(self, program: bytes):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.filters = ctypes.create_string_buffer(program, len(program))
        self.fprog = ctypes.create_string_buffer(struct.pack(
            "HxxxxxxQ", len(program) // 8, ctypes.addressof(self.filters)))

    def install(self) -> None:
        """In this process and every process it starts; it cannot be removed. OSError if
        the kernel refuses it."""
        if self.libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if self.libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.fprog, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
