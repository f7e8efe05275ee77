"""Exercise 1 (snapshot read): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.

The parts a wrong answer gets right are written once (``CORRECT_*``: the lock
check, the newest write record, the version it points at); each entry spells
out only the part it gets wrong (:func:`_answer`).
"""
import textwrap

HEADER = '''from percolator_ref import Transaction
from percolator_ref.model import WriteKind, data_col, lock_col, write_col
from percolator_ref.transaction import SnapshotRead

'''

CORRECT_LOCK = '''\
lock = rt.read(lock_col(cell.column), self.start_ts)
if lock is not None:
    return SnapshotRead(lock=lock[1])
'''

CORRECT_LATEST = '''\
latest = rt.read(write_col(cell.column), self.start_ts)
if latest is None:
    return SnapshotRead()
commit_ts, write = latest
'''

CORRECT_VERSION = '''\
if write.kind is WriteKind.DELETE:
    return SnapshotRead(version=commit_ts)
data = rt.read(data_col(cell.column), write.start_ts, write.start_ts)
return SnapshotRead(version=commit_ts, value=data[1])
'''


def _answer(lock=CORRECT_LOCK, latest=CORRECT_LATEST, version=CORRECT_VERSION) -> str:
    """A whole answer cell: the method with the student's three parts."""
    body = "".join(textwrap.dedent(part) for part in (lock, latest, version))
    return (HEADER + "\nclass SnapshotReadTransaction(Transaction):\n"
            "    def snapshot_read(self, rt, cell):\n" + textwrap.indent(body, " " * 8))


WRONG = {
    "reads the newest data at or below start_ts, skipping the write column": _answer(
        latest='''\
# the data column already has every version: take the newest in my snapshot
data = rt.read(data_col(cell.column), self.start_ts)
if data is None:
    return SnapshotRead()
return SnapshotRead(version=data[0], value=data[1])
''', version=""),
    "waits on a lock at any timestamp, even above start_ts": _answer(lock='''\
lock = rt.read(lock_col(cell.column))          # somebody is writing this cell: wait
if lock is not None:
    return SnapshotRead(lock=lock[1])
'''),
    "ignores delete records (reads the data at or below the record's start_ts)": _answer(
        version='''\
data = rt.read(data_col(cell.column), write.start_ts)
return SnapshotRead(version=commit_ts, value=None if data is None else data[1])
'''),
    "skips delete records to find the last value written": _answer(latest='''\
for commit_ts, write in rt.versions(write_col(cell.column)):
    if commit_ts <= self.start_ts and write.kind is WriteKind.PUT:
        data = rt.read(data_col(cell.column), write.start_ts, write.start_ts)
        return SnapshotRead(version=commit_ts, value=data[1])
return SnapshotRead()
''', version=""),
    "never looks at the lock column": _answer(lock='''\
# locks are for writers; a reader only needs committed data
'''),
    "looks for a lock only at exactly start_ts": _answer(lock='''\
lock = rt.read(lock_col(cell.column), self.start_ts, self.start_ts)
if lock is not None:
    return SnapshotRead(lock=lock[1])
'''),
    "reads the newest write record, whatever its commit_ts": _answer(latest='''\
latest = rt.read(write_col(cell.column))       # the last committed write
if latest is None:
    return SnapshotRead()
commit_ts, write = latest
'''),
    "reads the data at the write record's commit_ts": _answer(version='''\
if write.kind is WriteKind.DELETE:
    return SnapshotRead(version=commit_ts)
data = rt.read(data_col(cell.column), commit_ts, commit_ts)
return SnapshotRead(version=commit_ts, value=data[1] if data else None)
'''),
    "reports the write record's start_ts as the version read": _answer(latest='''\
latest = rt.read(write_col(cell.column), self.start_ts)
if latest is None:
    return SnapshotRead()
write = latest[1]
''', version='''\
if write.kind is WriteKind.DELETE:
    return SnapshotRead(version=write.start_ts)
data = rt.read(data_col(cell.column), write.start_ts, write.start_ts)
return SnapshotRead(version=write.start_ts, value=data[1])
'''),
    "hands back the (timestamp, lock) pair instead of the lock": _answer(lock='''\
lock = rt.read(lock_col(cell.column), self.start_ts)
if lock:
    return SnapshotRead(lock=lock)
''', latest=CORRECT_LATEST.replace("if latest is None:", "if not latest:")),
    "reads past a lock its own client holds (its own pending write)": _answer(lock='''\
lock = rt.read(lock_col(cell.column), self.start_ts)
# a lock my own client holds is my own pending write: no need to wait for myself
if lock is not None and lock[1].client != self.client:
    return SnapshotRead(lock=lock[1])
'''),
    "lets only a pending put block the read, not a pending delete": _answer(lock='''\
lock = rt.read(lock_col(cell.column), self.start_ts)
# a pending delete leaves no data to wait for: only a pending put blocks the read
if lock is not None and lock[1].kind is WriteKind.PUT:
    return SnapshotRead(lock=lock[1])
'''),
    "reads past a dead holder's primary lock (thinks it can never commit now)": _answer(
        lock='''\
lock = rt.read(lock_col(cell.column), self.start_ts)
# a dead client's PRIMARY lock: it died before its commit point and can never
# commit now, so there is nothing to wait for: read the committed version under it
if lock is not None and not (lock[1].is_primary
                             and not self.session.is_alive(lock[1].client)):
    return SnapshotRead(lock=lock[1])
'''),
    "reads past a live holder's secondary lock (only the primary lock decides)": _answer(
        lock='''\
lock = rt.read(lock_col(cell.column), self.start_ts)
# the primary lock decides the transaction: a live holder will settle its own
# secondaries, so only a primary lock (or a dead holder's lock) makes me wait
if lock is not None and (lock[1].is_primary
                         or not self.session.is_alive(lock[1].client)):
    return SnapshotRead(lock=lock[1])
'''),
}

INTERLEAVING = {
    # misconceptions that only an interleaving of clients (or a crash, or a restart) shows:
    # every single-client check passes them
    "reads past a lock its own client holds (its own pending write)",
    "lets only a pending put block the read, not a pending delete",
    "reads past a dead holder's primary lock (thinks it can never commit now)",
    "reads past a live holder's secondary lock (only the primary lock decides)",
}
