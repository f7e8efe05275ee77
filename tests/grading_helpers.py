"""Build student notebooks from a pristine exercise: only the answer cells change."""
from __future__ import annotations

import contextlib
import importlib.util
import json
import zipfile
from pathlib import Path

import nbformat

from percolator_ref.grading.grade.answers import answer_cell_ids
from percolator_ref.grading.grade.generate import BEGIN, END, exercise_number

REPO = Path(__file__).resolve().parents[1]


def pristine_path(n: int) -> Path:
    return next((REPO / "exercises").glob(f"{n:02d}_*.ipynb"))


def solution_path(n: int) -> Path:
    return next((REPO / "solutions").glob(f"{n:02d}_*.ipynb"))


def student_notebook(path, n: int, answer: str, student=None, exercises_dir=None) -> Path:
    """Write the pristine exercise ``n`` with its (single) answer cell replaced by ``answer``."""
    source = Path(exercises_dir) / pristine_path(n).name if exercises_dir else pristine_path(n)
    nb = nbformat.read(source, as_version=4)
    ids = answer_cell_ids(nb, n)
    assert len(ids) == 1, "these helpers fill exactly one answer cell"
    for cell in nb.cells:
        if cell.get("id") in ids:
            cell.source = answer
            cell.outputs = []
    if student is not None:
        nb.metadata["percolator"]["student"] = student
    nbformat.write(nb, path)
    return Path(path)


def solution_answer(n: int) -> str:
    """The solution's answer cell, markers removed (what a correct student writes)."""
    nb = nbformat.read(solution_path(n), as_version=4)
    assert exercise_number(nb) == n
    cells = [c.source for c in nb.cells if c.cell_type == "code" and BEGIN in c.source]
    assert len(cells) == 1
    return "\n".join(line for line in cells[0].splitlines() if line.strip() not in (BEGIN, END))


def load_catalogue(n: int) -> dict:
    """``WRONG`` of tests/wrong_answers/exNN_*.py."""
    from percolator_ref.commands.common_mistakes import load_catalogue as load
    return load(n, REPO / "tests" / "wrong_answers")


def catalogue(n: int):
    """The module tests/wrong_answers/exNN_*.py (``WRONG``, ``INTERLEAVING``, ...), or None."""
    paths = sorted((REPO / "tests" / "wrong_answers").glob(f"ex{n:02d}_*.py"))
    if not paths:
        return None
    spec = importlib.util.spec_from_file_location(f"wrong_answers_ex{n:02d}", paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_json(value) -> str:
    return json.dumps(value)


# -- broken zips (a class folder's hostile entries) ------------------------------------------

def _patched_zip(path: Path, nb: Path, member: str, local: dict, central: dict) -> Path:
    """A one-notebook zip with header bytes overwritten: ``{offset: bytes}`` in the local
    file header and in the central directory header."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.write(nb, member)
    data = bytearray(path.read_bytes())
    where = {0: local, data.index(b"PK\x01\x02"): central}
    for start, patch in where.items():
        for offset, raw in patch.items():
            data[start + offset:start + offset + len(raw)] = raw
    path.write_bytes(bytes(data))
    return path


def broken_zips(folder: Path, nb: Path, member: str) -> dict:
    """``{name: what is wrong}``: each a zip that zipfile cannot unpack."""
    with zipfile.ZipFile(folder / "badcrc.zip", "w", zipfile.ZIP_STORED) as z:
        z.write(nb, member)
    data = bytearray((folder / "badcrc.zip").read_bytes())
    middle = data.index(b'"cells"')                       # inside the stored notebook
    data[middle + 1] ^= 0x20
    (folder / "badcrc.zip").write_bytes(bytes(data))
    with zipfile.ZipFile(folder / "dirclash.zip", "w") as z:
        z.write(nb, member)
        z.write(nb, f"{member}/again.ipynb")         # a member that is also a folder
    _patched_zip(folder / "encrypted.zip", nb, member, {6: b"\x01\x00"}, {8: b"\x01\x00"})
    _patched_zip(folder / "method99.zip", nb, member, {8: b"\x63\x00"}, {10: b"\x63\x00"})
    return {"badcrc": "damaged member", "dirclash": "cannot be written",
            "encrypted": "encrypted member", "method99": "unsupported compression method"}


# -- exercise 1: attacks of a client on the grader's trusted world (test_grading_hostile.py,
# and as an unprivileged grader in test_grading_privileges.py) --------------------------------

WRONG_READ = '''
from percolator_ref import Transaction
from percolator_ref.transaction import SnapshotRead


class SnapshotReadTransaction(Transaction):
    def snapshot_read(self, rt, cell):
        return SnapshotRead()
'''

CLIENT_ATTACKS = {
    "forged observations: every role and answer replaced by canned values": WRONG_READ + '''
import sys
for name, module in list(sys.modules.items()):
    if name.startswith("percolator_ref.grading"):
        spec = getattr(module, "exercise", None)
        if spec is not None and hasattr(spec, "roles"):
            for role in list(spec.roles):
                spec.roles[role] = lambda answer, cluster, *args: [1, 2]
clients = sys.modules["percolator_ref.grading.client.host"]
def canned(self, cid, fn):
    self.send({"cid": cid, "op": "answer", "outcome": {"value": [1, 2]}})
clients.ClientHost.answer_with = canned
''',
    "a forged report on every descriptor": WRONG_READ + '''
import json, os, struct
report = json.dumps({"results": {}, "guarded": True, "passed": True}).encode()
ready = json.dumps({"op": "ready"}).encode()
fake = json.dumps({"cid": 1, "op": "answer", "outcome": {"value": True}}).encode()
try:                                  # every descriptor it has, whatever their numbers
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
except OSError:
    fds = range(1024)
for fd in (fd for fd in fds if fd > 2):
    for data in (report, struct.pack(">I", len(ready)) + ready, struct.pack(">I", len(fake)) + fake):
        try:
            os.write(fd, data)
        except OSError:
            pass
''',
    "the job read from the grading code's stack frames": WRONG_READ + '''
import json, os, sys
frame, job = sys._getframe(), None
while frame is not None and job is None:
    job = frame.f_locals.get("job") if isinstance(frame.f_locals.get("job"), dict) else None
    frame = frame.f_back
if job is not None:
    names = list(job.get("params") or {})
    report = {"nonce": job["nonce"], "guarded": True, "landlock": "",
              "results": {n: {"obs": {}} for n in names}}
    os.write(job["result_fd"], json.dumps(report).encode())
    os._exit(0)
''',
    "rebuilds the hidden step from an optimized .pyc": '''
import marshal, os, sys, types
import percolator_ref
from percolator_ref import Transaction

CACHE = os.path.join(os.path.dirname(percolator_ref.__file__), "__pycache__")
FOUND = {}
for name in sorted(os.listdir(CACHE)):
    if name.startswith("transaction.") and ".opt-" in name:
        with open(os.path.join(CACHE, name), "rb") as f:
            code = marshal.loads(f.read()[16:])
        copy = sys.modules["percolator_ref.t2"] = types.ModuleType("percolator_ref.t2")
        copy.__package__ = "percolator_ref"
        exec(code, copy.__dict__)
        FOUND["ns"] = copy.__dict__
        break


class SnapshotReadTransaction(Transaction):
    def snapshot_read(self, rt, cell):
        step = FOUND["ns"]["snapshot_read"]
        result = step(rt, self.start_ts, cell.column)
        return result
''',
}


@contextlib.contextmanager
def optimized_pyc_of(source: Path):
    """What a ``python -O`` run leaves behind: ``source``'s optimized ``.opt-1.pyc`` (the
    "rebuilds the hidden step" attack reads it), removed afterwards unless it was there."""
    import importlib.util
    import py_compile
    target = Path(importlib.util.cache_from_source(str(source), optimization=1))
    existed = target.exists()
    py_compile.compile(str(source), cfile=str(target), optimize=1, doraise=True)
    try:
        yield target
    finally:
        if not existed:
            target.unlink(missing_ok=True)


def first_failure(spec, answer, secret: int = 0):
    """The self-check's first failing check (its Result), or None if every check passes:
    the checks run one at a time, in the report's order, and none after the first that
    fails (the whole self-check would run them all to keep only this one)."""
    from percolator_ref.grading.judge.interactive import self_check
    for check in spec.checks:
        [result] = self_check(spec, answer, secret=secret, only={check.name}).results
        if not result.passed:
            return result
    return None
