"""Least privilege (issue 19, item 4): attacks through file descriptors, flags, devices,
other submissions and aliased modules score 0 and harm nothing, as root and as an
unprivileged user.

Each hostile answer below is exercise 5's wrong oracle plus an attack; an attack
that succeeds records it in ``HARMED`` and then defines the correct oracle, so
any success shows as a score above 0, besides the harm the test looks for
(modes, owners, mtimes, flags of the kit's files, processes left running). Exercise 1's
attacks on the trusted world (forged observations, a forged report, the job read from the
grader's frames, an optimized ``.pyc``: :data:`grading_helpers.CLIENT_ATTACKS`) are graded
by the unprivileged grader too.

:mod:`percolator_ref.grading.sandbox.privileges`'s kernel layers are also tested alone
(no audit hook, no Landlock): a process that called ``isolate`` cannot change a
file outside its directory through a descriptor, read ``/etc/shadow`` or keep a
``setsid`` double fork alive after its grading ends.
"""
import ctypes
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from percolator_ref import grading
from percolator_ref.grading.sandbox import privileges
from percolator_ref.grading.grade.grader import Limits, grade_all
from percolator_ref.grading.sandbox.policy import read_policy
from percolator_ref.grading.sandbox.child import (check_write, denied_module, fd_inside, inside,
                                            readable)
from grading_helpers import (CLIENT_ATTACKS, REPO, optimized_pyc_of, solution_answer,
                             student_notebook)

ROOT = os.geteuid() == 0
LINUX = sys.platform.startswith("linux")
N5 = len(grading.exercise(5).exercise.checks)          # exercise 5's checks
N1 = len(grading.exercise(1).exercise.checks)          # exercise 1's checks
WRONG_ORACLE = '''
class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.next = first_timestamp

    def get_timestamp(self):
        self.next += 1
        return self.next
'''
UNLOCK = '''
if HARMED:                      # the attack worked: now answer correctly, so the grade shows it
    exec({solution!r})
'''
VICTIMS = '''
import os, sys, percolator_ref
HARMED = []
VICTIMS = [os.path.realpath(sys.executable), percolator_ref.__file__, {pristine!r}]


def attempt(name, action):
    try:
        action()
    except Exception:
        return
    HARMED.append(name)
'''
ATTACKS = {
    "changes kit files through a file descriptor": '''
import fcntl, struct
for victim in VICTIMS:
    def fd():
        return os.open(victim, os.O_RDONLY)
    attempt("fchmod", lambda: os.chmod(fd(), 0o777))
    attempt("os.fchmod", lambda: os.fchmod(fd(), 0o777))
    attempt("fchown", lambda: os.chown(fd(), 4242, 4242))
    attempt("os.fchown", lambda: os.fchown(fd(), 4242, 4242))
    attempt("futimes", lambda: os.utime(fd(), (0, 0)))
    attempt("futimens", lambda: os.utime(fd(), ns=(0, 0)))
    attempt("fsetxattr", lambda: os.setxattr(fd(), "user.harm", b"1"))
    attempt("ftruncate", lambda: os.truncate(fd(), 0))
    attempt("ftruncate rw", lambda: os.truncate(os.open(victim, os.O_RDWR), 0))
''',
    "sets an immutable flag": '''
import fcntl, struct
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL, FS_APPEND_FL = 0x80086601, 0x40086602, 0x10, 0x20
open("stuck.txt", "w").write("x")
for victim in VICTIMS + ["stuck.txt", "."]:
    def flag(victim=victim):
        fd = os.open(victim, os.O_RDONLY)
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", FS_IMMUTABLE_FL | FS_APPEND_FL))
    attempt("immutable " + victim, flag)
''',
    "reads /etc/shadow and device nodes": '''
attempt("/etc/shadow", lambda: open("/etc/shadow", "rb").read(1) or 1 / 0)
for device in ["/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/mem", "/dev/kmsg", "/dev/port"]:
    attempt(device, lambda: open(device, "rb").read(1) or 1 / 0)
    attempt(device + " write", lambda: open(device, "wb").write(b"PASS\\n"))
''',
    "reads the other submissions": '''
import glob
found = []
attempt("glob", lambda: found.extend(glob.glob("{subs}/*.ipynb")) or found or 1 / 0)
for path in found + ["{subs}/0.ipynb", "{subs}/1.ipynb"]:
    attempt("read " + path, lambda: open(path).read(1) or 1 / 0)
    attempt("os.open " + path, lambda: os.read(os.open(path, os.O_RDONLY), 1) or 1 / 0)
attempt("list", lambda: os.listdir("{subs}") or 1 / 0)
''',
    "a setsid fork through an aliased _posixsubprocess": '''
import importlib.machinery, importlib.util, time
spec = importlib.machinery.PathFinder.find_spec("_posixsubprocess")


def keep_writing():
    os.setsid()
    while True:
        with open("heartbeat", "a") as f:
            f.write("alive\\n")
        time.sleep(0.05)


def spawn(name, path):
    alias = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(alias)
    alias.loader.exec_module(module)
    module.fork_exec(["/bin/sleep", "{mark}"], [b"/bin/sleep"], True, (), None, None,
                     -1, -1, -1, -1, -1, -1, *os.pipe(), False, True, -1, None, None,
                     None, -1, keep_writing)
    time.sleep(0.3)


if spec is not None and spec.origin:
    copy = os.path.join(os.getcwd(), "innocent.so")
    try:                                     # allowed (a read and a write inside): not harm
        __import__("shutil").copyfile(spec.origin, copy)
    except Exception:
        pass
    for name, path in [("innocent._posixsubprocess", spec.origin),
                       ("_posixsubprocess", copy), ("x._posixsubprocess", copy)]:
        attempt("fork_exec as " + name, lambda: spawn(name, path))
''',
}
MARK = "876.5432"


def hostile_answers(pristine: Path, subs: Path) -> dict:
    unlock = UNLOCK.format(solution=solution_answer(5))
    head = VICTIMS.format(pristine=str(pristine))
    return {name: WRONG_ORACLE + head + attack.replace("{mark}", MARK).replace("{subs}", str(subs))
            + unlock for name, attack in ATTACKS.items()}


def snapshot(paths) -> dict:
    """What an attack could change: mode, owner, mtime, size, and the inode flags."""
    out = {}
    for p in paths:
        st = os.stat(p)
        out[str(p)] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns,
                       st.st_size, lsattr(p))
    return out


def lsattr(path) -> str:
    """The inode flags (immutable, append-only, ...) as ``lsattr`` shows them; "" without it."""
    if shutil.which("lsattr") is None:
        return ""
    proc = subprocess.run(["lsattr", "-d", str(path)], capture_output=True, text=True)
    return proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout else ""


def restore(before: dict) -> None:
    """Undo any harm (so a failing test does not break the machine), before asserting."""
    for p, (mode, uid, gid, mtime, _, flags) in before.items():
        if shutil.which("chattr"):
            subprocess.run(["chattr", "-i", "-a", p], capture_output=True)
        try:
            os.chmod(p, mode)
            if ROOT:
                os.chown(p, uid, gid)
            os.utime(p, ns=(mtime, mtime))
        except OSError:
            pass


def survivors(marker: str) -> list:
    """Processes whose environment or command line holds ``marker`` (a grading's temp dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            text = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in text or MARK.encode() in text:
            found.append(int(entry.name))
    return found


# -- as the user running the tests ----------------------------------------------------------

@pytest.fixture
def arena(tmp_path, monkeypatch):
    exercises = tmp_path / "exercises"
    shutil.copytree(REPO / "exercises", exercises)
    gradetmp = tmp_path / "gradetmp"
    gradetmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(gradetmp))
    subs = tmp_path / "subs"
    subs.mkdir()
    return {"exercises": exercises, "gradetmp": gradetmp, "subs": subs}


def victims(exercises: Path) -> list:
    import percolator_ref
    return [os.path.realpath(sys.executable), percolator_ref.__file__,
            str(next(exercises.glob("05_*.ipynb")))]


@pytest.mark.skipif(not LINUX, reason="file descriptors in /proc, lsattr: Linux")
def test_fd_flag_device_and_alias_attacks_score_zero_and_harm_nothing(arena, monkeypatch):
    """Graded from the submissions' folder as ``python -m percolator_ref grade`` would be:
    that folder is the working directory and ``sys.path[0]``."""
    monkeypatch.chdir(arena["subs"])
    monkeypatch.syspath_prepend(str(arena["subs"]))
    pristine = next(arena["exercises"].glob("05_*.ipynb"))
    answers = hostile_answers(pristine, arena["subs"])
    paths = [student_notebook(arena["subs"] / f"{i}.ipynb", 5, answer)
             for i, answer in enumerate(answers.values())]
    before = snapshot(victims(arena["exercises"]))
    try:
        grades = grade_all(paths, arena["exercises"], Limits(), jobs=2)
        after = snapshot(victims(arena["exercises"]))
    finally:
        restore(before)
    left = survivors(str(arena["gradetmp"]))
    for pid in left:
        os.kill(pid, 9)
    assert after == before
    assert left == []
    assert list(arena["gradetmp"].iterdir()) == []          # nothing immutable stopped cleanup
    for name, g in zip(answers, grades):
        assert g.total == N5 and g.n_passed == 0, (name, g.summary())
        assert "private uid" in g.sandbox or not ROOT, g.sandbox


def test_the_guard_refuses_changes_through_a_descriptor_outside(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    inside = os.open(work, os.O_RDONLY)
    outside = os.open(sys.executable, os.O_RDONLY)
    try:
        fd_inside("os.chmod", inside, str(work))                    # its own directory: allowed
        for event, args in [("os.chmod", (outside, 0o777, -1)), ("os.chown", (outside, 1, 1, -1)),
                            ("os.utime", (outside, (0, 0), None, -1)),
                            ("os.setxattr", (outside, "user.x", b"1", 0))]:
            with pytest.raises(PermissionError, match="file descriptor outside"):
                check_write(event, args, (0,), str(work))
        with pytest.raises(PermissionError, match="file descriptor outside"):
            fd_inside("os.chmod", 99999, str(work))                    # not an open descriptor
    finally:
        os.close(inside)
        os.close(outside)
    modules = frozenset({"_posixsubprocess", "_ctypes"})
    assert denied_module(("x._posixsubprocess", "/lib/innocent.so"), modules)
    assert denied_module(("innocent", "/lib/_posixsubprocess.cpython-311.so"), modules)
    assert not denied_module(("json", None, None, None, None), modules)


# -- the kernel layers alone (no audit hook, no Landlock) ------------------------------------

LAYER_PROBE = '''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from percolator_ref.grading.sandbox import privileges
work, victim = sys.argv[2], sys.argv[3]
spec = json.loads(sys.argv[4])
out = {"layers": privileges.isolate(spec, work)}
sys.stdout.reconfigure(line_buffering=True)
errors = {}
for name, action in [("fchmod", lambda fd: os.chmod(fd, 0o777)),
                     ("fchown", lambda fd: os.chown(fd, 4242, 4242)),
                     ("futimes", lambda fd: os.utime(fd, (0, 0)))]:
    fd = os.open(victim, os.O_RDONLY)
    try:
        action(fd)
        errors[name] = "done"
    except OSError as exc:
        errors[name] = exc.strerror
for path in ["/etc/shadow"]:
    try:
        open(path, "rb").read(1)
        errors[path] = "read"
    except OSError as exc:
        errors[path] = exc.strerror
out["errors"] = errors
with open(os.path.join(work, "mine.txt"), "w") as f:
    f.write("own directory stays writable")
if os.fork() == 0:                            # a double fork in its own session, writing on
    os.setsid()
    if os.fork() == 0:
        os.chdir(work)
        while True:
            with open("heartbeat", "a") as f:
                f.write("{mark}\\n")
            time.sleep(0.02)
    os._exit(0)
time.sleep(0.2)
print(json.dumps(out))
'''


def run_probe(tmp_path, uid=None):
    """Run LAYER_PROBE (as ``uid`` when given: root only), return its report and heartbeat."""
    base = tmp_path / "base"
    work = base / "work"
    work.mkdir(parents=True)
    victim = base / "victim.txt"          # beside the work dir: reachable by the private uid
    victim.write_text("kit file")
    spec = {"namespaces": True, "expose": [sys.prefix, sys.base_prefix, str(REPO)]}
    if uid is None:
        spec = privileges.plan(spec["expose"])
        spec.pop("disk_mb")             # the work dir stays visible here (the quota has its test)
        privileges.prepare_workdir(base, work, spec)
    else:
        for p in [tmp_path] + sorted(tmp_path.rglob("*")):
            os.chown(p, uid, uid)
    before = snapshot([victim])
    probe = LAYER_PROBE.replace("{mark}", MARK)
    argv = [sys.executable, "-c", probe, str(REPO), str(work), str(victim), json.dumps(spec)]
    with open(tmp_path / "probe.out", "w+") as out:    # not a pipe: a survivor would hold it
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=60, cwd=work,
                              preexec_fn=None if uid is None else as_user(uid, tmp_path))
    text = (tmp_path / "probe.out").read_text()
    survived = survivors(MARK)
    for pid in survived:                              # do not leave it running on a failure
        os.kill(pid, 9)
    assert proc.returncode == 0, text
    assert survived == [], "the double fork outlived its grading"
    report = json.loads(text.strip().splitlines()[-1])
    beat = (work / "heartbeat").stat().st_size
    return report, before, snapshot([victim]), work, beat


def as_user(uid: int, home: Path):
    """A pre-exec: the Python installation and ``home`` exposed (they may live in directories
    only root enters: /root, pytest's temp dirs), then ``uid``."""
    def drop():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(privileges.CLONE_NEWNS) != 0 or \
                libc.mount(None, b"/", None, privileges.MS_REC | privileges.MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "cannot make a private mount namespace")
        for _ in range(4):
            privileges.expose([sys.prefix, sys.base_prefix, str(REPO), str(home)])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    return drop


def check_probe(report, before, after, work, beat):
    import time
    if "namespaces unavailable" in report["layers"]:
        pytest.skip(f"this kernel refuses the namespaces: {report['layers']}")
    assert after == before, report
    assert set(report["errors"].values()) <= {"Read-only file system", "Operation not permitted",
                                              "Permission denied"}, report
    assert "PID namespace" in report["layers"] and "read-only mounts" in report["layers"], report
    assert (work / "mine.txt").read_text() == "own directory stays writable"
    time.sleep(0.3)
    assert (work / "heartbeat").stat().st_size == beat        # the double fork died with it
    assert survivors(MARK) == []


@pytest.mark.skipif(not LINUX, reason="namespaces: Linux")
def test_kernel_layers_alone_as_this_user(tmp_path):
    check_probe(*run_probe(tmp_path))


@pytest.mark.skipif(not (LINUX and ROOT), reason="dropping to another uid needs root")
def test_kernel_layers_alone_as_an_unprivileged_user(tmp_path):
    uid = privileges.free_uid()
    report, *rest = run_probe(tmp_path, uid)
    assert "user namespace" in report["layers"] and "private uid" not in report["layers"]
    check_probe(report, *rest)


# -- the whole grader as an unprivileged user (the tests run as root) ------------------------

AS_USER_GRADER = '''
import json, sys, tempfile
kit = sys.argv[1]
sys.path.insert(0, kit)
tempfile.tempdir = sys.argv[3]
from percolator_ref.grading.grade.grader import Limits, grade_all
paths = json.loads(sys.argv[2])
grades = grade_all(paths, kit + "/exercises", Limits(), jobs=2)
print(json.dumps([[g.n_passed, g.total, g.sandbox, g.problems, g.summary()] for g in grades]))
'''


@pytest.mark.parametrize("where", ["cwd", "parent"])
def test_the_working_directory_on_sys_path_is_not_read_as_the_python_installation(
        tmp_path, monkeypatch, where):
    """``python -m`` puts the working directory in ``sys.path``; spawned workers keep it.
    Neither it nor a folder above the submissions becomes readable or listable."""
    subs = tmp_path / "class" / "subs"
    subs.mkdir(parents=True)
    mine, other = subs / "0.ipynb", subs / "1.ipynb"
    monkeypatch.chdir(subs)
    monkeypatch.syspath_prepend(str(subs if where == "cwd" else tmp_path / "class"))
    spec = grading.exercise(5).exercise
    policy = read_policy(spec, REPO / "exercises", [str(mine), str(other)])
    rules = ("/nonexistent-workdir", tuple(policy["allow_read"]), tuple(policy["deny_read"]),
             tuple(policy["hard_deny"]), 1)
    for place in (subs, subs / "notes.txt", tmp_path / "class"):
        if where == "cwd" and place == tmp_path / "class":
            continue                                # only the entry itself is in question
        assert not readable(str(place), rules), (place, policy["deny_read"])
        assert not any(inside(str(place), d) for d in policy["landlock"]["read_dirs"]), place
    assert not readable(str(other), rules)
    for needed in (sys.executable, grading.__file__.replace("grading/__init__.py", "model.py"),
                   "/usr/lib", "/etc/passwd"):
        assert readable(os.path.realpath(needed), rules), needed


@pytest.mark.skipif(not (LINUX and ROOT), reason="dropping to another uid needs root")
def test_attacks_score_zero_and_harm_nothing_as_an_unprivileged_grader(tmp_path):
    """The grader itself runs as an ordinary user who owns the kit (a copy of it).

    The notebooks: exercise 5's attacks above, and exercise 1's attacks on the trusted
    world (:data:`grading_helpers.CLIENT_ATTACKS`, also graded as this user in
    test_grading_hostile.py): forged observations, a forged report, the job read from the
    grader's frames, and the hidden step rebuilt from an optimized ``.pyc`` that a
    ``python -O`` run left in the kit copy.
    """
    uid = privileges.free_uid()
    kit = tmp_path / "kit"
    shutil.copytree(REPO / "percolator_ref", kit / "percolator_ref",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "exercises", kit / "exercises")
    (tmp_path / "subs").mkdir()
    (tmp_path / "gradetmp").mkdir()
    pristine = next((kit / "exercises").glob("05_*.ipynb"))
    answers = [(name, 5, N5, a) for name, a in hostile_answers(pristine, tmp_path / "subs").items()]
    answers += [(name, 1, N1, a) for name, a in CLIENT_ATTACKS.items()]
    paths = [str(student_notebook(tmp_path / "subs" / f"{i}.ipynb", n, a,
                                  exercises_dir=kit / "exercises"))
             for i, (_, n, _, a) in enumerate(answers)]
    with optimized_pyc_of(kit / "percolator_ref" / "transaction.py") as pyc:
        for p in [tmp_path] + sorted(tmp_path.rglob("*")):
            os.chown(p, uid, uid, follow_symlinks=False)
        watched = [str(kit / "percolator_ref" / "__init__.py"), str(pristine), str(pyc),
                   str(kit / "percolator_ref" / "transaction.py"),
                   str(kit / "percolator_ref" / "grading" / "grade" / "grader.py"),
                   str(next((kit / "exercises").glob("01_*.ipynb")))]
        before = snapshot(watched)
        try:
            proc = subprocess.run([sys.executable, "-c", AS_USER_GRADER, str(kit),
                                   json.dumps(paths), str(tmp_path / "gradetmp")],
                                  capture_output=True, text=True,
                                  timeout=300, preexec_fn=as_user(uid, tmp_path), cwd=tmp_path,
                                  env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
            after = snapshot(watched)
        finally:
            restore(before)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    grades = json.loads(proc.stdout.strip().splitlines()[-1])
    assert after == before
    assert survivors(str(tmp_path / "gradetmp")) == []
    assert list((tmp_path / "gradetmp").iterdir()) == []
    assert len(grades) == len(answers)
    for (name, _, total, _), (passed, graded, sandbox, problems, summary) in zip(answers, grades):
        assert (passed, graded) == (0, total), (name, summary)
        if "pyc" in name:
            assert "opt-1.pyc is refused during grading" in problems[0], (name, problems)
        if not sandbox:                 # its child stopped before it was ready: it says why
            assert problems and problems[0].startswith("not run: "), (name, summary)
            continue
        assert "user namespace" in sandbox and "PID namespace" in sandbox or \
            "namespaces unavailable" in sandbox, (name, sandbox)


FALLBACK_PROBE = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from percolator_ref.grading.sandbox import privileges
print(privileges.isolate({"namespaces": False, "expose": []}, sys.argv[2]), flush=True)
if os.fork() == 0:                            # a double fork in its own session, writing on
    os.setsid()
    if os.fork() == 0:
        while True:
            with open(os.path.join(sys.argv[2], "heartbeat"), "a") as f:
                f.write("beat\\n")
            time.sleep(0.02)
    os._exit(0)
time.sleep(0.2)
"""


@pytest.mark.skipif(not LINUX, reason="/proc: Linux")
def test_without_namespaces_the_sweep_kills_a_setsid_double_fork(tmp_path):
    """The fallback layer alone: a subreaper grader and the sweep by the work dir's marker."""
    import time
    work = tmp_path / "work"
    work.mkdir()
    spec = privileges.plan([], namespaces=False)
    spec.pop("uid", None)                     # the marker alone (the uid sweep is tested above)
    privileges.prepare_workdir(tmp_path, work, spec)
    with open(tmp_path / "out", "w+") as out:        # not a pipe: the survivor would hold it
        proc = subprocess.run([sys.executable, "-c", FALLBACK_PROBE, str(REPO), str(work)],
                              stdout=out, stderr=subprocess.STDOUT, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work)})
    text = (tmp_path / "out").read_text()
    assert proc.returncode == 0 and "namespaces off" in text, text
    time.sleep(0.1)
    beat = (work / "heartbeat").stat().st_size
    time.sleep(0.2)
    assert (work / "heartbeat").stat().st_size > beat           # it did survive its grading
    killed = privileges.sweep(spec)
    assert len(killed) == 1
    time.sleep(0.1)
    beat = (work / "heartbeat").stat().st_size
    time.sleep(0.3)
    assert (work / "heartbeat").stat().st_size == beat
    assert privileges.processes_with(str(work)) == []


# -- the disk: a child's own quota, and nothing left when a child cannot start (issue 30, hole 12) --

DISK_HOG = '''
import os


def hog():
    written = 0
    try:
        for n in range(64):
            with open(os.path.join(os.environ["TMPDIR"], f"hog{n}"), "wb") as f:
                for _ in range(4):
                    f.write(b"x" * (1 << 20))
                    written += 1
    except OSError as exc:
        return f"wrote {written} MB, then {type(exc).__name__} errno {exc.errno}"
    return f"wrote {written} MB"


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        raise ValueError(hog())

    def get_timestamp(self):
        return 1
'''


def test_a_child_filling_its_disk_fills_only_its_own(tmp_path):
    """The work directory is the child's own tmpfs of DISK_MB, and each client process's
    folder a tmpfs of its own of space.DISK_MB (:mod:`percolator_ref.grading.sandbox.space`):
    writing 256 MB stops there with "No space left" (ENOSPC), and the grader's temporary
    folder holds nothing of it."""
    from grading_helpers import student_notebook
    from percolator_ref.grading.sandbox import space
    tmp = tmp_path / "gradetmp"
    tmp.mkdir()
    path = student_notebook(tmp_path / "hog.ipynb", 5, DISK_HOG)
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    script = ("import json, sys\nfrom percolator_ref.grading.grade.grader import grade, Limits\n"
              "g = grade(sys.argv[1], limits=Limits())\n"
              "print(json.dumps([[r.reason for r in g.checks], g.sandbox]))")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                         env=env, timeout=300)
    problems, layers = json.loads(out.stdout.strip().splitlines()[-1])
    if "namespaces unavailable" in layers or "mounts unchanged" in layers:
        pytest.skip(f"no mount namespace here: {layers}")
    assert any("errno 28" in p for p in problems), problems              # ENOSPC, in its own disk
    written = int(problems[0].split("wrote ")[1].split(" MB")[0])
    assert space.DISK_MB - 4 <= written <= space.DISK_MB <= privileges.DISK_MB, problems
    assert "disk quota: its own" in layers and "each client its own disk" in layers, layers
    assert list(tmp.iterdir()) == []


def test_a_child_that_cannot_start_leaves_nothing_behind(tmp_path, monkeypatch):
    from percolator_ref.grading.sandbox import launcher
    from grading_helpers import student_notebook
    path = student_notebook(tmp_path / "x.ipynb", 5, solution_answer(5))
    tmp = tmp_path / "gradetmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(launcher, "_popen", no_space)
    fds = len(os.listdir("/proc/self/fd"))
    [g] = grade_all([path], limits=Limits())
    assert "No space left" in " ".join(g.problems) and g.n_passed == 0
    assert list(tmp.iterdir()) == [] and len(os.listdir("/proc/self/fd")) == fds
