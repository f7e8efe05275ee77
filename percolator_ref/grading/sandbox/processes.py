"""One process per client incarnation: the sandbox child forks each client the world spawns.

The sandbox child (:mod:`.child`) becomes a *template* once the context cells
have run and the reference is hidden: it compiles the answer cells but runs no
student code itself, and it is not guarded (the guard refuses ``os.fork``).
Its :class:`Router` then forks, for each ``spawn`` of the trusted world, a
client process that closes every descriptor but its own pair of pipes,
installs a seccomp filter (:func:`sibling_filter`), moves into its own work
subfolder, installs the guard (writes only in that subfolder, no reading of its
siblings), runs the answer cells and serves that one client
(:class:`~..client.host.ClientHost`). The router hands the client's pipes to the
grader, which talks to it directly and knows who speaks by the pipe it reads
(:class:`~.launcher.ClientPipes`), so a client speaks only for itself; a crash
(``gone``) or the end of a family (``bye``) kills the process, and a restart is
a fresh fork. Clients share no memory and no files, and the filter keeps each
from reading or changing another process's state (its niceness, affinity,
process group; signals, file locks, the shared disk's free space): they reach
each other only through the world.
"""
from __future__ import annotations

import ctypes
import fcntl
import gc
import itertools
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from ..channel import FrameReader, PipeWriter, ProtocolError, framed, routed
from ..client.host import ClientHost
from ..framework import describe_exception

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


@dataclass
class Template:
    """What every client process starts from: the child's state after the reference is hidden.

    ``codes``: the compiled answer cells; ``guard(folder)``: the audit hook for a
    client whose work folder is ``folder``; ``workdir``: the sandbox's folder;
    ``seal``: the seccomp filter of every client (None: none).
    """
    spec: object
    namespace: dict
    codes: list
    guard: Callable
    workdir: str
    seal: Optional[Seal] = None  # the seccomp filter each client installs (:func:`sibling_filter`)
    drain: Optional["Drain"] = None  # copies its clients' output (:class:`Drain`); made if None

    def __post_init__(self):
        if self.drain is None:
            self.drain = Drain()


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


def _keep_only(down: int, up: int, output: int) -> tuple:
    """Close every descriptor but the client's pipes ``down`` and ``up`` (the other
    clients' pipes, the world's); 0 reads /dev/null, 1 and 2 write its own pipe ``output``
    (:class:`Drain`). Nothing open is shared with another client process: an open file's
    offset and status flags (``os.lseek``, ``os.set_blocking``) are one for every process
    that inherits it, a register no world sees. Returns the pipes' descriptors (moved
    above 2 if they were among 0-2)."""
    down, up, output = (fcntl.fcntl(fd, fcntl.F_DUPFD, 3) if fd <= 2 else fd
                        for fd in (down, up, output))
    os.dup2(output, 1)
    os.dup2(output, 2)
    low = 3
    for fd in sorted((down, up)):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)
    null = os.open(os.devnull, os.O_RDONLY)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    return down, up


class Drain:
    """Copies what each client process writes to its own output pipe to the template's
    stdout, in one thread of the template (what it cannot write is dropped); a pipe is
    closed here when its client has gone (one thread: a thread per client would cost the
    template an arena and a stack each, past its address-space limit)."""

    def __init__(self):
        self.lock, self.fds = threading.Lock(), set()
        self.wake, self.woken = os.pipe()[::-1]      # (write end, read end)
        threading.Thread(target=self.copy, name="client output", daemon=True).start()

    def add(self, fd: int) -> None:
        """Drain client output pipe ``fd`` (its read end) from now on."""
        with self.lock:
            self.fds.add(fd)
        os.write(self.wake, b"+")

    def copy(self) -> None:
        while True:
            with self.lock:
                fds = [self.woken, *self.fds]
            for fd in select.select(fds, [], [])[0]:
                data = os.read(fd, 1 << 16)
                if fd == self.woken:
                    continue
                if not data:
                    with self.lock:
                        self.fds.discard(fd)
                    os.close(fd)
                    continue
                try:
                    write_all(1, data)
                except OSError:
                    pass


def _enter(template: Template, cid: int) -> str:
    """In a fresh fork whose descriptors are its pipes only (:func:`_keep_only`): install
    the seccomp filter (:class:`Seal`), move into its folder, install the guard; then run
    the answer cells (returns their error, or ""; OSError if the filter could not be
    installed)."""
    if template.seal is not None:
        template.seal.install()           # OSError: the client does not run
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


def client_main(template: Template, cid: int, down: int, up: int, output: int) -> None:
    """A client process: the answer cells, then this one client until it is killed.
    The client runs in this process's main thread, on the first message (its spawn).
    It is client :data:`LOCAL` to itself: the world's id for it is the router's to add."""
    try:
        down, up = _keep_only(down, up, output)
        try:
            error = _enter(template, cid)
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
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        scrub()
        client_main(template, cid, down_r, up_w, out_w)       # never returns
    for fd in (down_r, up_w, out_w):
        os.close(fd)
    template.drain.add(out_r)
    return Client(pid, down_w, up_r, FrameReader(up_r))


def end_client(c: Client) -> int:
    """Kill client ``c``'s process (the probe, a spare never used); its pid, to reap
    (:func:`reap`: its CPU is then counted in the child's, and its pid freed)."""
    kill(c.pid)
    close_pipes(c)
    return c.pid


def close_pipes(c: Client) -> None:
    """Close this process's ends of client ``c``'s two pipes."""
    for fd in (c.down, c.up):
        try:
            os.close(fd)
        except OSError:
            pass


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
    if not isinstance(msg, dict) or msg.get("op") != "probe":
        return ended(c)
    reap([end_client(c)], wait=True)
    return str(msg.get("error") or "")


SIGNALLED = {signal.SIGSEGV: "crashed (segmentation fault)", signal.SIGKILL: "was killed",
             signal.SIGABRT: "aborted (out of memory?)"}


def ended(c: Client) -> str:
    """Why the probe's process stopped before it reported: how it ended (it is given a
    second to end after closing its pipe, then killed), as the student's reason."""
    for _ in range(100):
        pid, status = os.waitpid(c.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.01)
    else:
        reap([end_client(c)], wait=True)
        return "your answer cells closed the grading process's channel and stopped answering"
    close_pipes(c)                                      # reaped: its pid is not killed again
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status))
        return f"the grading process {SIGNALLED.get(sig, 'died of ' + sig.name)} before it was ready"
    return (f"the grading process exited with status {os.WEXITSTATUS(status)} before it was "
            f"ready (os._exit or a crash in your code?)")


SPAWN, ENDS = b'{"op":"spawn"', (b'{"op":"gone"}', b'{"op":"bye"}')
"""What the router reads of the world's messages (:func:`~.channel.addressed` writes them:
compact JSON, ``op`` first): a spawn starts a client process, ``gone`` (a crash) and ``bye``
(the end of its family) kill it."""


class Router:
    """The template's loop: it starts and ends the world's clients; it never carries their
    messages.

    For each ``spawn`` of the world (a :func:`~.channel.routed` frame on the channel),
    the router hands the spawn to a spare client process, then passes that client's two
    pipe ends to the grader over the fd socket (``SCM_RIGHTS``, with the client's id) and
    closes its own copies: the grader and the client then talk directly, the grader
    knowing who speaks by the pipe it reads. ``gone`` and ``bye`` kill the client. A
    spare is forked ahead, at the top of the loop, where the router holds no message
    (the fork forgets the router's buffers), so a spawn finds one whose answer cells
    have run already; a second spawn in the same read waits for the next spare.
    """

    def __init__(self, template: Template, fds, fd_socket: int):
        self.template, self.down = template, fds[0]
        self.world = FrameReader(fds[0], routed=True)
        self.socket = socket.socket(fileno=fd_socket)
        self.pids: dict = {}                     # the world's client id -> its process
        self.spare, self.serial = None, itertools.count(PROBE + 1)
        self.forked = 0                          # client processes started (a spare each)
        self.dying: list = []                    # killed clients not reaped yet

    def run(self) -> None:
        gc.freeze()                     # the forks share the template's pages untouched
        try:
            while True:
                reap(self.dying, wait=False)
                if self.spare is None:
                    self.spare = fork_client(self.template, next(self.serial), self.scrub)
                    self.forked += 1
                left = self.from_world(read=False)       # frames left by a spawn
                if left is False or left is None and self.from_world(read=True) is False:
                    return
        finally:
            for pid in list(self.pids.values()):
                self.dying.append(kill(pid))
            if self.spare is not None:
                self.dying.append(end_client(self.spare))
            reap(self.dying, wait=True)

    def scrub(self) -> None:
        """In a fresh fork: drop the router's buffer (other clients' bytes) and socket."""
        self.world.buffer = bytearray()
        self.socket.detach()
        self.world = self.socket = None
        self.pids, self.dying = {}, []

    def from_world(self, read: bool):
        """Act on the world's whole frames (``read``: wait for one read first); False once
        the world closed the channel (or broke a frame), True if a spawn took the spare
        and frames may be left, None when none is."""
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
        """One message of the world for client ``cid``; True if it spawned it."""
        if data.startswith(SPAWN) and cid not in self.pids and self.spare is not None:
            c, self.spare = self.spare, None
            self.pids[cid] = c.pid
            try:
                write_all(c.down, framed(data))
                socket.send_fds(self.socket, [HANDOVER.pack(cid)], [c.down, c.up])
            except OSError:              # the grader is gone: so is the channel
                pass
            os.close(c.down)
            os.close(c.up)
            return True
        if data in ENDS and cid in self.pids:
            self.dying.append(kill(self.pids.pop(cid)))
        return False


HANDOVER = struct.Struct(">I")
"""The fd socket's message with a client's two pipe ends: that client's id."""


def kill(pid: int) -> int:
    """SIGKILL client process ``pid``; its pid, to :func:`reap`."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return pid
