"""One process per client incarnation: the sandbox child forks each client the world spawns.

The sandbox child (:mod:`.sandbox`) becomes a *template* once the context cells
have run and the reference is hidden: it compiles the answer cells but runs no
student code itself, and it is not guarded (the guard refuses ``os.fork``).
It then routes (:func:`route`): for each ``spawn`` of the trusted world it forks
a client process that closes every descriptor but its own pair of pipes, moves
into its own work subfolder, installs the guard (writes only in that
subfolder, no reading of its siblings), runs the answer cells and serves that
one client (:class:`~.clients.ClientHost`). The router stamps each message
from a client's pipe with that client's id, so a client speaks only for
itself; a crash (``gone``) or the end of a family (``bye``) kills the process,
and a restart is a fresh fork. Clients share no memory and no files: they
reach each other only through the world.
"""
from __future__ import annotations

import gc
import itertools
import os
import select
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Callable

from .channel import FrameReader, PipeWriter, ProtocolError, frame
from .clients import ClientHost
from .framework import describe_exception

PROBE = 0                # the first fork: runs the answer cells once, says whether they fail


@dataclass
class Template:
    """What every client process starts from: the child's state after the reference is hidden.

    ``codes``: the compiled answer cells; ``guard(folder)``: the audit hook for a
    client whose work folder is ``folder``; ``workdir``: the sandbox's folder.
    """
    spec: object
    namespace: dict
    codes: list
    guard: Callable
    workdir: str


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


def _keep_only(fds) -> None:
    """Close every descriptor but 0-2 and ``fds`` (the other clients' pipes, the world's)."""
    low = 3
    for fd in sorted(fds):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _enter(template: Template, cid: int, down: int, up: int) -> str:
    """In a fresh fork: keep only its pipes, move into its folder, install the guard;
    then run the answer cells (returns their error, or "")."""
    _keep_only((down, up))
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
    """Client ``cid``'s inbox in its own process: the world's messages, read from its pipe
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
    The client runs in this process's main thread, on the first message (its spawn)."""
    try:
        error = _enter(template, cid, down, up)
        out = PipeWriter(up)
        if cid == PROBE:
            out.send({"op": "probe", "error": error})
            return
        inbox = PipeInbox(down)
        spawn = inbox.get()
        if spawn.get("op") != "spawn" or type(spawn.get("cid")) is not int:
            return
        host = ClientHost(out.send, template.spec.roles,
                          template.namespace.get(template.spec.answer), ttl=10.0)
        host.inboxes[spawn["cid"]] = inbox
        host.client(spawn["cid"], spawn)
    finally:
        os._exit(0)


def fork_client(template: Template, cid: int, scrub: Callable = lambda: None) -> Client:
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


def end_client(c: Client) -> None:
    """Kill client ``c``'s process (a crash, or the end of its family)."""
    try:
        os.kill(c.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for fd in (c.down, c.up):
        try:
            os.close(fd)
        except OSError:
            pass


def probe(template: Template) -> str:
    """Run the answer cells once in a guarded fork: their error, or ""."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)    # ended clients are reaped by the kernel
    c = fork_client(template, PROBE)
    try:
        msg = c.reader.receive(3600.0)
    except TimeoutError:
        msg = None
    end_client(c)
    if not isinstance(msg, dict) or msg.get("op") != "probe":
        return "your answer cells ended the grading process"
    return str(msg.get("error") or "")


def messages(reader: FrameReader):
    """The whole messages on ``reader``'s fd once poll says it is readable (one read,
    which does not block), then None if it is closed or a frame is malformed."""
    try:
        chunk = os.read(reader.fd, reader.CHUNK)
    except OSError:
        chunk = b""
    if not chunk:
        yield None
        return
    reader.buffer += chunk
    while True:
        try:
            msg = reader.receive(0)        # a frame already whole in the buffer, or none
        except TimeoutError:
            return
        yield msg
        if msg is None:
            return


class Router:
    """The template's loop: the world's messages to their client's process, and back.

    A spare client process is forked ahead, at the top of the loop (where the router holds
    no message), so a spawn finds one whose answer cells have run already.
    """

    def __init__(self, template: Template, fds):
        self.template, self.down, self.up = template, fds[0], fds[1]
        self.world = FrameReader(fds[0])
        self.clients: dict = {}
        self.spare, self.serial = None, itertools.count(PROBE + 1)
        self.poll = select.poll()
        self.poll.register(self.down, select.POLLIN)

    def run(self) -> None:
        gc.freeze()                     # the forks share the template's pages untouched
        try:
            while True:
                if self.spare is None:
                    self.spare = fork_client(self.template, next(self.serial), self.scrub)
                for fd, _ in self.poll.poll():
                    if fd == self.down and not self.from_world():
                        return
                    if fd != self.down:
                        self.from_client(fd)
        finally:
            for c in list(self.clients.values()) + [self.spare] * (self.spare is not None):
                end_client(c)

    def scrub(self) -> None:
        """In a fresh fork: drop the router's buffers (other clients' bytes) and clients."""
        self.world.buffer = bytearray()
        for c in self.clients.values():
            c.reader.buffer = bytearray()
        self.clients, self.world = {}, None

    def from_world(self) -> bool:
        for msg in messages(self.world):
            if msg is None:
                return False
            self.to_client(msg)
        return True

    def to_client(self, msg: dict) -> None:
        cid, op = msg.get("cid"), msg.get("op")
        if op == "spawn" and type(cid) is int and cid not in self.clients:
            self.clients[cid] = self.spare or fork_client(self.template, next(self.serial))
            self.spare = None
            self.poll.register(self.clients[cid].up, select.POLLIN)
        c = self.clients.get(cid)
        if c is None:
            return
        if op in ("gone", "bye"):
            self.drop(cid)
            return
        try:
            write_all(c.down, frame(msg))
        except OSError:                  # it exited: its end of the pipe is closed
            pass

    def from_client(self, fd: int) -> None:
        cid = next((k for k, c in self.clients.items() if c.up == fd), None)
        if cid is None:
            self.poll.unregister(fd)
            return
        for msg in messages(self.clients[cid].reader):
            if msg is None:              # it exited, or sent a malformed frame
                self.drop(cid)
                msg = {"op": "exited"}   # the world takes it as a protocol violation
            msg["cid"] = cid             # stamped here: a client speaks only for itself
            self.to_world(msg, cid)

    def to_world(self, msg: dict, cid: int) -> None:
        try:
            data = frame(msg)
        except (ProtocolError, TypeError, ValueError):
            data = frame({"cid": cid, "op": "malformed"})
        write_all(self.up, data)

    def drop(self, cid: int) -> None:
        c = self.clients.pop(cid)
        self.poll.unregister(c.up)
        end_client(c)

