"""One process per client incarnation: the sandbox child forks each client the world spawns.

The sandbox child (:mod:`.sandbox`) becomes a *template* once the context cells
have run and the reference is hidden: it compiles the answer cells but runs no
student code itself, and it is not guarded (the guard refuses ``os.fork``).
It then routes (:class:`Router`): for each ``spawn`` of the trusted world it forks
a client process that closes every descriptor but its own pair of pipes, moves
into its own work subfolder, installs the guard (writes only in that
subfolder, no reading of its siblings), runs the answer cells and serves that
one client (:class:`~.clients.ClientHost`). The router stamps each frame
from a client's pipe with that client's id (:func:`~.channel.routed`), so a
client speaks only for itself, and it parses no message; a crash (``gone``) or the end of a family (``bye``) kills the process,
and a restart is a fresh fork. Clients share no memory and no files: they
reach each other only through the world.
"""
from __future__ import annotations

import ctypes
import gc
import itertools
import json
import os
import select
import signal
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Callable

from .channel import FrameReader, PipeWriter, ProtocolError, framed, routed
from .clients import ClientHost
from .framework import describe_exception

PROBE = 0                # the first fork: runs the answer cells once, says whether they fail
LOCAL = 1                # a client's id in its own process (the world's id is the router's)


# -- a client sees no other process: seccomp, in each client process -----------------------

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
              "flock": 73, "statfs": 137, "fstatfs": 138}
"""Refused to a client outright (the guard refuses ``os.kill``; these are the kernel's word):
signals, tracing, another process's memory, and what two clients could share without the
world: a lock on a file both may read, the free space of the disk they share."""
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


def seal(program: bytes) -> None:
    """Install ``program`` (:func:`sibling_filter`) in this process and every process it
    starts; it cannot be removed. OSError if the kernel refuses it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    filters = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HxxxxxxQ", len(program) // 8, ctypes.addressof(filters))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


@dataclass
class Template:
    """What every client process starts from: the child's state after the reference is hidden.

    ``codes``: the compiled answer cells; ``guard(folder)``: the audit hook for a
    client whose work folder is ``folder``; ``workdir``: the sandbox's folder;
    ``program``: the seccomp filter of every client (empty: none).
    """
    spec: object
    namespace: dict
    codes: list
    guard: Callable
    workdir: str
    program: bytes = b""        # the seccomp program each client installs (:func:`sibling_filter`)


@dataclass
class Client:
    pid: int
    down: int            # the router writes the world's messages here
    up: int              # and reads the client's here
    reader: FrameReader


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def to_world(fd: int, msg: dict) -> None:
    """The template's own message to the world (``ready``, ``answer_error``): client 0's."""
    write_all(fd, routed(PROBE, json.dumps(msg, separators=(",", ":")).encode()))


def _keep_only(fds) -> None:
    """Close every descriptor but 0-2 and ``fds`` (the other clients' pipes, the world's)."""
    low = 3
    for fd in sorted(fds):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _enter(template: Template, cid: int, down: int, up: int) -> str:
    """In a fresh fork: keep only its pipes, install the seccomp filter (:func:`seal`),
    move into its folder, install the guard; then run the answer cells (returns their
    error, or ""; OSError if the filter could not be installed)."""
    _keep_only((down, up))
    if template.program:
        seal(template.program)            # OSError: the client does not run
    folder = os.path.join(template.workdir, f"client-{cid}")
    os.chdir(folder)
    os.environ.update(HOME=folder, TMPDIR=folder)
    sys.addaudithook(template.guard(folder))
    try:
        for code in template.codes:
            exec(code, template.namespace)
    except BaseException as exc:      # noqa: BLE001 - SystemExit too: the student's error
        return describe_exception(exc)
    if template.spec.answer not in template.namespace:
        return f"your answer cells do not define {template.spec.answer}"
    return ""


class PipeInbox:
    """The client's inbox in its own process: the world's messages, read from its pipe
    by whichever of its threads waits (as a thread's queue would hand them out)."""

    def __init__(self, fd: int):
        self.reader, self.lock = FrameReader(fd), threading.Lock()

    def get(self) -> dict:
        with self.lock:
            while True:
                try:
                    msg = self.reader.receive(3600.0)
                except TimeoutError:
                    continue
                return msg if isinstance(msg, dict) else {"op": "gone"}


def client_main(template: Template, cid: int, down: int, up: int) -> None:
    """A client process: the answer cells, then this one client until it is killed.
    The client runs in this process's main thread, on the first message (its spawn).
    It is client :data:`LOCAL` to itself: the world's id for it is the router's to add."""
    try:
        try:
            error = _enter(template, cid, down, up)
        except OSError as exc:            # not sealed: no student code runs here
            if cid != PROBE:
                return
            error = f"(the sandbox could not seal a client process: {exc})"
        out = PipeWriter(up)
        if cid == PROBE:
            out.send({"op": "probe", "error": error})
            return
        inbox = PipeInbox(down)
        spawn = inbox.get()
        if spawn.get("op") != "spawn":
            return
        host = ClientHost(out.send, template.spec.roles,
                          template.namespace.get(template.spec.answer), ttl=10.0)
        host.inboxes[LOCAL] = inbox
        host.client(LOCAL, spawn)
    finally:
        os._exit(0)


def fork_client(template: Template, cid: int, scrub: Callable) -> Client:
    """Fork client number ``cid`` from the template, with its own pipes and work folder;
    ``scrub()`` runs first in the fork (it forgets what the router holds of other clients)."""
    os.makedirs(os.path.join(template.workdir, f"client-{cid}"), exist_ok=True)
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        scrub()
        client_main(template, cid, down_r, up_w)       # never returns
    os.close(down_r)
    os.close(up_w)
    return Client(pid, down_w, up_r, FrameReader(up_r))


def end_client(c: Client) -> int:
    """Kill client ``c``'s process (a crash, or the end of its family); its pid, to reap
    (:func:`reap`: its CPU is then counted in the child's, and its pid freed)."""
    try:
        os.kill(c.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for fd in (c.down, c.up):
        try:
            os.close(fd)
        except OSError:
            pass
    return c.pid


def reap(pids: list, wait: bool) -> None:
    """Reap the killed clients ``pids`` (those that have died, or ``wait``: all)."""
    for pid in list(pids):
        try:
            done, _ = os.waitpid(pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            pids.remove(pid)


def probe(template: Template) -> str:
    """Run the answer cells once in a guarded fork: their error, or ""."""
    c = fork_client(template, PROBE, lambda: None)
    try:
        msg = c.reader.receive(3600.0)
    except TimeoutError:
        msg = None
    reap([end_client(c)], wait=True)
    if not isinstance(msg, dict) or msg.get("op") != "probe":
        return "your answer cells ended the grading process"
    return str(msg.get("error") or "")


SPAWN, ENDS = b'{"op":"spawn"', (b'{"op":"gone"}', b'{"op":"bye"}')
"""What the router reads of the world's messages (:func:`~.channel.addressed` writes them:
compact JSON, ``op`` first): a spawn starts a client process, ``gone`` (a crash) and ``bye``
(the end of its family) kill it."""


class Router:
    """The template's loop: the world's frames to their client's process, and back.

    The router never parses a message: it takes the client id from a routed frame's
    header (:func:`~.channel.routed`) and forwards the body as a plain frame; it
    frames each body a client writes with that client's id. A spare client process
    is forked ahead, at the top of the loop, where the router holds no message (the
    fork forgets the router's buffers), so a spawn finds one whose answer cells have
    run already; a second spawn in the same read waits for the next spare.
    """

    def __init__(self, template: Template, fds):
        self.template, self.down, self.up = template, fds[0], fds[1]
        self.world = FrameReader(fds[0], routed=True)
        self.clients: dict = {}                  # the world's client id -> Client
        self.by_fd: dict = {}                    # a client's pipe -> the world's id for it
        self.spare, self.serial = None, itertools.count(PROBE + 1)
        self.forked = 0                          # client processes started (a spare each)
        self.dying: list = []                    # killed clients not reaped yet
        self.poll = select.poll()
        self.poll.register(self.down, select.POLLIN)

    def run(self) -> None:
        gc.freeze()                     # the forks share the template's pages untouched
        try:
            while True:
                reap(self.dying, wait=False)
                if self.spare is None:
                    self.spare = fork_client(self.template, next(self.serial), self.scrub)
                    self.forked += 1
                left = self.from_world(read=False)       # frames left by a spawn
                if left is False:
                    return
                if left is None:
                    for fd, _ in self.poll.poll():
                        if fd == self.down and self.from_world(read=True) is False:
                            return
                        if fd != self.down:
                            self.from_client(fd)
        finally:
            for c in list(self.clients.values()) + [self.spare] * (self.spare is not None):
                self.dying.append(end_client(c))
            reap(self.dying, wait=True)

    def scrub(self) -> None:
        """In a fresh fork: drop the router's buffers (other clients' bytes) and clients."""
        self.world.buffer = bytearray()
        for c in self.clients.values():
            c.reader.buffer = bytearray()
        self.clients, self.by_fd, self.world, self.dying = {}, {}, None, []

    def from_world(self, read: bool):
        """Forward the world's whole frames (``read``: read once first); False once the
        world closed the channel (or broke a frame), True if a spawn took the spare and
        frames may be left, None when none is."""
        try:
            if read and not self.world.read_some():
                return False
            while True:
                found = self.world.take()
                if found is None:
                    return None
                (_, cid), data = found
                if self.to_client(cid, data):
                    return True
        except ProtocolError:
            return False

    def to_client(self, cid: int, data: bytes) -> bool:
        """Forward one message of the world to client ``cid``; True if it spawned it."""
        if data.startswith(SPAWN) and cid not in self.clients and self.spare is not None:
            c = self.clients[cid] = self.spare
            self.spare, self.by_fd[c.up] = None, cid
            self.poll.register(c.up, select.POLLIN)
            write_all(c.down, framed(data))
            return True
        c = self.clients.get(cid)
        if c is None:
            return False
        if data in ENDS:
            self.drop(cid)
            return False
        try:
            write_all(c.down, framed(data))
        except OSError:                  # it exited: its end of the pipe is closed
            pass
        return False

    def from_client(self, fd: int) -> None:
        cid = self.by_fd.get(fd)
        if cid is None:
            self.poll.unregister(fd)
            return
        reader, ended = self.clients[cid].reader, not self.clients[cid].reader.read_some()
        try:
            while (found := reader.take()) is not None:
                write_all(self.up, routed(cid, found[1]))
        except ProtocolError:            # a frame too large: the channel's rules broken
            ended = True
        if ended:                        # it exited, or broke its frames
            self.drop(cid)
            write_all(self.up, routed(cid, b'{"op":"exited"}'))  # the world: a violation

    def drop(self, cid: int) -> None:
        c = self.clients.pop(cid)
        del self.by_fd[c.up]
        self.poll.unregister(c.up)
        self.dying.append(end_client(c))
