"""Hostile notebooks (built from exercise 5's pristine notebook) score 0 and leave nothing behind.

Each answer cell below attacks the grader the way issue 10 lists: no-op checks,
a forced report, reading the solutions, rewriting the grader's clean exercise
copy, os._exit, an endless loop, writing outside the work dir, a background
process, and inheriting / aliasing / delegating to the reference oracle; also
sys.exit and exhausting memory.
"""
import contextlib
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from percolator_ref import TimestampOracle
from percolator_ref.grading.judge import ex05_oracle
from percolator_ref.grading.grade.grader import Limits, grade, grade_all
from grading_helpers import (CLIENT_ATTACKS, REPO, optimized_pyc_of, pristine_path,
                             solution_answer, student_notebook)

MARK = "987.6543"          # in the command line of any process a notebook tries to leave running
WRONG_ORACLE = '''
class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.next = first_timestamp

    def get_timestamp(self):
        self.next += 1
        return self.next
'''


STUB_ORACLE = '''
class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        raise NotImplementedError("Exercise 5")

    def get_timestamp(self):
        raise NotImplementedError("Exercise 5")
'''


def canned_observations() -> dict:
    """What a correct oracle (the solution's) answers, call by call, in each check of the
    notebook's own run (secret 0): a student could paste it and answer it back (exercise 5 is
    judged by the grader's world, so answers are all a client could forge)."""
    from percolator_ref.grading.judge.interactive import local_hub, run_trusted
    spec, namespace = ex05_oracle.exercise, {}
    exec(solution_answer(5), namespace)
    params, canned = spec.params(0), {}
    for check in spec.checks:
        hub, answers = local_hub(spec, namespace["Oracle"]), canned.setdefault(check.name, [])
        arrive = hub.arrive

        def record(host, msg, arrive=arrive, answers=answers):
            if isinstance(msg, dict) and msg.get("op") == "answer":
                answers.append(msg["outcome"])
            arrive(host, msg)
        hub.arrive = record
        assert run_trusted(check, hub, params[check.name]).passed
    return canned


FORGED_ANSWERS = '''
import itertools, json, sys
clients = sys.modules["percolator_ref.grading.client.host"]
CANNED = json.loads({canned!r})
ANSWERS = itertools.cycle([a for answers in CANNED.values() for a in answers] or [{{"value": 1}}])


def forged(self, cid, fn):
    """Answer every call with the reference's answers from the notebook's own run."""
    self.send({{"cid": cid, "op": "answer", "outcome": next(ANSWERS)}})


clients.ClientHost.answer_with = forged
'''


def hostile_answers(outside: Path, exercises_copy: Path) -> dict:
    canned = json.dumps(canned_observations())
    pristine = exercises_copy / pristine_path(5).name
    return {
        "no-op checks and canned observations": WRONG_ORACLE + f'''
import json
from percolator_ref import grading
from percolator_ref.grading import framework, battery
from percolator_ref.grading.sandbox import child as sandbox
framework.judge = lambda check, result, p: battery.Result(check.name, True)
grading.check = lambda n, impl: None
''' + FORGED_ANSWERS.format(canned=canned),
        "the Oracle stub left in, every answer forged": STUB_ORACLE + FORGED_ANSWERS.format(canned=canned),
        "forced Report.passed and a fake log line": WRONG_ORACLE + '''
import os, sys
battery = sys.modules["percolator_ref.grading.battery"]
battery.Report.passed = property(lambda self: True)
print("8/8 checks passed")
for fd in sorted(int(fd) for fd in os.listdir("/proc/self/fd") if int(fd) > 2):
    try:
        os.write(fd, b'{"results": {}, "guarded": true, "passed": true}')
    except OSError:
        pass
''',
        "reads and runs the solution": WRONG_ORACLE + f'''
import json, pathlib, percolator_ref
root = pathlib.Path(percolator_ref.__file__).resolve().parents[1]
nb = json.loads((root / "solutions" / "05_timestamp_oracle.ipynb").read_text())
for cell in nb["cells"]:
    if "BEGIN SOLUTION" in "".join(cell["source"]):
        exec("".join(cell["source"]))      # replaces the wrong Oracle above
''',
        "rewrites the grader's clean exercise copy": WRONG_ORACLE + f'''
import json
path = {str(pristine)!r}
cells = [{{"cell_type": "code", "id": "x", "metadata": {{}}, "source": "", "outputs": [],
          "execution_count": None}}]
open(path, "w").write(json.dumps({{"cells": cells, "metadata": {{"percolator": {{"exercise": 5}}}},
                                  "nbformat": 4, "nbformat_minor": 5}}))
''',
        "calls os._exit(0)": WRONG_ORACLE + "\nimport os\nos._exit(0)\n",
        "loops forever": WRONG_ORACLE + "\nwhile True:\n    pass\n",
        "segfaults": WRONG_ORACLE + "\nimport faulthandler\nfaulthandler._sigsegv()\n",
        "calls sys.exit(0)": WRONG_ORACLE + "\nimport sys\nsys.exit(0)\n",
        "exhausts memory": WRONG_ORACLE + "\nhog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))\n",
        "writes outside its work dir": WRONG_ORACLE + f'''
import os, pathlib, shutil
target = {str(outside)!r}
attempts = [
    lambda: open(target + "/open.txt", "w").write("x"),
    lambda: pathlib.Path(target, "pathlib.txt").write_text("x"),
    lambda: os.close(os.open(target + "/osopen.txt", os.O_WRONLY | os.O_CREAT)),
    lambda: shutil.copyfile(__file__ if "__file__" in globals() else "/etc/hostname", target + "/copy.txt"),
    lambda: (open("mine.txt", "w").write("x"), os.rename("mine.txt", target + "/renamed.txt")),
    lambda: (os.symlink(target, "link"), open("link/symlinked.txt", "w").write("x")),
    lambda: os.close(os.open("dirfd.txt", os.O_WRONLY | os.O_CREAT, dir_fd=os.open(target, os.O_RDONLY))),
    lambda: os.mkdir(target + "/made"),
    lambda: open("/proc/self/cwd/../../../" + target.lstrip("/") + "/climb.txt", "w").write("x"),
]
for attempt in attempts:
    try:
        attempt()
    except Exception:
        pass
''',
        "leaves a background process running": WRONG_ORACLE + f'''
import os, threading, time
attempts = [
    lambda: __import__("subprocess").Popen(["sleep", "{MARK}"]),
    lambda: os.system("sleep {MARK} &"),
    lambda: os.posix_spawn("/bin/sleep", ["sleep", "{MARK}"], dict()),
    lambda: os.fork(),
    lambda: __import__("multiprocessing").Process(target=time.sleep, args=({MARK},)).start(),
]
for attempt in attempts:
    try:
        if attempt() == 0:
            os.execv("/bin/sleep", ["sleep", "{MARK}"])
    except Exception:
        pass
threading.Thread(target=time.sleep, args=({MARK},)).start()
''',
        "inherits the reference": '''
from percolator_ref import TimestampOracle


class Oracle(TimestampOracle):
    pass
''',
        "aliases the reference": '''
from percolator_ref.services.oracle import TimestampOracle as Oracle
''',
        "aliases the reference's methods": '''
from percolator_ref import TimestampOracle


class Oracle:
    __init__ = TimestampOracle.__init__
    get_timestamp = TimestampOracle.get_timestamp
''',
        "delegates to super()": '''
from percolator_ref import TimestampOracle


class Oracle(TimestampOracle):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def get_timestamp(self):
        return super().get_timestamp()
''',
        "delegates to a wrapped reference at run time": '''
from percolator_ref import TimestampOracle


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.inner = TimestampOracle(state_path, first_timestamp, range_size)
        self.calls = 0

    def get_timestamp(self):
        self.calls += 1
        ts = self.inner.get_timestamp()
        return ts
''',
        "digs the reference back out": '''
import gc, importlib, types
import percolator_ref.services.oracle as reference
try:
    importlib.reload(reference)
except Exception:
    pass
found = [f for f in gc.get_objects() if isinstance(f, types.FunctionType)
         and f.__qualname__ == "TimestampOracle.get_timestamp" and "hidden" not in f.__name__]


class Oracle:
    def __init__(self, state_path, first_timestamp=1, range_size=1000):
        self.inner = reference.TimestampOracle(state_path, first_timestamp, range_size)

    def get_timestamp(self):
        fn = found[0] if found else type(self.inner).get_timestamp
        ts = fn(self.inner)
        return ts
''',
    }


def session_processes_with(mark: str) -> list:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if mark in cmdline and "pytest" not in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def arena(tmp_path, monkeypatch):
    """A private exercises copy, an outside folder to protect, and the grader's temp dir."""
    exercises = tmp_path / "exercises"
    shutil.copytree(REPO / "exercises", exercises)
    outside = tmp_path / "outside"
    outside.mkdir()
    gradetmp = tmp_path / "gradetmp"
    gradetmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(gradetmp))
    return {"exercises": exercises, "outside": outside, "gradetmp": gradetmp,
            "subs": tmp_path / "subs", "answers": hostile_answers(outside, exercises)}


HOSTILE = list(hostile_answers(Path("/x"), Path("/x")))


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_notebook_scores_zero_and_leaves_nothing(name, arena):
    before = digest(arena["exercises"])
    arena["subs"].mkdir()
    path = student_notebook(arena["subs"] / "evil.ipynb", 5, arena["answers"][name])
    g = grade(path, arena["exercises"], Limits())
    assert g.total == len(ex05_oracle.exercise) and g.n_passed == 0, g.summary()
    assert all(r.reason for r in g.checks), g.summary()
    assert list(arena["outside"].iterdir()) == []
    assert list(arena["gradetmp"].iterdir()) == []          # its work dir is gone too
    assert digest(arena["exercises"]) == before
    assert session_processes_with(MARK) == []


def test_reasons_name_the_attack(arena):
    arena["subs"].mkdir()
    answers = arena["answers"]
    limits = Limits()
    names = ["calls os._exit(0)", "loops forever", "inherits the reference",
             "aliases the reference", "delegates to super()", "reads and runs the solution",
             "delegates to a wrapped reference at run time", "segfaults"]
    paths = [student_notebook(arena["subs"] / f"{i}.ipynb", 5, answers[n]) for i, n in enumerate(names)]
    exits, loops, inherits, aliases, delegates, reads, wraps, segfaults = grade_all(
        paths, arena["exercises"], limits, jobs=2)
    assert "exited with status 0 before it was ready" in exits.problems[0]
    assert "did not finish within" in loops.problems[0]
    assert "inherits from the reference TimestampOracle" in inherits.problems[0]
    assert "does not define get_timestamp itself" in " ".join(inherits.problems)
    assert aliases.problems == ["Oracle is imported (line 2) instead of written as a class in "
                                "your answer cell: the graded code must be your own"]
    assert "only calls super().get_timestamp(...)" in " ".join(delegates.problems)
    assert "solutions/05_timestamp_oracle.ipynb is refused" in reads.problems[0]
    assert "the reference TimestampOracle.__init__ is hidden during grading" in wraps.checks[0].reason
    assert "crashed (segmentation fault)" in segfaults.problems[0]
    assert all(r.reason.startswith("not run: ") for g in (exits, loops, segfaults) for r in g.checks)


def test_next_students_untouched_stub_still_scores_zero(arena):
    arena["subs"].mkdir()
    evil = student_notebook(arena["subs"] / "a_evil.ipynb", 5,
                            arena["answers"]["rewrites the grader's clean exercise copy"])
    stub = arena["subs"] / "b_untouched.ipynb"
    shutil.copy(pristine_path(5), stub)
    first, second = grade_all([evil, stub], arena["exercises"], Limits())
    assert first.n_passed == 0 and second.n_passed == 0
    assert "NotImplementedError: Exercise 5" in second.checks[0].reason


def test_bulk_run_grades_everything_and_writes_csv(arena, tmp_path):
    subs = arena["subs"]
    subs.mkdir()
    for i, (name, answer) in enumerate(arena["answers"].items()):
        student_notebook(subs / f"evil{i:02d}.ipynb", 5, answer, student=f"evil {name}")
    student_notebook(subs / "zz_good.ipynb", 5, solution_answer(5), student="=good student")
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True,
                            text=True).stdout
    out = tmp_path / "scores.csv"
    env = dict(os.environ, TMPDIR=str(arena["gradetmp"]), PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "percolator_ref", "grade", str(subs), "--csv", str(out), "-j", "2",
         "--exercises", str(arena["exercises"])],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == len(arena["answers"]) + 1
    good = [r for r in rows if r["notebook"].endswith("zz_good.ipynb")]
    assert good[0]["student"] == "'=good student"            # no spreadsheet formula
    n = str(len(ex05_oracle.exercise))
    assert (good[0]["checks_passed"], good[0]["checks_total"], good[0]["score"]) == (n, n, "1.000")
    for row in rows:
        if row is not good[0]:
            assert row["checks_passed"] == "0" and row["score"] == "0.000", row
    assert f"1/{len(rows)} notebooks passed" in proc.stdout
    assert list(arena["outside"].iterdir()) == [] and list(arena["gradetmp"].iterdir()) == []
    assert session_processes_with(MARK) == []
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True,
                           text=True).stdout
    assert after == before


# -- the guard's rules, called directly (installing the hook here would be permanent) ---------

def test_guard_rules_for_open_and_path_events(tmp_path, monkeypatch):
    from percolator_ref.grading.sandbox.child import check_open, check_write, readable
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    secret = tmp_path / "repo"
    (secret / "solutions").mkdir(parents=True)
    (secret / "percolator_ref").mkdir()
    os.symlink(tmp_path, work / "escape")
    rules = (str(work), (str(secret / "percolator_ref"),), (str(secret),), (str(tmp_path / "hard"),),
             os.getpid())
    check_open((str(work / "sub" / "ok.txt"), "w", 0), rules)               # inside: allowed
    check_open((str(secret / "percolator_ref" / "x.py"), "r", 0), rules)    # allowed subtree
    refused = [
        ((str(tmp_path / "out.txt"), "w", 0), "writing outside"),
        ((str(work / "escape" / "out.txt"), "w", 0), "writing outside"),     # through a symlink
        ((str(work / "sub" / ".." / ".." / "out.txt"), None, os.O_WRONLY | os.O_CREAT), "writing outside"),
        ((str(secret / "solutions" / "05.ipynb"), "r", 0), "reading"),
        ((str(tmp_path / "hard" / "x"), "rb", 0), "reading"),
        ((f"/proc/{os.getppid()}/environ", "r", 0), "reading"),
        ((str(tmp_path), None, os.O_RDONLY), "opening the directory"),
        ((_Sneaky(), "w", 0), "takes a str, bytes or pathlib path"),
    ]
    for args, message in refused:
        with pytest.raises(PermissionError, match=message):
            check_open(args, rules)
    assert readable(str(work / "anything"), rules) and not readable(str(secret / "x"), rules)
    check_write("os.rename", (str(work / "a"), str(work / "b"), None, None), (0, 1), str(work))
    with pytest.raises(PermissionError, match="outside the grading directory"):
        check_write("os.rename", (str(work / "a"), str(tmp_path / "b"), None, None), (0, 1), str(work))
    (work / "sub" / "deep").mkdir()
    monkeypatch.chdir(work / "sub" / "deep")
    check_write("os.remove", ("x", 5), (0,), str(work))                    # dir_fd, plain name
    with pytest.raises(PermissionError, match="climbing path"):
        check_write("os.remove", ("../x", 5), (0,), str(work))


class _Sneaky:
    """A path that could answer differently to the check and to the open."""
    def __fspath__(self):
        return "/tmp/innocent"


def test_the_grade_records_its_sandbox(tmp_path):
    g = grade(student_notebook(tmp_path / "good.ipynb", 5, solution_answer(5)))
    assert g.passed
    assert g.sandbox.startswith(("landlock ABI ", "unavailable: ")), g.sandbox


HIDE_PROBE = '''
import sys
sys.path.insert(0, sys.argv[1])
from percolator_ref.grading.framework import ReferenceHidden
from percolator_ref.grading.sandbox.child import hide
from percolator_ref import TimestampOracle, cleanup, transaction


class Mine(TimestampOracle):
    def get_timestamp(self):
        return 42


hide(["percolator_ref.services.oracle:TimestampOracle.get_timestamp",
      "percolator_ref.cleanup:backoff_and_maybe_cleanup_lock"])
assert Mine(None).get_timestamp() == 42                     # the student's override still runs
for call in (lambda: TimestampOracle(None).get_timestamp(),
             lambda: cleanup.backoff_and_maybe_cleanup_lock(None, None, None, 0)):
    try:
        call()
    except ReferenceHidden as exc:
        print("hidden:", exc)
    else:
        raise SystemExit("the reference still runs")
hide(["percolator_ref.services.oracle:TimestampOracle"])
try:
    TimestampOracle(None)
except ReferenceHidden as exc:
    print("hidden:", exc)
'''


def test_hide_replaces_methods_functions_and_classes():
    """In a separate interpreter: hiding is for good."""
    proc = subprocess.run([sys.executable, "-c", HIDE_PROBE, str(REPO)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "hidden: the reference TimestampOracle.get_timestamp is hidden during grading: write the step yourself",
        "hidden: the reference backoff_and_maybe_cleanup_lock is hidden during grading: write the step yourself",
        "hidden: the reference TimestampOracle.__init__ is hidden during grading: write the step yourself"]


def test_canned_observations_pass_no_check_under_other_secrets():
    """Answers copied from the notebook's own run (secret 0) and answered back by a forging
    client fail every check under other secrets: the grader judges its own disk and the
    timestamps served, tied to the run's parameters."""
    from percolator_ref.grading.client.host import ClientHost
    from percolator_ref.grading.judge.interactive import local_hub, run_trusted
    import itertools
    spec = ex05_oracle.exercise
    canned = canned_observations()
    passed = set()
    for secret in range(1, 21):
        params = spec.params(secret)
        for check in spec.checks:
            answers = itertools.cycle(canned[check.name])
            hub = local_hub(spec, TimestampOracle)
            host = ClientHost(lambda m, hub=hub: hub.arrive("student", m), spec.roles,
                              TimestampOracle, ttl=10.0)
            host.answer_with = lambda cid, fn, host=host, answers=answers: host.send(
                {"cid": cid, "op": "answer", "outcome": next(answers)})
            hub.student_send = host.deliver
            if run_trusted(check, hub, params[check.name]).passed:
                passed.add(check.name)
    assert passed == set()


# -- exercise 1: the student's code is only a client of the grader's trusted world ------------

@pytest.fixture
def optimized_pyc():
    """A ``python -O`` left an optimized compiled copy of the hidden module behind."""
    with optimized_pyc_of(REPO / "percolator_ref" / "transaction.py") as target:
        yield target


@pytest.mark.parametrize("name", list(CLIENT_ATTACKS))
def test_client_attacks_on_exercise_1_score_zero(name, tmp_path, optimized_pyc):
    from percolator_ref.grading import exercise
    path = student_notebook(tmp_path / "evil.ipynb", 1, CLIENT_ATTACKS[name])
    g = grade(path, limits=Limits())
    assert g.total == len(exercise(1).exercise) and g.n_passed == 0, g.summary()
    assert all(r.reason for r in g.checks)
    if "pyc" in name:
        assert "opt-1.pyc is refused during grading" in g.problems[0]


def test_the_optimized_pyc_rebuilds_the_step_outside_the_sandbox(optimized_pyc):
    """The attack above is real: unsandboxed, it passes every check."""
    from percolator_ref import grading
    namespace = {}
    exec(CLIENT_ATTACKS["rebuilds the hidden step from an optimized .pyc"], namespace)
    assert grading.check(1, namespace["SnapshotReadTransaction"]).passed


# -- exercise 8: a withdraw that allows write skew cannot forge its way past the families ------

SKEW_WITHDRAW = '''
def withdraw(txn, customer, account, amount):
    checking = txn.get(customer, "checking") or 0
    savings = txn.get(customer, "savings") or 0
    if checking + savings < amount:
        return False
    balance = checking if account == "checking" else savings
    txn.set(customer, account, balance - amount)
    return True
'''

FORGED_WITHDRAWALS = {
    "every answer forged as True": '''
import sys
clients = sys.modules["percolator_ref.grading.client.host"]
clients.ClientHost.answer_with = lambda self, cid, fn: self.send(
    {"cid": cid, "op": "answer", "outcome": {"value": True}})
''',
    "every answer forged as False": '''
import sys
clients = sys.modules["percolator_ref.grading.client.host"]
clients.ClientHost.answer_with = lambda self, cid, fn: self.send(
    {"cid": cid, "op": "answer", "outcome": {"value": False}})
''',
}

OLD_RUNNER_ATTACK = '''
from percolator_ref.grading import battery, framework
from percolator_ref.grading.sandbox import child as sandbox
sandbox.run_scenario = framework.run_scenario = lambda check, answer, p, d: {"obs": {}}
framework.judge = lambda check, result, p: battery.Result(check.name, True)
'''


@pytest.mark.parametrize("name", list(FORGED_WITHDRAWALS))
def test_forged_answers_with_a_write_skew_withdraw_score_zero(name, tmp_path):
    """The grader judges its own bank: answers a client forges earn nothing."""
    from percolator_ref.grading.judge import ex08_write_skew
    path = student_notebook(tmp_path / "forged.ipynb", 8, SKEW_WITHDRAW + FORGED_WITHDRAWALS[name])
    g = grade(path, limits=Limits())
    assert g.total == len(ex08_write_skew.exercise) and g.n_passed == 0, g.summary()


def test_the_old_scenario_runner_attack_gains_nothing_on_exercise_8(tmp_path):
    """Replacing the scenario runner and the verdicts in the child (full marks before the
    trusted world) gains nothing: the write skew fails every family of interleavings, as it
    does without the attack. Since the child loads only the exercise's roles (issue 27), it
    has no ``battery`` to patch: the attack's own import is refused, so its answer cell fails."""
    path = student_notebook(tmp_path / "old.ipynb", 8, SKEW_WITHDRAW + OLD_RUNNER_ATTACK)
    g = grade(path, limits=Limits())
    failed = {r.name for r in g.checks if not r.passed}
    families = {r.name for r in g.checks if r.name.startswith("every")}
    assert families and families <= failed, g.summary()
    assert any("grading/battery.py is refused" in p for p in g.problems), g.summary()


# -- percolator replay: no terminal escape from a counterexample reaches the terminal -------------

ESCAPES = {"clear screen": "\x1b[2J\x1b[H", "window title": "\x1b]0;pwned\x07",
           "clipboard write": "\x1b]52;c;cm0gLXJmIH4=\x07",
           "hyperlink": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
           "C1 CSI": "\x9b31m", "carriage return": "\rPASS"}


def hostile_counterexample() -> dict:
    """A counterexample whose cells, names and texts carry terminal escapes (what a
    student's code can write into the grader's store, and a file can hold)."""
    from percolator_ref import Cluster, ManualClock
    from percolator_ref.grading.channel import encode
    cluster = Cluster(first_timestamp=1, clock=ManualClock())
    txn = cluster.begin()
    for k, (name, text) in enumerate(ESCAPES.items()):
        txn.set(f"row{k}{text}", "bal", f"{name}: {text}")
    txn.set("Bob", f"col{ESCAPES['window title']}", ESCAPES["clipboard write"])
    assert txn.commit()
    setup = [{"client": "world", "step": "row-transaction", "table": table, "row": row,
              "changes": [[column, ts, None, encode(value)] for column, versions in cols.items()
                          for ts, value in versions]}
             for table, rows in cluster.bigtable.dump().items() for row, cols in rows.items()]
    steps = [{"client": f"A{text}", "step": f"prewrite-primary{text}", "clock": 0,
              "events": [{"table": f"t{text}", "row": f"row0{text}",
                          "changes": [[f"bal{text}", 1, None, text]]}],
              "failure": f"lost{text}"} for text in ESCAPES.values()]
    steps[0]["before"] = setup
    steps += [{"client": "B", "step": f"disk{text}", "value": f"put{text}", "events": []}
              for text in ESCAPES.values()]
    return {"check": f"check {ESCAPES['clear screen']}", "failure": f"boom {ESCAPES['hyperlink']}",
            "steps": steps}


def test_a_replayed_counterexample_prints_no_terminal_escape(tmp_path, capsys):
    from percolator_ref.commands import main
    from percolator_ref.grading.judge.replay import replay, save
    path = save(hostile_counterexample(), tmp_path / "cx.json")
    shown = replay(path).transcript()
    assert main(["replay", str(path)]) == 0
    printed = capsys.readouterr().out
    for text in (shown, printed):
        raw = [c for c in text if c != "\n" and (ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0)]
        assert raw == [], raw[:10]
        assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in text and "\\x9b31m" in text


# -- exercise 8: an outcome is the world's log of the client's own steps, its writes in scope ------

def forged_commit(answer: str, table: str) -> str:
    """``answer`` that also writes a write record pointing at its own start_ts into a scratch
    row of ``table`` (a delete's, so that no check of dangling data sees it)."""
    return answer.replace("    return True\n", f'''    from percolator_ref.model import Write, WriteKind, write_col
    with txn.cluster.bigtable.row_transaction({table!r}, f"scratch{{txn.start_ts}}") as rt:
        rt.write(write_col("x"), txn.start_ts + 1, Write(txn.start_ts, WriteKind.DELETE))
    return True
''')


def test_a_forged_write_record_gains_nothing_on_exercise_8(tmp_path):
    """The bank-wide-cell answer fails "withdrawals of different customers do not conflict";
    a write record it forges for its aborted transaction, in a scratch row of the bank or in a
    table of its own, does not make it pass (7/7 when the verdict searched the store), and the
    honest student graded in the same run keeps full marks."""
    from percolator_ref.grading.judge import ex08_write_skew
    from percolator_ref.model import DEFAULT_TABLE
    from grading_helpers import load_catalogue
    bank = load_catalogue(8)["materialises the conflict in one bank-wide cell"]
    paths = [student_notebook(tmp_path / f"{name}.ipynb", 8, source) for name, source in
             [("bank", bank), ("row", forged_commit(bank, DEFAULT_TABLE)),
              ("table", forged_commit(bank, "scratch")), ("honest", solution_answer(8))]]
    plain, in_a_row, in_a_table, honest = grade_all(paths, limits=Limits())
    total = len(ex08_write_skew.exercise)
    assert 0 < plain.n_passed < total and honest.n_passed == total, (plain.summary(), honest.summary())
    assert in_a_row.n_passed <= plain.n_passed and in_a_table.n_passed <= plain.n_passed
    independent = "withdrawals of different customers do not conflict"
    assert not any(r.passed for g in (in_a_row, in_a_table) for r in g.checks
                   if r.name == independent)
    assert any("outside what this exercise gives your code" in r.reason for r in in_a_table.checks)


# -- a hostile class run: links, broken zips and a child filling the disk, beside honest students --

DISK_FILLER = WRONG_ORACLE + '''
import os, tempfile, time
chunk = b"x" * (1 << 20)
try:
    for n in range(400):                           # up to 400 MB, 8 MB a file
        with open(os.path.join(tempfile.gettempdir(), f"fill{n}"), "wb") as f:
            for _ in range(8):
                f.write(chunk)
except OSError:
    pass
time.sleep(6)                                      # holding it while the others start
'''


@contextlib.contextmanager
def small_tmpfs(path: Path, mb: int):
    """``path`` as a tmpfs of ``mb`` MB (the grader's TMPDIR on a small disk); skip if this
    process cannot mount one."""
    path.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_a_hostile_class_run_ends_with_one_row_per_student(tmp_path):
    """Symbolic links, broken zips and a child filling the disk under -j 2 (the grader's
    TMPDIR a 48 MB disk): one row per submission, full marks for each honest student, nothing
    left in TMPDIR; the filler's own work directory is its own tmpfs, so the others never see
    "No space left"."""
    from grading_helpers import broken_zips
    subs = tmp_path / "class"
    honest = ["honest1", "honest2", "honest3"]
    for name in honest:
        (subs / name).mkdir(parents=True)
        nb = student_notebook(subs / name / pristine_path(5).name, 5, solution_answer(5))
    student_notebook(subs / "filler.ipynb", 5, DISK_FILLER)
    (subs / "copier").mkdir()
    (subs / "copier" / pristine_path(5).name).symlink_to(nb)
    (subs / "sols.ipynb").symlink_to(next((REPO / "solutions").glob("05_*.ipynb")))
    zips = broken_zips(subs, nb, pristine_path(5).name)
    out = tmp_path / "scores.csv"
    with small_tmpfs(tmp_path / "gradetmp", 48) as gradetmp:
        env = dict(os.environ, TMPDIR=str(gradetmp), PYTHONPATH=str(REPO))
        proc = subprocess.run(
            [sys.executable, "-m", "percolator_ref", "grade", str(subs), "--csv", str(out),
             "--exercise", "5", "-j", "2"], capture_output=True, text=True, timeout=600, env=env)
        left = sorted(p.name for p in gradetmp.iterdir())
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = list(csv.DictReader(out.open()))
    students = honest + ["filler", "copier", "sols"] + sorted(zips)
    assert sorted(r["submission"] for r in rows) == sorted(students), [r["submission"] for r in rows]
    n = str(len(ex05_oracle.exercise))
    for row in rows:
        if row["submission"] in honest:
            assert (row["checks_passed"], row["checks_total"]) == (n, n), row
        else:
            assert row["checks_passed"] == "0" and row["checks_total"] == n, row
    assert not any("No space left" in r["problems"] for r in rows if r["submission"] != "filler")
    assert left == []


# -- reference reuse through a helper nobody listed (hide by reachability) ------------------------

REUSES_A_HELPER = '''
from percolator_ref import Transaction, transaction
from percolator_ref.model import lock_col
from percolator_ref.transaction import SnapshotRead


class SnapshotReadTransaction(Transaction):
    def snapshot_read(self, rt, cell):
        lock = rt.read(lock_col(cell.column), self.start_ts)
        if lock is not None:
            return SnapshotRead(lock=lock[1])
        return transaction.committed_read(rt, self.start_ts, cell.column)
'''


def test_an_answer_calling_the_hidden_steps_helper_scores_nothing(tmp_path):
    """Exercise 1's snapshot read left to ``transaction.committed_read`` (which holds most of
    the hidden step: 17/17 when the hidden names were a hand-kept list) scores nothing."""
    g = grade(student_notebook(tmp_path / "reuse.ipynb", 1, REUSES_A_HELPER), limits=Limits())
    assert g.total and g.n_passed == 0, g.summary()


PROBE = '''

import importlib as _importlib
_callable = []
for _target in {targets!r}:
    _module, _, _qualname = _target.partition(":")
    _obj = _importlib.import_module(_module)
    for _part in _qualname.split("."):
        _obj = getattr(_obj, _part)
    try:
        _obj()
    except Exception as _exc:                 # the stub raises ReferenceHidden, a real one TypeError
        if type(_exc).__name__ != "ReferenceHidden":
            _callable.append(_qualname)
raise ValueError(f"probed {{len({targets!r})}}, callable: {{_callable}}")
'''


def hidden_exercises() -> list:
    from percolator_ref import grading
    return [n for n in sorted(grading.MODULES) if grading.exercise(n).exercise.hidden]


@pytest.mark.parametrize("n", hidden_exercises())
def test_no_helper_reachable_from_a_graded_reference_is_callable_in_the_sandbox(n, tmp_path):
    """Every hidden target of exercise ``n`` and every function its code reaches that the
    exercise does not hand the student (:mod:`percolator_ref.grading.sandbox.reach`) is a stub in the
    sandbox, probed from the answer cell after the solution's own code."""
    from percolator_ref import grading
    from percolator_ref.grading.sandbox.reach import hidden_targets
    spec = grading.exercise(n).exercise
    targets = hidden_targets(spec, REPO / "exercises")
    if n == 1:
        assert "percolator_ref.transaction:committed_read" in targets
    g = grade(student_notebook(tmp_path / "probe.ipynb", n,
                               solution_answer(n) + PROBE.format(targets=targets)), limits=Limits())
    assert f"ValueError: probed {len(targets)}, callable: []" in " ".join(g.problems), g.problems


READS_THE_DEFINING_MODULE = '''
import sys, types
import percolator_ref.observers as _package
_path = _package.__file__.replace("__init__.py", "notifications.py")
_copy = types.ModuleType("percolator_ref.observers.copied")
_copy.__package__ = "percolator_ref.observers"
sys.modules[_copy.__name__] = _copy
exec(compile(open(_path).read(), "copied", "exec"), _copy.__dict__)
_found = _copy.__dict__


def pending_notification(txn, observer, row):
    result = _found["pending_notification"](txn, observer, row)
    return result


def run_observer(cluster, observer, row, client=None, crash_after=None):
    result = _found["run_observer"](cluster, observer, row, client=client, crash_after=crash_after)
    return result


answer = SimpleNamespace(pending_notification=pending_notification, run_observer=run_observer)
'''


def test_the_module_defining_a_hidden_step_is_unreadable_and_its_helpers_hidden(tmp_path):
    """Exercise 6 names its hidden steps by the package that re-exports them
    (``percolator_ref.observers``); the source that defines them is
    ``observers/notifications.py``. Reading that file in the answer cell and running it as a
    fresh module scored 13/13; the file is now unreadable (open fails, nothing passes), and the
    step's private helpers there (``_unacknowledged``) are hidden like the steps."""
    from percolator_ref.grading.judge import ex06_observers
    from percolator_ref.grading.sandbox.reach import hidden_targets
    g = grade(student_notebook(tmp_path / "copied.ipynb", 6, "from types import SimpleNamespace\n"
                               + READS_THE_DEFINING_MODULE), limits=Limits())
    assert g.total and g.n_passed == 0, g.summary()
    targets = hidden_targets(ex06_observers.exercise, REPO / "exercises")
    assert "percolator_ref.observers.notifications:_unacknowledged" in targets, targets


def test_the_guard_lets_the_students_own_functions_take_defaults(tmp_path):
    """A ``NamedTuple`` (or ``namedtuple``) with a default sets its ``__new__``'s
    ``__defaults__``: the guard refused it, so an honest answer with one scored 0/9 on
    exercise 5. The students' own functions (compiled from a cell or generated) may take
    defaults; a function from a file (the guard itself, whose state is its defaults; the
    kit; the standard library) may not, and no function's ``__code__`` may change."""
    from percolator_ref.grading.framework import ANSWER_FILENAME
    from percolator_ref.grading.sandbox.child import make_guard
    guard = make_guard(str(tmp_path), (), (), (), ())
    namespace: dict = {}
    exec(compile("def mine(a=1):\n    return a\n", ANSWER_FILENAME.format("x"), "exec"), namespace)
    generated = eval("lambda a, b: a + b")          # namedtuple's __new__ is made like this
    for fn in (namespace["mine"], generated):
        guard("object.__setattr__", (fn, "__defaults__", (2,)))
        guard("object.__setattr__", (fn, "__kwdefaults__", {}))
        with pytest.raises(PermissionError, match="__code__"):
            guard("object.__setattr__", (fn, "__code__", generated.__code__))
    for fn in (guard, make_guard, os.path.join):
        with pytest.raises(PermissionError, match="__defaults__"):
            guard("object.__setattr__", (fn, "__defaults__", ()))


NAMED_TUPLE = '''from typing import NamedTuple


class Range(NamedTuple):
    start: int
    size: int = 1000

'''


def test_an_honest_answer_with_a_named_tuple_default_passes(tmp_path):
    """Exercise 5's solution with a ``NamedTuple`` holding a default above it: 0/9 when
    the guard refused every change of ``__defaults__``, full marks now."""
    g = grade(student_notebook(tmp_path / "nt.ipynb", 5, NAMED_TUPLE + solution_answer(5)),
              limits=Limits())
    assert g.total and g.n_passed == g.total, g.summary()


def _ex04_answer(primary: str) -> str:
    """Exercise 4's answer cell from the catalogue's parts, with the decision at the primary
    given (the catalogue's right wait and roll forward/back around it)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "ex04_wrong_answers", REPO / "tests" / "wrong_answers" / "ex04_cleanup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._answer(primary=primary)


TTL_DECIDES = '''\
from percolator_ref.cleanup import Cleanup
from percolator_ref.variants.lock_ttl import TTLCleanup
resolver = type("Resolver", (TTLCleanup, Cleanup), {})(session)
commit_ts = resolver.check_txn_status(Cell(*lock.primary), lock.start_ts, lock.client).commit_ts
if lock.is_primary:
    return
'''


def test_a_variants_copy_of_the_hidden_step_gains_nothing_on_exercise_4(tmp_path):
    """Exercise 4's cleanup with its decision at the primary left to the lock-TTL variant's
    ``TTLCleanup.check_txn_status`` (TiKV's version of the hidden ``resolve_primary``, which
    no reachability from the reference finds) scored 10/10; the same answer deciding
    "rolled back" itself scores 2/10. A variant the exercise did not load may not be imported
    while grading, so the trick scores no more than the answer without it."""
    tricked = grade(student_notebook(tmp_path / "ttl.ipynb", 4, _ex04_answer(TTL_DECIDES)),
                    limits=Limits())
    alone = grade(student_notebook(tmp_path / "alone.ipynb", 4, _ex04_answer(
        "commit_ts = None\nif lock.is_primary:\n    return\n")), limits=Limits())
    assert alone.total and alone.n_passed < alone.total, alone.summary()
    assert tricked.n_passed <= alone.n_passed, (tricked.summary(), alone.summary())


def test_the_variants_commit_point_gains_nothing_on_exercise_3(tmp_path):
    """Exercise 3's commit point left to ``variants.locks.commit_at_primary`` (TiKV's version
    of the hidden ``commit_primary``, in a module every exercise loads) scored full marks;
    the same answer whose commit point forgets to check its lock does not. It is hidden
    with the step, so the trick scores no more than the answer without it."""
    answer = solution_answer(3)
    head, _, rest = answer.partition("    def commit_primary(self, m):\n")
    _, _, tail = rest.partition("    def two_phase_commit(self):\n")
    body = "    def two_phase_commit(self):\n" + tail
    tricked = head + ("    def commit_primary(self, m):\n"
                      "        from percolator_ref.variants.locks import commit_at_primary\n"
                      "        return commit_at_primary(self, m)\n\n") + body
    alone = head + (
        "    def commit_primary(self, m):\n"
        "        notify = self.session.is_observed(m.cell.table, m.cell.column)\n"
        "        with self.session.row_transaction(m.cell.table, m.cell.row, "
        "Step.COMMIT_PRIMARY) as rt:\n"
        "            rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.start_ts, "
        "m.kind), self.commit_ts, notify))\n"
        "            return True\n\n") + body
    g_alone = grade(student_notebook(tmp_path / "alone.ipynb", 3, alone), limits=Limits())
    g_tricked = grade(student_notebook(tmp_path / "tricked.ipynb", 3, tricked), limits=Limits())
    assert g_alone.total and g_alone.n_passed < g_alone.total, g_alone.summary()
    assert g_tricked.n_passed <= g_alone.n_passed, (g_tricked.summary(), g_alone.summary())


def test_the_variants_rollback_record_helper_gains_nothing_on_exercise_9(tmp_path):
    """Exercise 9's rollback record at a primary found neither locked nor committed, left to
    ``variants.rollback_records.mark_rolled_back`` (loaded with the exercise, reached by no
    hidden step): the trick scores no more than the same answer that writes no record there."""
    answer = solution_answer(9)
    mine = ("            elif rt.read(write_col(primary.column), start_ts, start_ts) is None:\n"
            "                # neither locked nor committed nor rolled back: its prewrite may be on its way\n"
            "                rows.apply(rt, [(write_col(primary.column), start_ts,\n"
            "                                 Write(start_ts, WriteKind.ROLLBACK))])\n")
    assert mine in answer
    tricked = answer.replace(mine, "            else:\n"
                                   "                from percolator_ref.variants.rollback_records "
                                   "import mark_rolled_back\n"
                                   "                mark_rolled_back(rt, primary.column, start_ts)\n")
    alone = answer.replace(mine, "")
    g_alone = grade(student_notebook(tmp_path / "alone.ipynb", 9, alone), limits=Limits())
    g_tricked = grade(student_notebook(tmp_path / "tricked.ipynb", 9, tricked), limits=Limits())
    assert g_alone.total and g_alone.n_passed < g_alone.total, g_alone.summary()
    assert g_tricked.n_passed <= g_alone.n_passed, (g_tricked.summary(), g_alone.summary())
