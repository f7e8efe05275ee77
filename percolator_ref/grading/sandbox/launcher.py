"""Process control of one notebook's sandboxed child: its limits, its start, its end.

:class:`InteractiveChild` starts ``python -I -B -c BOOT`` (:mod:`.child`) in a
new session, in a throwaway working directory, with a scrubbed environment,
rlimits and the job on stdin, and connects its two pipes to a
:class:`~..judge.hub.Hub` in the grader; on the way out it kills the child's
whole session (:func:`kill_session`) and sweeps what the child's private uid
left (:mod:`.privileges`).
"""
from __future__ import annotations

import collections
import json
import os
import queue
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import privileges
from ..channel import ROUTED, FrameReader, PipeWriter, ProtocolError, framed, parse, routed
from .processes import ENDS, HANDOVER, SPAWN
from .policy import ROOT
from .child import BOOT
from ..judge.hub import Diverged, Hub
from .transcripts import Transcripts, after, recall_on

MB = 1 << 20
NOT_RUN = "not run: "
SETUP_SECONDS = 20.0      # the child's start: imports, context cells, answer cells
GRACE_SECONDS = 10.0      # past its checks' limits, how long a child lives before its watchdog


@dataclass(frozen=True)
class Limits:
    """What one notebook's child may use.

    Time is not among them: each check has its own limit
    (``Exercise.check(limit=...)``) and a notebook's limit is derived from them
    (:data:`SETUP_SECONDS` plus their sum).
    """
    memory_mb: int = 1024            # address space
    file_mb: int = 16                # largest file it may write
    open_files: int = 256

    def __post_init__(self):
        for name in ("memory_mb", "file_mb", "open_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")


def _rlimits(limits: Limits, seconds: float) -> dict:
    """The child's rlimits; ``seconds``: the notebook's time limit (CPU seconds, 2 more)."""
    cpu = int(seconds) + 2
    nproc = None if os.geteuid() == 0 else _user_tasks() + 64
    return {"RLIMIT_AS": limits.memory_mb * MB, "RLIMIT_CPU": cpu,
            "RLIMIT_FSIZE": limits.file_mb * MB, "RLIMIT_NOFILE": limits.open_files,
            "RLIMIT_CORE": 0, "RLIMIT_NPROC": nproc}


def _user_tasks() -> int:
    uid, count = os.getuid(), 0
    if not Path("/proc").is_dir():
        return 4096
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += len(os.listdir(entry / "task"))
        except OSError:
            continue
    return count


def _environment(work: Path) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work / "tmp"),
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}


def _popen(stdin, output, fds: tuple, work: Path):
    """Start the sandboxed child in a new session (it locks itself down: :mod:`.child`)."""
    return subprocess.Popen([sys.executable, "-I", "-B", "-c", BOOT, str(ROOT)],
                            stdin=stdin, stdout=output, stderr=subprocess.STDOUT,
                            pass_fds=fds, cwd=work, env=_environment(work),
                            start_new_session=True, close_fds=True)


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the child's; it is not reaped yet)."""
    for _ in range(3):
        try:
            os.killpg(sid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in _session_members(sid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _session_members(sid: int) -> list:
    members = []
    if not Path("/proc").is_dir():
        return members
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == sid:
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
            members.append(int(entry.name))
    return members


class InteractiveChild:
    """A sandboxed child connected by two pipes to a :class:`~..judge.hub.Hub` in this process."""

    def __init__(self, job: dict, spec, limits: Limits, seconds: float, recall: bool = True):
        """``seconds``: how long the child may live once started (its checks' limits and
        :data:`SETUP_SECONDS`); past it, and :data:`GRACE_SECONDS` more, the watchdog
        kills its session. ``recall``: False once an earlier child of the same notebook
        found a client that is not a function of what it heard (:mod:`.transcripts`)."""
        self.seconds, self.watchdog, self.recall = seconds, None, recall
        self.ending = threading.Lock()
        self.job, self.spec, self.limits = job, spec, limits
        self.proc, self.fds, self.privileges, self.sandbox = None, [], {}, ""
        self.pipes = None
        self.base = Path(tempfile.mkdtemp(prefix="percolator-grade-"))
        self.work, self.io = self.base / "work", self.base / "io"
        try:
            (self.work / "tmp").mkdir(parents=True)
            self.io.mkdir()
        except BaseException:
            shutil.rmtree(self.base, ignore_errors=True)
            raise

    def __enter__(self):
        """Start the child; if it cannot start (a full disk, no processes left), nothing
        of it is left behind (its folder, its descriptors) and the error propagates."""
        try:
            return self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _start(self):
        down_r, down_w = os.pipe()          # world -> router (spawn, gone, bye)
        self.fds += [down_r, down_w]
        up_r, up_w = os.pipe()              # router -> world (ready, answer_error)
        self.fds += [up_r, up_w]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.fds += [ours.detach(), theirs.detach()]       # each client's pipes come here
        result = os.open(self.io / "result", os.O_WRONLY | os.O_CREAT, 0o600)
        self.fds.append(result)
        notebook = SETUP_SECONDS + self.spec.time_limit
        job = dict(self.job, workdir=str(self.work), nonce=secrets.token_hex(16), result_fd=result,
                   channel=[down_r, up_w], fd_socket=self.fds[-2],
                   limits=_rlimits(self.limits, notebook))
        job["hard_deny"] = job["hard_deny"] + [str(self.io)]
        job["privileges"] = self.privileges = privileges.plan(job["expose"])
        privileges.prepare_workdir(self.base, self.work, job["privileges"])
        (self.io / "job").write_text(json.dumps(job))
        with open(self.io / "job", "rb") as stdin, open(self.io / "output", "wb") as output:
            self.proc = _popen(stdin, output, (down_r, up_w, job["fd_socket"], result), self.work)
        for fd in (down_r, up_w, job["fd_socket"], result):
            os.close(fd)
            self.fds.remove(fd)
        self.pipes = ClientPipes(down_w, up_r, self.fds.pop(), self.recall)   # it closes the socket
        self.hub = Hub(None, self.spec.roles, student_receive=self.pipes.receive,
                       student_write=self.pipes.write)
        self.hub.transcripts = self.pipes.transcripts
        self.watchdog = threading.Timer(self.seconds + GRACE_SECONDS, self.expire)
        self.watchdog.daemon = True
        self.watchdog.start()
        return self

    def expire(self) -> None:
        """The watchdog: the child outlived every limit of the checks it serves; kill its
        session (the world then meets a closed channel, whatever it was waiting for)."""
        with self.ending:
            if self.proc is not None and self.proc.returncode is None:
                kill_session(self.proc.pid)

    def wait_ready(self):
        """None once the child's answer cells ran; else the reason every check fails."""
        try:
            host, msg = self.hub.receive(SETUP_SECONDS)
        except queue.Empty:
            return f"{NOT_RUN}your notebook's cells did not finish within {SETUP_SECONDS:g} s"
        if isinstance(msg, dict) and msg.get("op") == "ready":
            self.sandbox = str(msg.get("landlock", ""))[:1000]
            return None
        if isinstance(msg, dict) and msg.get("op") == "answer_error":
            return f"{NOT_RUN}your answer cell raised {str(msg.get('text'))[:250]}"
        return f"{NOT_RUN}{self.exit_reason()}"

    def exit_reason(self) -> str:
        """Why the child stopped before it was ready (its exit status)."""
        try:
            code = self.proc.wait(timeout=5) if self.proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            why = {"SIGSEGV": "crashed (segmentation fault)", "SIGKILL": "was killed",
                   "SIGABRT": f"aborted (out of memory? the limit is {self.limits.memory_mb} MB)"}
            return f"the grading process {why.get(name, 'died of ' + name)} before it was ready"
        if code is not None:
            return (f"the grading process exited with status {code} before it was ready "
                    f"(os._exit or a crash in your code?)")
        return "the grading process of your code stopped before it was ready"

    def __exit__(self, *exc):
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.proc is not None:
            with self.ending:               # not reaped while the watchdog kills its session
                kill_session(self.proc.pid)
                self.proc.wait()
            privileges.sweep(self.privileges)
        if self.pipes is not None:
            self.pipes.close()
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)
        return False


class ClientPipes:
    """The grader's ends of a child's channel and of each of its client processes' pipes.

    The child's channel carries routed frames (:func:`~.channel.routed`) between the
    world and the child's router: ``spawn``, ``gone`` and ``bye``, and the child's
    ``ready``. For a spawn the router passes the new client's two pipe ends over the fd
    socket; from then on the world's messages to that client are written to its pipe,
    and whatever is read from its pipe is that client's (its ``cid`` is set here,
    whatever the message says). A client whose pipe ends, or whose frame breaks the
    channel's rules, reads as ``{"cid", "op": "exited"}`` (its protocol violation).
    """

    def __init__(self, down: int, up: int, fd_socket: int, recall: bool = True):
        self.channel = PipeWriter(down, deadline=True)
        self.readers = {up: FrameReader(up, routed=True)}     # fd -> reader
        self.up, self.socket = up, socket.socket(fileno=fd_socket)
        self.clients: dict = {}           # cid -> (PipeWriter to it, the fd it writes)
        self.owner: dict = {}             # a client's fd -> its cid
        self.pending: collections.deque = collections.deque()
        self.transcripts = Transcripts(on=recall and recall_on())
        self.virtual: dict = {}           # cid -> the bodies a client with no process heard
        self.keys: dict = {}              # cid -> the key of the history it heard so far
        self.awaiting: dict = {}          # a real client's cid -> the history it answers next
        self.poll = select.poll()
        self.poll.register(up, select.POLLIN)

    def write(self, data: bytes, deadline: float) -> None:
        """Carry the world's routed frame ``data`` (TimeoutError if not taken by
        ``deadline``; a client or a child gone is reported by :meth:`receive`). A client
        starts virtual while :attr:`transcripts` recalls its answers (:meth:`tell`)."""
        cid, body = ROUTED.unpack_from(data)[1], data[ROUTED.size:]
        if cid in self.virtual or (cid not in self.clients and self.transcripts.on
                                   and body.startswith(SPAWN)):
            self.tell(cid, body, deadline)
            return
        if cid not in self.clients:
            _write_quietly(self.channel, data, deadline)
            if body.startswith(SPAWN):
                self.transcripts.processes += 1
                self.adopt(cid, deadline)
                self.keys[cid] = self.awaiting[cid] = after(b"", body)
            return
        if body in ENDS:
            _write_quietly(self.channel, data, deadline)
            self.forget(cid)
            return
        self.keys[cid] = self.awaiting[cid] = after(self.keys[cid], body)
        _write_quietly(self.clients[cid][0], framed(body), deadline)

    def tell(self, cid: int, body: bytes, deadline: float) -> None:
        """Tell virtual client ``cid`` ``body``: its recorded answer is what it says next;
        with none recorded it becomes a process (:meth:`materialize`)."""
        if body in ENDS:
            del self.virtual[cid], self.keys[cid]
            self.transcripts.virtual += 1
            return
        self.virtual.setdefault(cid, []).append(body)
        self.keys[cid] = key = after(self.keys.get(cid, b""), body)
        found = self.transcripts.recall(key)
        if found is None:
            self.materialize(cid, deadline)
            return
        msg = _parsed(found)
        msg["cid"] = cid
        self.pending.append(msg)

    def materialize(self, cid: int, deadline: float) -> None:
        """Fork virtual client ``cid`` and tell it its whole history again: each answer but
        the last must be the recorded one (else :class:`~..judge.hub.Diverged`); the last
        comes through :meth:`receive`, as any client's (as do the frames it sent ahead,
        read from its pipe with the answers)."""
        history = self.virtual.pop(cid)
        self.transcripts.processes += 1
        _write_quietly(self.channel, routed(cid, history[0]), deadline)
        self.adopt(cid, deadline)
        if cid not in self.clients:               # the child is gone: its channel says so
            return
        writer, up = self.clients[cid]
        key = after(b"", history[0])
        for body in history[1:]:
            self.transcripts.check(key, self.answer_of(up, deadline))
            key = after(key, body)
            _write_quietly(writer, framed(body), deadline)
        self.awaiting[cid] = key
        self.deliver(up)

    def answer_of(self, up: int, deadline: float) -> bytes:
        """The next frame's body from a client's pipe (a client that ends or breaks the
        channel instead has diverged; TimeoutError past ``deadline``)."""
        reader = self.readers[up]
        try:
            reader.fill(reader.header.size, deadline)
            reader.fill(reader.header.size + reader.header.unpack_from(reader.buffer)[0],
                        deadline)
            return reader.take()[1]
        except (EOFError, ProtocolError):
            self.transcripts.stop()
            raise Diverged("a client ended while it heard its history again") from None

    def adopt(self, cid: int, deadline: float) -> None:
        """Take client ``cid``'s pipe ends from the router (TimeoutError past ``deadline``)."""
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.socket], [], [], left)[0]:
            raise TimeoutError("the router handed no pipes in time")
        try:
            message, fds, _, _ = socket.recv_fds(self.socket, HANDOVER.size, 2)
        except OSError:
            return                        # the child is gone: its channel says so
        if len(fds) != 2 or message != HANDOVER.pack(cid):
            for fd in fds:                # the child is gone (no pipes), or out of step:
                os.close(fd)              # the client never answers, its check times out
            return
        down, up = fds
        self.clients[cid] = (PipeWriter(down, deadline=True), up)
        self.owner[up], self.readers[up] = cid, FrameReader(up)
        self.poll.register(up, select.POLLIN)

    def heard_from(self, cid: int, body: bytes, msg: dict) -> None:
        """Real client ``cid`` said ``body``: the answer to its history, recorded; a message
        nobody asked for means it is not a function of what it heard (recall stops)."""
        key = self.awaiting.get(cid)
        if key is None:
            self.transcripts.stop()
        elif msg.get("op") != "malformed":
            self.transcripts.record(key, body)
        self.awaiting[cid] = None

    def forget(self, cid: int) -> None:
        self.keys.pop(cid, None)
        self.awaiting.pop(cid, None)
        writer, up = self.clients.pop(cid)
        del self.owner[up], self.readers[up]
        self.poll.unregister(up)
        for fd in (writer.fd, up):
            os.close(fd)

    def receive(self, timeout: float):
        """The next message from the child or one of its clients; None once the child's
        channel has closed; TimeoutError if none came within ``timeout`` s."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self.pending:
            left = deadline - time.monotonic()
            events = self.poll.poll(max(left, 0) * 1000) if left > 0 else []
            if not events:
                raise TimeoutError("no message in time")
            for fd, _ in events:
                if fd == self.up or fd in self.owner:
                    self.read(fd)
        return self.pending.popleft()

    def read(self, fd: int) -> None:
        """One read from the child's channel or a client's pipe, then :meth:`deliver`."""
        self.deliver(fd, ended=not self.readers[fd].read_some())

    def deliver(self, fd: int, ended: bool = False) -> None:
        """The whole messages read from ``fd`` so far, each with the id of the client it is
        from (a client's: its pipe's; else the frame's); ``ended``: the pipe has ended."""
        reader, cid = self.readers[fd], self.owner.get(fd)
        try:
            while (found := reader.take()) is not None:
                msg = _parsed(found[1])
                if cid is not None:
                    self.heard_from(cid, found[1], msg)
                msg["cid"] = found[0][1] if cid is None else cid
                self.pending.append(msg)
        except ProtocolError:             # a frame too large
            ended = True
        if ended and cid is None:         # the child's channel: the child is gone
            self.pending.append(None)
            self.poll.unregister(fd)
        elif ended:
            self.pending.append({"cid": cid, "op": "exited"})
            self.forget(cid)

    def close(self) -> None:
        for cid in list(self.clients):
            self.forget(cid)
        self.virtual.clear()
        self.socket.close()


def _parsed(body: bytes) -> dict:
    try:
        return parse(body)
    except ProtocolError:
        return {"op": "malformed"}


def _write_quietly(writer: PipeWriter, data: bytes, deadline: float) -> None:
    """Write a frame to the child by ``deadline`` (TimeoutError if it stopped reading)."""
    try:
        writer.write(data, deadline)
    except TimeoutError:
        raise
    except OSError:
        pass                        # the child is gone: its channel's reader reports it
