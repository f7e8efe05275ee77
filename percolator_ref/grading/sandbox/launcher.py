"""Process control of one notebook's sandboxed child: its limits, its start, its end.

:class:`InteractiveChild` starts ``python -I -B -c BOOT`` (:mod:`.child`) in a
new session, in a throwaway working directory, with a scrubbed environment,
rlimits and the job on stdin, and connects its two pipes to a
:class:`~..judge.hub.Hub` in the grader; on the way out it kills the child's
whole session (:func:`kill_session`) and sweeps what the child's private uid
left (:mod:`.privileges`).
"""
from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from . import privileges
from ..channel import FrameReader, PipeWriter
from .policy import ROOT
from .child import BOOT
from ..judge.hub import Hub

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

    def __init__(self, job: dict, spec, limits: Limits, seconds: float):
        """``seconds``: how long the child may live once started (its checks' limits and
        :data:`SETUP_SECONDS`); past it, and :data:`GRACE_SECONDS` more, the watchdog
        kills its session."""
        self.seconds, self.watchdog = seconds, None
        self.ending = threading.Lock()
        self.job, self.spec, self.limits = job, spec, limits
        self.proc, self.fds, self.privileges, self.sandbox = None, [], {}, ""
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
        down_r, down_w = os.pipe()          # world -> client
        self.fds += [down_r, down_w]
        up_r, up_w = os.pipe()              # client -> world
        self.fds += [up_r, up_w]
        result = os.open(self.io / "result", os.O_WRONLY | os.O_CREAT, 0o600)
        self.fds.append(result)
        notebook = SETUP_SECONDS + self.spec.time_limit
        job = dict(self.job, workdir=str(self.work), nonce=secrets.token_hex(16), result_fd=result,
                   channel=[down_r, up_w], limits=_rlimits(self.limits, notebook))
        job["hard_deny"] = job["hard_deny"] + [str(self.io)]
        job["privileges"] = self.privileges = privileges.plan(job["expose"])
        privileges.prepare_workdir(self.base, self.work, job["privileges"])
        (self.io / "job").write_text(json.dumps(job))
        with open(self.io / "job", "rb") as stdin, open(self.io / "output", "wb") as output:
            self.proc = _popen(stdin, output, (down_r, up_w, result), self.work)
        for fd in (down_r, up_w, result):
            os.close(fd)
            self.fds.remove(fd)
        writer = PipeWriter(down_w, deadline=True)
        self.hub = Hub(None, self.spec.roles, student_receive=FrameReader(up_r).receive,
                       student_write=lambda data, deadline: _write_quietly(writer, data, deadline))
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
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)
        return False


def _write_quietly(writer: PipeWriter, data: bytes, deadline: float) -> None:
    """Write a frame to the child by ``deadline`` (TimeoutError if it stopped reading)."""
    try:
        writer.write(data, deadline)
    except TimeoutError:
        raise
    except OSError:
        pass                        # the child is gone: its channel's reader reports it
