"""Exercise 2 (prewrite): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.
"""
import textwrap

HEADER = '''from percolator_ref import Transaction, cleanup
from percolator_ref.model import Lock, WriteKind, data_col, lock_col, write_col
from percolator_ref.step import Step

'''


WRITES = '''\
                if m.kind is WriteKind.PUT:
                    rt.write(data_col(column), self.start_ts, m.value)
                rt.write(lock_col(column), self.start_ts,
                         Lock(self.start_ts, primary, is_primary, self.client, m.kind))
'''
CLEANUP = '''\
        if not self.session.is_alive(lock[1].client):
            cleanup.cleanup_lock(self.session, m.cell, lock[1])      # tidy up, still abort
        return False
'''


def _answer(newer="rt.read(write_col(column), min_ts=self.start_ts)",
            lock="rt.read(lock_col(column))", writes=WRITES, after=CLEANUP, conflict=None) -> str:
    """A whole answer cell: the usual skeleton, with the student's own checks and writes
    (``conflict``: the lines that look for a newer write, if not ``if {newer} is not None``)."""
    conflict = conflict or f"if {newer} is not None:\n    return False\n"
    conflict = textwrap.indent(textwrap.dedent(conflict), " " * 12)
    writes = textwrap.indent(textwrap.dedent(writes), " " * 16)
    after = textwrap.indent(textwrap.dedent(after), " " * 8)
    return HEADER + f'''
class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column, is_primary = m.cell.column, m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
{conflict}            lock = {lock}
            if lock is None:
{writes}                return True
{after}'''


WRONG = {
    "skips the lock check (only looks for newer write records)": _answer(lock="None"),
    "checks for a write record only at exactly start_ts": _answer(
        newer="rt.read(write_col(column), self.start_ts, self.start_ts)"),
    "treats any write record at or below start_ts as a conflict": _answer(
        newer="rt.read(write_col(column), self.start_ts)"),
    "checks locks only at or below start_ts": _answer(lock="rt.read(lock_col(column), self.start_ts)"),
    "locks first, then checks": HEADER + '''
class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column, is_primary = m.cell.column, m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            # grab the cell first so nobody sneaks in, then look for conflicts
            if m.kind is WriteKind.PUT:
                rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, primary, is_primary, self.client, m.kind))
            if rt.read(write_col(column), min_ts=self.start_ts) is not None:
                return False
            lock = rt.read(lock_col(column))
            if lock is not None:
                if not self.session.is_alive(lock[1].client):
                    cleanup.cleanup_lock(self.session, m.cell, lock[1])
                return False
            return True
''',
    "forgets the primary pointer (each lock names its own cell)": _answer(writes='''\
            if m.kind is WriteKind.PUT:
                rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, m.cell, is_primary, self.client, m.kind))
'''),
    "writes data for a delete too": _answer(writes='''\
            rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, primary, is_primary, self.client, m.kind))
'''),
    "leaves the kind out of the lock": _answer(writes='''\
            if m.kind is WriteKind.PUT:
                rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, primary, is_primary, self.client))
'''),
    "checks in one row transaction and writes in another": HEADER + '''
class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column, is_primary = m.cell.column, m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            newer = rt.read(write_col(column), min_ts=self.start_ts)
            lock = rt.read(lock_col(column))
        if newer is not None:
            return False
        if lock is not None:
            if not self.session.is_alive(lock[1].client):
                cleanup.cleanup_lock(self.session, m.cell, lock[1])
            return False
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            if m.kind is WriteKind.PUT:
                rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, primary, is_primary, self.client, m.kind))
        return True
''',
    "cleans up every lock it meets, live holders too": _answer(after='''\
        if lock is not None:
            cleanup.cleanup_lock(self.session, m.cell, lock[1])   # stale lock: clear it
        return False
'''),
    "cleans up a dead client's lock and carries on": HEADER + '''
class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column, is_primary = m.cell.column, m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            if rt.read(write_col(column), min_ts=self.start_ts) is not None:
                return False
            lock = rt.read(lock_col(column))
        if lock is not None:
            if self.session.is_alive(lock[1].client):
                return False
            cleanup.cleanup_lock(self.session, m.cell, lock[1])   # dead: clear it and go on
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            if rt.read(lock_col(column)) is not None:
                return False
            if m.kind is WriteKind.PUT:
                rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, primary, is_primary, self.client, m.kind))
            return True
''',
    "marks every lock as the primary": _answer(writes='''\
            if m.kind is WriteKind.PUT:
                rt.write(data_col(column), self.start_ts, m.value)
            rt.write(lock_col(column), self.start_ts,
                     Lock(self.start_ts, primary, True, self.client, m.kind))
'''),
    "takes a cell its own client already locked (its own earlier write)": HEADER + '''
class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column, is_primary = m.cell.column, m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            if rt.read(write_col(column), min_ts=self.start_ts) is not None:
                return False
            lock = rt.read(lock_col(column))
            # a lock of my own client is my own earlier write: overwrite it
            if lock is None or lock[1].client == self.client:
                if m.kind is WriteKind.PUT:
                    rt.write(data_col(column), self.start_ts, m.value)
                rt.write(lock_col(column), self.start_ts,
                         Lock(self.start_ts, primary, is_primary, self.client, m.kind))
                return True
        if not self.session.is_alive(lock[1].client):
            cleanup.cleanup_lock(self.session, m.cell, lock[1])
        return False
''',
    "checks for newer write records in one row transaction, locks in the next": HEADER + '''
class PrewriteTransaction(Transaction):
    def prewrite(self, m, primary):
        column, is_primary = m.cell.column, m.cell == primary
        step = Step.PREWRITE_PRIMARY if is_primary else Step.PREWRITE_SECONDARY
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            if rt.read(write_col(column), min_ts=self.start_ts) is not None:
                return False               # committed after my snapshot: conflict
        # the lock is what other writers respect: check it and write it atomically
        with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
            lock = rt.read(lock_col(column))
            if lock is None:
                if m.kind is WriteKind.PUT:
                    rt.write(data_col(column), self.start_ts, m.value)
                rt.write(lock_col(column), self.start_ts,
                         Lock(self.start_ts, primary, is_primary, self.client, m.kind))
                return True
        if not self.session.is_alive(lock[1].client):
            cleanup.cleanup_lock(self.session, m.cell, lock[1])
        return False
''',
    "looks for newer write records only at the primary": _answer(
        newer="(is_primary and rt.read(write_col(column), min_ts=self.start_ts) or None)"),
    "erases a dead holder's lock above start_ts on the spot": _answer(after='''\
        if not self.session.is_alive(lock[1].client):
            if lock[0] > self.start_ts:    # a newer transaction that died: just clear it
                with self.session.row_transaction(m.cell.table, m.cell.row, step) as rt:
                    rt.erase(lock_col(column), lock[0])
                    rt.erase(data_col(column), lock[0])
            else:
                cleanup.cleanup_lock(self.session, m.cell, lock[1])
        return False
'''),
}

INTERLEAVING = {
    # misconceptions that only an interleaving of clients shows: every single-client check passes
    "takes a cell its own client already locked (its own earlier write)",
    "checks for newer write records in one row transaction, locks in the next",
    "looks for newer write records only at the primary",
    "erases a dead holder's lock above start_ts on the spot",
}



# A delete committed after start_ts: only the conflict check's delete class shows these.
WRONG.update({
    "ignores a newer delete (nothing is left to overwrite)": _answer(conflict='''\
newer = rt.read(write_col(column), min_ts=self.start_ts)
if newer is not None and newer[1].kind is WriteKind.PUT:    # someone wrote a newer value
    return False
'''),
    "looks for a newer committed value by its data": _answer(conflict='''\
newer = rt.read(write_col(column), min_ts=self.start_ts)
if newer is not None:
    ts, write = newer
    if rt.read(data_col(column), write.start_ts, write.start_ts) is not None:
        return False                 # a newer version of the value: write-write conflict
'''),
})
