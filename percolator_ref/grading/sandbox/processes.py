"""One process per client incarnation: the sandbox child forks each client the world spawns.

The sandbox child (:mod:`.child`) becomes a *template* once the context cells
have run and the reference is hidden: it compiles the answer cells but runs no
student code itself, and it is not guarded (the guard refuses ``os.fork``).
Its :class:`Router` then forks, for each ``spawn`` of the trusted world, a
client process that mounts its own disk on the one client folder and covers
``/proc`` (:mod:`.space`), enforces the Landlock ruleset, closes every
descriptor but its own pair of pipes, installs a seccomp filter
(:func:`sibling_filter`), moves into its folder, installs the guard (writes only
in that folder), runs the answer cells and serves that one client
(:class:`~..client.host.ClientHost`). The router hands the client's pipes to the
grader, which talks to it directly and knows who speaks by the pipe it reads
(:class:`~.launcher.ClientPipes`), so a client speaks only for itself; a crash
(``gone``) or the end of a family (``bye``) kills the process, and a restart is
a fresh fork. Clients share no memory, no files and no disk, and the filter keeps
each from reading or changing another process's state (its niceness, affinity,
process group; signals, file locks, SysV IPC, keyrings, namespaces, mounts): they
reach each other only through the world. Nor can a client tell which incarnation
it is: every client process starts from the same state (the router forgets, in
the fork, what it holds of other clients and how many it started), in the same
folder on a disk as empty as every other's, and its pid, its parent's and its
threads' are not its to read (the filter fails ``getpid``, ``getppid`` and
``gettid``; ``/proc`` is covered).
"""
from __future__ import annotations

import fcntl
import gc
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
from .landlock import Ruleset
from .seccomp import Seal
from .space import ClientSpace, shared_folder

PROBE = 0                # the first fork: runs the answer cells once, says whether they fail
MAX_PROCESSES = 12
"""Client processes alive or unreaped at once (the spare, the world's live clients, the
killed): past it the router waits for the killed before it forks. With :data:`.space.THREADS`
per process it keeps the private uid's tasks below RLIMIT_NPROC (:data:`.privileges.NPROC`):
a limit another client's threads could bring near is a register."""
LOCAL = 1                # a client's id in its own process (the world's id is the router's)


@dataclass
class Template:
    """What every client process starts from: the child's state after the reference is hidden.

    ``codes``: the compiled answer cells; ``guard(folder)``: the audit hook for a
    client whose work folder is ``folder``; ``workdir``: the sandbox's folder;
    ``seal``: the seccomp filter of every client (None: none); ``space``: what gives
    each client its own disk (:class:`~.space.ClientSpace`; None: a folder of
    the shared disk); ``landlock``: the ruleset each client enforces (None: none).
    """
    spec: object
    namespace: dict
    codes: list
    guard: Callable
    workdir: str
    seal: Optional[Seal] = None  # the seccomp filter each client installs (:func:`sibling_filter`)
    drain: Optional["Drain"] = None  # copies its clients' output (:class:`Drain`); made if None
    space: Optional[ClientSpace] = None
    landlock: Optional[Ruleset] = None

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

    def forget(self) -> None:
        """In a fresh fork: forget the template's client output pipes (closed there:
        :func:`_keep_only`), whose numbers count the clients alive."""
        self.fds = set()

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


def _isolate(template: Template) -> str:
    """In a fresh fork: its own disk and no ``/proc`` (:meth:`~.space.ClientSpace.enter`),
    then Landlock; the folder it works in. OSError if a layer could not be set up."""
    folder = template.space.enter() if template.space else shared_folder(template.workdir)
    if template.landlock is not None and not template.landlock.enforce().startswith("landlock"):
        raise OSError("landlock could not be enforced")
    return folder


def _enter(template: Template, folder: str) -> str:
    """In a fresh fork whose descriptors are its pipes only (:func:`_keep_only`): install
    the seccomp filter (:class:`Seal`), move into its folder, install the guard; then run
    the answer cells (returns their error, or ""; OSError if the filter could not be
    installed)."""
    if template.seal is not None:
        template.seal.install()           # OSError: the client does not run
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


def client_main(template: Template, probing: bool, down: int, up: int, output: int) -> None:
    """A client process: the answer cells, then this one client until it is killed
    (``probing``: the probe, which only reports how the answer cells ended).
    The client runs in this process's main thread, on the first message (its spawn).
    It is client :data:`LOCAL` to itself: the world's id for it is the router's to add."""
    try:
        try:
            folder = _isolate(template)
            down, up = _keep_only(down, up, output)
            error = _enter(template, folder)
        except OSError as exc:            # not sealed: no student code runs here
            if not probing:
                return
            error = f"(the sandbox could not seal a client process: {exc})"
        out = PipeWriter(up)
        if probing:
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


def fork_client(template: Template, probing: bool, scrub: Callable) -> Client:
    """Fork a client process from the template, with its own pipes (and, once it runs, its
    own disk: :func:`_isolate`); ``scrub()`` runs first in the fork (it forgets what the
    router holds of other clients). ``probing``: the probe (:func:`probe`)."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        scrub()
        client_main(template, probing, down_r, up_w, out_w)       # never returns
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
    c = fork_client(template, True, template.drain.forget)
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
        self.spare = None
        self.forked = 0                          # client processes started (a spare each)
        self.dying: list = []                    # killed clients not reaped yet

    def run(self) -> None:
        gc.freeze()                     # the forks share the template's pages untouched
        try:
            while True:
                reap(self.dying, wait=len(self.pids) + len(self.dying) >= MAX_PROCESSES - 1)
                if self.spare is None:
                    self.spare = fork_client(self.template, False, self.scrub)
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
        """In a fresh fork: drop what the router holds of other clients (the world's bytes,
        its socket, their pids, their output pipes) and how many it started: every client
        process starts from the same state."""
        self.world.buffer = bytearray()
        self.socket.detach()
        self.world = self.socket = None
        self.pids, self.dying, self.forked = {}, [], 0
        self.template.drain.forget()

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
