"""``percolator grade``'s engine: one sandboxed child per notebook, verdicts in this process.

For each notebook: read it (never execute it), find its exercise from
``metadata.percolator.exercise``, take the pristine ``exercises/NN_*.ipynb``,
keep only the student's answer cells (:mod:`.answers`), reject a syntax error
or a step the answer does not define itself, draw a secret, compute each
check's parameters from it, start a fresh sandboxed child (:mod:`.sandbox`)
whose student clients the trusted worlds of the checks serve here
(:mod:`.interactive`, :mod:`.trusted`).

Nothing a notebook does can stop a bulk run: a child that times out, exits,
crashes, exhausts its memory or answers garbage scores 0 with the reason, and
its whole session is killed before the next notebook's grade is returned.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import exercise as exercise_module
from . import privileges
from .sandbox import DEVICES, inside, under
from .feedback import escape_text, indent_lines
from .answers import check_answer_name, plan, static_problems, syntax_problems
from .battery import Result
from .framework import spec_of
from .channel import FrameReader, PipeWriter
from .generate import exercise_number
from .interactive import run_trusted
from .sandbox import BOOT
from .trusted import Hub

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parent
SYSTEM_READS = ("/usr", "/lib", "/lib64", "/etc", "/proc")    # read by any Python process
EXERCISES = ROOT / "exercises"
MB = 1 << 20
MAX_NOTEBOOK_MB = 20
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh")
"""Never readable by the child (the private uid cannot read them anyway)."""


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


@dataclass
class Grade:
    """One notebook's grade: a Result per check, and why anything was not run."""
    path: str
    student: str
    exercise: int = 0
    title: str = ""
    checks: list = field(default_factory=list)
    total: int = 0
    problems: list = field(default_factory=list)
    sandbox: str = ""
    submission: str = ""          # the student's folder, zip or notebook (:mod:`.submissions`)
    counted: bool = True          # False: another notebook counts for this exercise
    flags: list = field(default_factory=list)     # e.g. a duplicate student name

    @property
    def n_passed(self) -> int:
        return sum(r.passed for r in self.checks)

    @property
    def score(self) -> float:
        return self.n_passed / self.total if self.total else 0.0

    @property
    def passed(self) -> bool:
        return self.total > 0 and self.n_passed == self.total and not self.problems

    def summary(self) -> str:
        """The terminal report; text a notebook controls is escaped (:func:`.escape_text`)."""
        lines = [f"{escape_text(self.path)} ({escape_text(self.student)}): exercise {self.exercise}"
                 + (f", {self.title}" if self.title else "")]
        lines += [f"  problem: {indent_lines(p, '    | ')}" for p in self.problems]
        lines += [f"  flag: {escape_text(f)}" for f in self.flags]
        lines += [f"  PASS  {r.name}" if r.passed else
                  f"  FAIL  {r.name}: {indent_lines(r.reason, '        | ')}" for r in self.checks]
        lines.append(f"  score: {self.n_passed}/{self.total} checks ({self.score:.0%}), "
                     f"{'PASSED' if self.passed else 'FAILED'}")
        return "\n".join(lines)


def student_name(nb, path: Path, folder) -> str:
    """``metadata.percolator.student`` if set, else the path below ``folder`` without .ipynb."""
    meta = nb.get("metadata", {}).get("percolator", {}) if nb is not None else {}
    name = meta.get("student") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name.strip():
        try:
            name = str(path.relative_to(folder).with_suffix("")) if folder else path.stem
        except ValueError:
            name = path.stem
    name = "".join(ch for ch in name if ch.isprintable())[:100].strip()
    return name or path.stem


def pristine(n: int, exercises_dir) -> "nbformat.NotebookNode":
    matches = sorted(Path(exercises_dir).glob(f"{n:02d}_*.ipynb"))
    if not matches:
        raise FileNotFoundError(f"no {n:02d}_*.ipynb in the pristine exercises {exercises_dir}")
    return nbformat.read(matches[0], as_version=4)


def grade(path, exercises_dir=EXERCISES, limits: Limits = Limits(), folder=None,
          others=()) -> Grade:
    """Grade one notebook; never raises for anything the notebook holds or does."""
    path = Path(path)
    others = tuple(others) + (str(path.resolve()),)
    with PREPARE:                 # one notebook read at a time; the children run in parallel
        g, spec, cells = prepare(path, exercises_dir, folder)
    if spec is None:
        return g
    params = spec.params(secrets.randbits(63))
    info: dict = {}
    g.checks = grade_interactive(_job(g.exercise, spec, cells, exercises_dir, others),
                                 spec, params, limits, info)
    g.sandbox = info.get("sandbox", "")
    g.problems += sorted({r.reason for r in g.checks if r.reason.startswith(NOT_RUN)})
    return g


PREPARE = threading.Lock()
"""Reading, validating and planning a notebook (nbformat's validator is not
thread-safe): one notebook at a time per process."""


def prepare(path: Path, exercises_dir, folder):
    """``(grade, spec, cells)`` ready for the child, or ``(final grade, None, None)``."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_MB * MB:
            raise ValueError(f"larger than {MAX_NOTEBOOK_MB} MB")
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:     # noqa: BLE001 - an unreadable submission scores 0
        return Grade(str(path), student_name(None, path, folder),
                     problems=[f"not a readable notebook: {type(exc).__name__}: {exc}"[:300]]), None, None
    g = Grade(str(path), student_name(nb, path, folder))
    try:
        g.exercise = exercise_number(nb)
        spec = spec_of(exercise_module(g.exercise), check_answer_name(pristine(g.exercise, exercises_dir)))
        cells, missing = plan(nb, pristine(g.exercise, exercises_dir), g.exercise)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        g.problems.append(str(exc))
        return g, None, None
    g.title, g.total = spec.title, len(spec)
    rejected = missing + syntax_problems(cells)
    if not rejected:
        try:
            rejected = static_problems(cells, spec.graded, spec.forbidden_bases, spec.hidden)
        except (RecursionError, MemoryError, ValueError) as exc:
            rejected = [f"your answer cells cannot be analysed: {type(exc).__name__}"]
    if rejected:
        return _all_fail(g, spec, rejected, "not run: "), None, None
    return g, spec, cells


def _all_fail(g: Grade, spec, problems: list, prefix: str) -> Grade:
    g.problems += problems
    g.checks = [Result(c.name, False, f"{prefix}{problems[0]}"[:300]) for c in spec.checks]
    return g


# -- the child's job -------------------------------------------------------------

def _module_files(targets) -> list:
    files = []
    for target in targets:
        spec = importlib.util.find_spec(target.partition(":")[0])
        if spec and spec.origin:
            files.append(os.path.realpath(spec.origin))
            if spec.cached:
                files.append(os.path.realpath(spec.cached))
            files += _compiled_variants(spec.origin)
    return files


def _compiled_variants(origin: str) -> list:
    """Every compiled form of a module (``-O``/``-OO`` ones too: ``.opt-1.pyc``, ``.opt-2.pyc``)."""
    source = Path(origin)
    cache = source.parent / "__pycache__"
    found = [source.with_suffix(".pyc")]
    if cache.is_dir():
        found += sorted(cache.glob(source.stem + ".*.pyc"))
    return [os.path.realpath(f) for f in found]


def _is_repository(path: Path) -> bool:
    return any((path / marker).exists() for marker in (".git", "solutions", "exercises"))


def read_policy(spec, exercises_dir, others) -> dict:
    """What the child may read: the Python installation and the package, minus secrets.

    Not read as the installation: a ``sys.path`` entry that is a repository, or that holds
    the working directory, the exercises or a submission (see :func:`_private_places`).
    """
    hidden = _module_files(spec.hidden)
    prefixes = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    private = _private_places(exercises_dir, others)
    entries = {str(Path(p).resolve()) for p in sys.path if p and Path(p).exists()}
    repos = {p for p in entries | {str(ROOT)} if Path(p).is_dir() and _is_repository(Path(p))}
    holding = {p for p in entries if not under(p, prefixes) and any(inside(q, p) for q in private)}
    python = sorted(set(prefixes) | (entries - repos - holding))
    needed = prefixes + SYSTEM_READS + (str(PACKAGE),)
    denied = sorted(repos | {q for q in holding | set(private) if not under(q, prefixes)
                             and not any(inside(r, q) for r in needed)})
    files = [str(f) for f in sorted(PACKAGE.rglob("*"))
             if f.is_file() and "grading" not in f.relative_to(PACKAGE).parts
             and str(f.resolve()) not in hidden]
    return {
        "allow_read": [str(PACKAGE)] + python,
        "deny_read": denied,
        "hard_deny": [str(PACKAGE / "grading"), os.path.realpath(exercises_dir)] + hidden
                     + [os.path.realpath(o) for o in others] + list(SYSTEM_SECRETS),
        "landlock": {"read_dirs": python + list(SYSTEM_READS),
                     "list_dirs": [str(PACKAGE)], "read_files": files + list(DEVICES)},
        "expose": python + [str(PACKAGE)],
    }


def _private_places(exercises_dir, others) -> list:
    """The grader's working directory, the exercises and the submissions: places whose
    listing is nobody's business. A ``sys.path`` entry holding one of them (``python -m``
    puts the working directory there) is not read as part of the Python installation."""
    places = [os.path.realpath(exercises_dir)] + [os.path.realpath(o) for o in others]
    places += [os.path.dirname(p) for p in places[1:]]
    try:
        places.append(os.path.realpath(os.getcwd()))
    except OSError:                     # a working directory that was deleted: nothing to hide
        pass
    return sorted(set(places))


def _job(n, spec, cells, exercises_dir, others) -> dict:
    return {"exercise": n, "answer": spec.answer,
            "cells": [{"id": c.id, "kind": c.kind, "source": c.source} for c in cells],
            **read_policy(spec, exercises_dir, others)}


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
    """Start the sandboxed child in a new session (it locks itself down: :mod:`.sandbox`)."""
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


# -- interactive exercises: the child is a client of the trusted world ------------------

NOT_RUN = "not run: "
SETUP_SECONDS = 20.0      # the child's start: imports, context cells, answer cells


def grade_interactive(job: dict, spec, params: dict, limits: Limits, info=None) -> list:
    """Every check of ``spec`` judged by the trusted world against a sandboxed client.

    A check that runs past its limit (or breaks the channel) costs only that
    check: the child is killed and a fresh one serves the remaining checks.
    """
    results, todo = {}, list(spec.checks)
    while todo:
        with InteractiveChild(job, spec, limits) as child:
            problem = child.wait_ready()
            if info is not None and child.sandbox:
                info["sandbox"] = child.sandbox
            if problem is not None:
                results.update({c.name: Result(c.name, False, problem[:300]) for c in todo})
                break
            while todo and not child.hub.broken:
                check = todo.pop(0)
                results[check.name] = run_trusted(check, child.hub, params[check.name])
    return [results[c.name] for c in spec.checks]


class InteractiveChild:
    """A sandboxed child connected by two pipes to a :class:`~.trusted.Hub` in this process."""

    def __init__(self, job: dict, spec, limits: Limits):
        self.base = Path(tempfile.mkdtemp(prefix="percolator-grade-"))
        self.work, self.io = self.base / "work", self.base / "io"
        (self.work / "tmp").mkdir(parents=True)
        self.io.mkdir()
        self.job, self.spec, self.limits = job, spec, limits
        self.proc, self.fds, self.privileges, self.sandbox = None, [], {}, ""

    def __enter__(self):
        down_r, down_w = os.pipe()          # world -> client
        up_r, up_w = os.pipe()              # client -> world
        result = os.open(self.io / "result", os.O_WRONLY | os.O_CREAT, 0o600)
        self.fds = [down_r, down_w, up_r, up_w, result]
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
        writer = PipeWriter(down_w)
        self.hub = Hub(None, self.spec.roles, student_receive=FrameReader(up_r).receive,
                       student_write=lambda data: _write_quietly(writer, data))
        return self

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
        if self.proc is not None:
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


def _write_quietly(writer: PipeWriter, data: bytes) -> None:
    try:
        writer.write(data)
    except OSError:
        pass                        # the child is gone: its channel's reader reports it


# -- many notebooks ----------------------------------------------------------------

def grade_all(paths, exercises_dir=EXERCISES, limits: Limits = Limits(), jobs: int = 1,
              folder=None, progress=None) -> list:
    """Grade every notebook, ``jobs`` at a time; grades in the order of ``paths``.

    With ``jobs > 1`` each notebook is graded in one of ``jobs`` worker
    processes (the trusted worlds are Python that holds the GIL: worker
    threads would take turns on one core). ``progress``: its ``update(1)`` is
    called as each notebook is done.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    paths = [Path(p) for p in paths]
    others = tuple(str(p.resolve()) for p in paths)
    tasks = [(k, path, exercises_dir, limits, folder, others) for k, path in enumerate(paths)]
    grades: dict = {}
    if jobs == 1 or len(tasks) < 2:
        return [_tick(progress, g) for _, g in map(_grade_task, tasks)]
    context = multiprocessing.get_context("spawn")   # fresh interpreters: nothing forked
    with context.Pool(min(jobs, len(tasks)), initializer=_worker_started,
                      initargs=(list(sys.path),)) as pool:
        for k, g in pool.imap_unordered(_grade_task, tasks):
            grades[k] = _tick(progress, g)
    return [grades[k] for k in range(len(tasks))]


def _grade_task(task) -> tuple:
    """``(k, grade)`` of one notebook; a bulk run always finishes, so never raises."""
    k, path, exercises_dir, limits, folder, others = task
    try:
        return k, grade(path, exercises_dir, limits, folder, others)
    except Exception as exc:     # noqa: BLE001 - a bulk run always finishes
        return k, Grade(str(path), path.stem,
                        problems=[f"grader error: {type(exc).__name__}: {exc}"])


def _tick(progress, g: "Grade") -> "Grade":
    if progress is not None:
        progress.update(1)
    return g


def _worker_started(path: list) -> None:
    """In a grading worker: the main process's ``sys.path`` exactly (the sandbox's read
    policy derives from it; a spawned interpreter has the working directory in place of
    ``""``, and that would let a child read it). Ctrl-C is the main process's to handle;
    SIGTERM (the pool ending early) unwinds, so the notebook's sandbox session is killed
    on the way out."""
    sys.path[:] = path
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def _cell(text) -> str:
    """A CSV cell a spreadsheet will not run as a formula, control characters escaped."""
    text = escape_text(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def check_columns(grades) -> list:
    """``(exercise, check name)`` in first-seen order: one CSV column each."""
    columns = []
    for g in grades:
        for r in g.checks:
            if (g.exercise, r.name) not in columns:
                columns.append((g.exercise, r.name))
    return columns


def write_csv(grades, file) -> None:
    """student, notebook, exercise, one 0/1 column per check, passed, total, score, problems."""
    columns = check_columns(grades)
    several = len({n for n, _ in columns}) > 1
    with open(file, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "exercise"]
                   + [f"ex{n}: {name}" if several else name for n, name in columns]
                   + ["checks_passed", "checks_total", "score", "problems", "submission",
                      "counted", "flags"])
        for g in grades:
            outcome = {(g.exercise, r.name): int(r.passed) for r in g.checks}
            w.writerow([_cell(g.student), _cell(g.path), g.exercise]
                       + [outcome.get(c, "") for c in columns]
                       + [g.n_passed, g.total, f"{g.score:.3f}", _cell("; ".join(g.problems)),
                          _cell(g.submission), "yes" if g.counted else "no",
                          _cell("; ".join(g.flags))])


def gradescope(grades) -> dict:
    """Gradescope's autograder ``results.json``: one test per check, 1 point each."""
    tests = []
    for g in grades:
        prefix = escape_text(f"{Path(g.path).name}: ") if len(grades) > 1 else ""
        for r in g.checks:
            tests.append({"name": f"{prefix}{r.name}", "score": float(r.passed), "max_score": 1.0,
                          "status": "passed" if r.passed else "failed",
                          "output": "" if r.passed else escape_text(r.reason, newlines=True),
                          "visibility": "visible"})
        if not g.checks:
            tests.append({"name": f"{prefix}notebook", "score": 0.0,
                          "max_score": 1.0 if g.counted else 0.0, "status": "failed",
                          "output": escape_text("; ".join(g.problems + g.flags) or "not graded",
                                                newlines=True), "visibility": "visible"})
    output = "\n\n".join(g.summary() for g in grades)
    return {"score": float(sum(t["score"] for t in tests)), "output": output,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
