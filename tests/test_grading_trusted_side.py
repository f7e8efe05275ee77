"""The trusted side of a grade cannot be stalled, flooded or crashed by the student's child.

Each attack below is exercise 5's solution with a trick run by the oracle built
without a state_path (only the check "without a state_path the mark lives in
memory" builds one), reaching the channel the way a student can: the client
host and the pipe writer found with ``gc``, raw frames written to the pipe.
Each notebook must still get exactly one grade with its student and exercise,
the trick must score no more than the solution does without it, and the next
student's notebook must be graded as if alone.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from percolator_ref.grading.judge import ex05_oracle
from percolator_ref.grading.grade.grader import grade, grade_all
from grading_helpers import REPO, solution_answer, student_notebook

TRIGGER = "        self.state_path, self.range_size = state_path, range_size\n"
MEMORY_CHECK = "without a state_path the mark lives in memory"

CHANNEL = '''
import gc, json, os, signal, struct, time


def _channel():
    """The child's client host, its pipe writer and the client being served now."""
    host = next(o for o in gc.get_objects() if type(o).__name__ == "ClientHost")
    writer = next(o for o in gc.get_objects() if type(o).__name__ == "PipeWriter")
    return host, writer, max(host.inboxes)


def _frame(data):
    return struct.pack(">I", len(data)) + data


def _rows(host, cid, n, width):
    for k in range(n):
        host.request(cid, {"op": "row", "table": "t", "row": f"{k:04d}" + "x" * (width - 4),
                           "step": "row-transaction"})
        host.request(cid, {"op": "end", "commit": True, "mutations": [["c", 1, "v"]]})
'''

ATTACKS = {
    "floods 3,000 requests, then SIGSTOPs itself": '''
def _attack():
    host, writer, cid = _channel()
    _rows(host, cid, 1, 2_000)                      # each listing is about 2 kB
    for _ in range(3000):
        writer.write(_frame(json.dumps({"cid": cid, "op": "rows", "table": "t", "start": None,
                                        "end": None}).encode()))
    signal.raise_signal(signal.SIGSTOP)
''',
    "floods 3,000 requests and stops reading": '''
def _attack():
    host, writer, cid = _channel()
    host.deliver = lambda msg: time.sleep(10 ** 6)      # the reading thread never returns
    for _ in range(3000):
        writer.write(_frame(json.dumps({"cid": cid, "op": "now"}).encode()))
''',
    "asks for a listing too large to frame": '''
def _attack():
    host, writer, cid = _channel()
    _rows(host, cid, 110, 10_000)
    host.request(cid, {"op": "rows", "table": "t", "start": None, "end": None})
''',
    "sends a 400,000-deep JSON frame": '''
def _attack():
    host, writer, cid = _channel()
    writer.write(_frame(b"[" * 400_000 + b"]" * 400_000))
    time.sleep(60)
''',
}

FLOOD_ROWS = '''
def _attack():
    host, writer, cid = _channel()
    _rows(host, cid, 95, 10_000)                    # each listing is about 1 MB
    host.deliver = lambda msg: None                 # replies are read and dropped
    request = _frame(json.dumps({"cid": cid, "op": "rows", "table": "t", "start": None,
                                 "end": None}).encode())
    for _ in range(1500):
        writer.write(request)
    time.sleep(60)
'''


def attacked(attack: str) -> str:
    """Exercise 5's solution, running ``attack`` when built without a state_path."""
    answer = solution_answer(5)
    assert TRIGGER in answer
    return CHANNEL + attack + answer.replace(
        TRIGGER, TRIGGER + "        if state_path is None:\n            _attack()\n")


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_on_the_trusted_side_costs_only_its_check(name, tmp_path):
    """The attacked check fails, the others pass in a fresh child; the next student's
    solution scores full marks; both grades name their student and exercise."""
    evil = student_notebook(tmp_path / "evil.ipynb", 5, attacked(ATTACKS[name]), student="mallory")
    good = student_notebook(tmp_path / "good.ipynb", 5, solution_answer(5), student="alice")
    start = time.monotonic()
    grades = grade_all([evil, good])
    took = time.monotonic() - start
    assert [(g.student, g.exercise) for g in grades] == [("mallory", 5), ("alice", 5)]
    bad, fine = grades
    n = len(ex05_oracle.exercise)
    assert (fine.n_passed, fine.total) == (n, n), fine.summary()
    assert bad.total == n and bad.n_passed <= n - 1, bad.summary()
    failed = [r for r in bad.checks if not r.passed]
    assert [r.name for r in failed] == [MEMORY_CHECK], bad.summary()
    assert not bad.problems, bad.summary()
    assert took < 240, f"two notebooks took {took:.0f} s"


GRADE_AND_MEASURE = '''
import json, resource, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from percolator_ref.grading.grade.grader import grade
g = grade(sys.argv[2])
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "passed": g.n_passed, "total": g.total, "student": g.student}))
'''


@pytest.mark.timeout(400)
def test_a_flood_of_large_replies_does_not_grow_the_trusted_side(tmp_path):
    """1,500 listings of about 1 MB each: the world keeps a digest of each reply (the
    fingerprint's record of what a client heard), not its text."""
    evil = student_notebook(tmp_path / "evil.ipynb", 5, attacked(FLOOD_ROWS), student="mallory")
    done = subprocess.run([sys.executable, "-c", GRADE_AND_MEASURE, str(REPO), str(evil)],
                          capture_output=True, text=True, timeout=380, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["student"] == "mallory" and found["total"] == len(ex05_oracle.exercise)
    assert found["passed"] <= found["total"]
    assert found["rss_mb"] < 300, found          # 828 MB before (the replies kept), 60 MB now


WORKER = '''
import atexit, sys, time
sys.path.insert(0, sys.argv[1])
from percolator_ref.grading.grade.grader import _worker_started
_worker_started(list(sys.path))
atexit.register(time.sleep, 3)          # the pool's SIGTERM lands while the worker exits
print("ready", flush=True)
'''


def test_a_worker_ended_outside_a_grade_prints_no_traceback():
    """A pool ends its workers with SIGTERM; one that is not grading a notebook (here:
    exiting) dies quietly instead of raising SystemExit(143) with a traceback."""
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(REPO)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and "SystemExit" not in err, err


def sandbox_children() -> list:
    """Sandboxed children of this kit still running (their command line names BOOT)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"grading.sandbox.child import child_main" in cmdline and str(REPO).encode() in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.timeout(300)
def test_the_run_watchdog_ends_a_stalled_run_with_a_row_per_notebook(tmp_path):
    """No notebook done within ``stall`` seconds: the workers are ended, their children
    killed, and each notebook still gets its row, named. The solution alone is graded in
    a few seconds now (the reduction), so each child truly stalls: it sleeps in the
    constructor, mid-check, past the run's ``stall``."""
    answer = solution_answer(5)
    assert TRIGGER in answer
    stalling = answer.replace(TRIGGER, TRIGGER + "        __import__('time').sleep(120)\n")
    paths = [student_notebook(tmp_path / f"{k}.ipynb", 5, stalling, student=f"s{k}")
             for k in range(3)]
    before = set(sandbox_children())
    start = time.monotonic()
    grades = grade_all(paths, jobs=2, stall=6.0)          # mid-grade: children are running
    assert time.monotonic() - start < 60
    assert [(g.student, g.exercise, g.total) for g in grades] == \
        [(f"s{k}", 5, len(ex05_oracle.exercise)) for k in range(3)]
    stalled = [g for g in grades if g.problems]
    assert stalled and all(g.n_passed == 0 and g.problems[0].startswith(
        "not graded: no notebook of the run finished for 6 s") for g in stalled), \
        [g.summary() for g in grades]
    assert stalled == grades             # none done in time: each gets its row, none graded
    gone_by = time.monotonic() + 15       # killed; on a loaded machine reaped a little later
    while not set(sandbox_children()) <= before and time.monotonic() < gone_by:
        time.sleep(0.2)
    assert set(sandbox_children()) <= before


STORE_FLOOD = '''
import gc


def _attack():
    """Once per world: 20 rows of 500 kB each (the world keeps its cells after each step)."""
    host = next(o for o in gc.get_objects() if type(o).__name__ == "ClientHost")
    cid = max(host.inboxes)
    if host.request(cid, {"op": "rows", "table": "t", "start": None, "end": None}):
        return
    for k in range(20):
        host.request(cid, {"op": "row", "table": "t", "row": f"r{k}", "step": "row-transaction"})
        host.request(cid, {"op": "end", "commit": True, "mutations": [["c", 1, "v" * 500_000]]})
'''


@pytest.mark.timeout(400)
def test_a_store_filled_by_a_client_does_not_grow_the_trusted_side(tmp_path):
    """Exercise 1's solution writing 10 MB into each world's store: the world's log (its cells
    after each step) and the exploration's fingerprints grew the grader to 2.2 GB; the
    clients may write 256 KiB into a world's store (the solutions write at most 1.6 kB)."""
    answer = solution_answer(1)
    line = "    def snapshot_read(self, rt, cell):\n"
    assert line in answer
    evil = student_notebook(tmp_path / "evil.ipynb", 1, STORE_FLOOD + answer.replace(
        line, line + "        _attack()\n"), student="mallory")
    done = subprocess.run([sys.executable, "-c", GRADE_AND_MEASURE, str(REPO), str(evil)],
                          capture_output=True, text=True, timeout=380, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["student"] == "mallory" and found["total"] > 0
    assert found["rss_mb"] < 300, found


COLLIDING_KEYS = '''
def _attack():
    """One frame of 37,000 int keys that all hash alike (``hash(i * (2**61 - 1)) == 0``):
    cheap to write, about 10 s of the world's CPU to build as a dict, unlimited by its
    check's deadline (the world is busy in one message)."""
    host, writer, cid = _channel()
    m = (1 << 61) - 1
    pairs = ",".join(f"[{m * i},0]" for i in range(1, 37_000))
    writer.write(_frame(('{"op":"end","commit":true,"mutations":[["c",0,{"$":"D","v":['
                         + pairs + ']}]]}').encode()))
    time.sleep(60)
'''


def test_a_decoded_dict_refuses_keys_that_share_one_hash():
    from percolator_ref.grading.channel import MAX_SAME_HASH, ProtocolError, decode, encode
    m = sys.hash_info.modulus
    fine = {**{i: i for i in range(-3, 3000)}, (1, "a"): 0, 2.5: None, -1: 1}   # hash(-1) == hash(-2)
    assert decode(encode(fine)) == fine
    alike = {"$": "D", "v": [[m * i, 0] for i in range(1, MAX_SAME_HASH + 2)]}
    with pytest.raises(ProtocolError, match="share one hash"):
        decode(alike)
    assert len(decode({"$": "D", "v": alike["v"][:MAX_SAME_HASH]})) == MAX_SAME_HASH


@pytest.mark.timeout(400)
def test_a_frame_of_colliding_dict_keys_is_refused_before_it_is_built(tmp_path):
    """The world refuses the frame as malformed (the attacked check fails, the others pass);
    before, it built the dict (about 10 s of its CPU per frame, past the check's deadline)
    and only then found the request out of turn."""
    evil = student_notebook(tmp_path / "evil.ipynb", 5, attacked(COLLIDING_KEYS), student="mallory")
    good = student_notebook(tmp_path / "good.ipynb", 5, solution_answer(5), student="alice")
    bad, fine = grade_all([evil, good])
    n = len(ex05_oracle.exercise)
    assert (fine.student, fine.n_passed, fine.total) == ("alice", n, n), fine.summary()
    failed = [r for r in bad.checks if not r.passed]
    assert bad.student == "mallory" and [r.name for r in failed] == [MEMORY_CHECK], bad.summary()
    assert "share one hash" in failed[0].reason, bad.summary()
