"""One process per client incarnation: the sandbox child forks each client the world spawns.

The sandbox child (:mod:`.child`) becomes a *template* once the context cells
have run and the reference is hidden: it compiles the answer cells but runs no
student code itself, and it is not guarded (the guard refuses ``os.fork``).
Its :class:`Router` then has, for each ``spawn`` of the trusted world, a
client process forked (by the :class:`Forker`, a process forked from the
template once, which does nothing else) that mounts its own disk on the one client folder and covers
``/proc`` (:mod:`.space`), enforces the Landlock ruleset, closes every
descriptor but its own pair of pipes, installs a seccomp filter
(:func:`~.seccomp.sibling_filter`), moves into its folder, installs the guard (writes only
in that folder), runs the answer cells and serves that one client
(:class:`~..client.host.ClientHost`). The router hands the client's pipes to the
grader, which talks to it directly and knows who speaks by the pipe it reads
(:class:`~.launcher.ClientPipes`), so a client speaks only for itself; a crash
(``gone``) or the end of a family (``bye``) kills the process, and a restart is
a fresh fork. Clients share no memory, no files and no disk, and the filter keeps
each from reading or changing another process's state (its niceness, affinity,
process group; signals, file locks, SysV IPC, keyrings, namespaces, mounts): they
reach each other only through the world. Nor can a client tell which incarnation
it is: every client process starts from the same interpreter state (the forker's,
the same at every fork: not the router's, which changes as it serves the world), in
the same folder on a disk as empty as every other's, as the init of a PID namespace
of its own (pid 1, its parent 0, its threads 2, 3, ...: pids were a counter every
client's threads advanced), with no ``/proc`` to read.
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

from ..channel import FrameReader, PipeWriter, routed
from ..client.host import ClientHost
from ..framework import describe_exception
from .landlock import Ruleset
from .seccomp import Seal
from .space import ClientSpace, shared_folder

PROBE = 0                # the first fork: runs the answer cells once, says whether they fail
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
    pid: int             # the probe's; -1 for a client the forker started (it has a pidfd)
    down: int            # the router writes the world's messages here
    up: int              # and reads the client's here
    reader: FrameReader
    pidfd: int = -1      # a client the forker started: its pidfd (its pid is not ours)


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
    close_all_but((down, up))
    null = os.open(os.devnull, os.O_RDONLY)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    return down, up


def close_all_but(keep) -> None:
    """Close every descriptor above 2 but those in ``keep``."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 16)


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


class Forker:
    """The process every client process is forked from: forked from the template once, as
    the router starts, it does nothing but fork (:func:`forker_main`), each time from the
    same state. A client forked from the router itself could read how far the router had
    got (its heap, its garbage collector's count of live objects: one more per client
    started); one forked from here finds the same interpreter whichever incarnation it is.
    The forker makes a user and a PID namespace of its own first
    (:meth:`~.space.ClientSpace.nursery`), so that each client can be the init of a PID
    namespace of its own; the router kills a client by its pidfd. ``scrub()`` runs
    first in the forker's fork (it forgets the router's socket)."""

    def __init__(self, template: Template, scrub: Callable):
        self.template = template
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            scrub()
            ours.detach()
            forker_main(template, theirs)                 # never returns
        theirs.close()
        self.socket = ours

    def fork(self) -> Client:
        """A new client process (its answer cells start running); OSError if the forker
        has gone."""
        self.socket.send(b"f")
        _, fds, _, _ = socket.recv_fds(self.socket, 8, 4)
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            raise OSError("the client forker has gone")
        self.template.drain.add(fds[2])
        return Client(-1, fds[0], fds[1], FrameReader(fds[1]), pidfd=fds[3])

    def close(self) -> None:
        """Let the forker end (it reaps its clients first, so their CPU is counted) and
        reap it."""
        self.socket.close()
        reap([self.pid], wait=True)


def forker_main(template: Template, sock: socket.socket) -> None:
    """The forker: a client process for each byte the router sends (:func:`fork_one`).
    When the router closes the socket, it waits for the rest and exits. Nothing here
    changes from one fork to the next: the same descriptors, no collection, nothing kept,
    and a dry run first, so that every path the loop takes has been taken once before the
    first client is forked."""
    try:
        close_all_but((sock.fileno(), template.landlock.fd if template.landlock else -1))
        gc.disable()
        nursery = template.space.nursery() if template.space else -1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fork_one(template, ours, True, nursery)
        for fd in socket.recv_fds(theirs, 8, 4)[1]:
            os.close(fd)
        ours.close()
        theirs.close()
        reap_dead(wait=True)
        while sock.recv(1):
            fork_one(template, sock, False, nursery)
        while reap_dead(wait=True):
            pass
    finally:
        os._exit(0)


def fork_one(template: Template, sock: socket.socket, dry: bool, nursery: int) -> None:
    """Reap the dead, fork a client process (``dry``: one that exits at once; ``nursery``
    >= 0: as the init of a PID namespace of its own, :meth:`~.space.ClientSpace.new_pids`),
    send the router its pidfd and the router's ends of its pipes over ``sock``."""
    reap_dead()
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    out_r, out_w = os.pipe()
    if nursery >= 0:
        template.space.new_pids()
    pid = os.fork()
    if pid == 0:
        if dry:
            os._exit(0)
        gc.enable()
        client_main(template, False, down_r, up_w, out_w)       # never returns
    if nursery >= 0:
        template.space.back_to(nursery)
    pidfd = os.pidfd_open(pid)
    socket.send_fds(sock, [b"p"], [down_w, up_r, out_r, pidfd])
    for fd in (down_r, down_w, up_r, up_w, out_r, out_w, pidfd):
        os.close(fd)


def reap_dead(wait: bool = False) -> bool:
    """Reap this process's dead children (``wait``: one, waiting for it); False when it has
    none left to reap now."""
    try:
        while os.waitpid(-1, 0 if wait else os.WNOHANG)[0]:
            if wait:
                return True
    except ChildProcessError:
        pass
    return False


def fork_probe(template: Template) -> Client:
    """Fork the probe (:func:`probe`) from the template, with its own pipes (and, once it
    runs, its own disk: :func:`_isolate`)."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        client_main(template, True, down_r, up_w, out_w)       # never returns
    for fd in (down_r, up_w, out_w):
        os.close(fd)
    template.drain.add(out_r)
    return Client(pid, down_w, up_r, FrameReader(up_r))


def end_client(c: Client) -> int:
    """Kill client ``c``'s process (the probe, a spare never used); its pid, to reap
    (:func:`reap`: its CPU is then counted in the child's, and its pid freed; -1 for one
    the forker started, which the forker reaps)."""
    if c.pidfd >= 0:
        kill_pidfd(c.pidfd)
    else:
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
    c = fork_probe(template)
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


HANDOVER = struct.Struct(">I")
"""The fd socket's message with a client's two pipe ends: that client's id."""


def kill_pidfd(pidfd: int) -> None:
    """SIGKILL the client process of ``pidfd`` (one the forker started) and close it."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.close(pidfd)


def kill(pid: int) -> int:
    """SIGKILL client process ``pid``; its pid, to :func:`reap`."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return pid
