"""Exercise 3 (commit): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.
"""
import textwrap

HEADER = '''from percolator_ref import Transaction, rows
from percolator_ref.model import Write, data_col, lock_col, write_col
from percolator_ref.step import Step

'''

COMMIT_PRIMARY = '''\
def commit_primary(self, m):
    notify = self.session.is_observed(m.cell.table, m.cell.column)
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        if rows.held_lock(rt, m.cell.column, self.start_ts) is None:
            return False
        rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.start_ts, m.kind),
                                          self.commit_ts, notify))
        return True
'''

PREWRITES = '''\
if not self.writes and not self.notifies:
    return True
mutations = list(self.writes.values())
primary = mutations[0].cell if mutations else None
for i, m in enumerate(mutations):
    if not self.prewrite(m, primary):
        self.roll_back_own(mutations[:i])
        return False
'''

REST = '''\
self.commit_ts = self.session.timestamp()
self.write_notifications(mutations[1:])
self.phase = "commit-point"
if mutations and not self.commit_primary(mutations[0]):
    self.commit_ts = None
    self.roll_back_own(mutations[1:])
    return False
self.phase = "secondaries"
for m in mutations[1:]:
    self.commit_secondary(m)
return True
'''


def _answer(commit_primary=COMMIT_PRIMARY, prewrites=PREWRITES, rest=REST) -> str:
    """A whole answer cell: the class with the student's two methods."""
    body = textwrap.indent(textwrap.dedent(prewrites) + textwrap.dedent(rest), " " * 8)
    return (HEADER + "\nclass CommitTransaction(Transaction):\n"
            + textwrap.indent(textwrap.dedent(commit_primary), " " * 4)
            + "\n    def two_phase_commit(self):\n" + body)


WRONG = {
    "commits the secondaries before the primary": _answer(rest='''\
self.commit_ts = self.session.timestamp()
self.write_notifications(mutations[1:])
for m in mutations[1:]:                  # the easy ones first
    self.commit_secondary(m)
self.phase = "commit-point"
if mutations and not self.commit_primary(mutations[0]):
    self.commit_ts = None
    return False
self.phase = "secondaries"
return True
'''),
    "takes commit_ts before prewriting": _answer(prewrites='''\
if not self.writes and not self.notifies:
    return True
self.commit_ts = self.session.timestamp()     # both timestamps up front
mutations = list(self.writes.values())
primary = mutations[0].cell if mutations else None
for i, m in enumerate(mutations):
    if not self.prewrite(m, primary):
        self.roll_back_own(mutations[:i])
        self.commit_ts = None
        return False
''', rest=REST.replace("self.commit_ts = self.session.timestamp()\n", "")),
    "does not check the primary lock at the commit point": _answer(commit_primary='''\
def commit_primary(self, m):
    # every prewrite succeeded, so the lock is ours: just commit
    notify = self.session.is_observed(m.cell.table, m.cell.column)
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.start_ts, m.kind),
                                          self.commit_ts, notify))
    return True
'''),
    "does not roll back its locks when the commit point fails": _answer(rest='''\
self.commit_ts = self.session.timestamp()
self.write_notifications(mutations[1:])
self.phase = "commit-point"
if mutations and not self.commit_primary(mutations[0]):
    self.commit_ts = None
    return False                          # aborted: readers will clean up
self.phase = "secondaries"
for m in mutations[1:]:
    self.commit_secondary(m)
return True
'''),
    "keeps its commit_ts after an abort": _answer(rest=REST.replace(
        "    self.commit_ts = None\n", "")),
    "takes a commit_ts even when it wrote nothing": _answer(prewrites='''\
mutations = list(self.writes.values())
primary = mutations[0].cell if mutations else None
for i, m in enumerate(mutations):
    if not self.prewrite(m, primary):
        self.roll_back_own(mutations[:i])
        return False
'''),
    "goes on after a failed prewrite": _answer(prewrites='''\
if not self.writes and not self.notifies:
    return True
mutations = list(self.writes.values())
primary = mutations[0].cell if mutations else None
for m in mutations:
    self.prewrite(m, primary)
'''),
    "stops at a failed prewrite without rolling back": _answer(prewrites='''\
if not self.writes and not self.notifies:
    return True
mutations = list(self.writes.values())
primary = mutations[0].cell if mutations else None
if not all(self.prewrite(m, primary) for m in mutations):
    return False
'''),
    "forgets the notifications": _answer(rest=REST.replace(
        "self.write_notifications(mutations[1:])\n", "")),
    "writes the notifications after the secondaries": _answer(rest='''\
self.commit_ts = self.session.timestamp()
self.phase = "commit-point"
if mutations and not self.commit_primary(mutations[0]):
    self.commit_ts = None
    self.roll_back_own(mutations[1:])
    return False
self.phase = "secondaries"
for m in mutations[1:]:
    self.commit_secondary(m)
self.write_notifications(mutations[1:])      # once everything is committed
return True
'''),
    "never tells commit() where it is (self.phase)": _answer(rest=REST.replace(
        'self.phase = "commit-point"\n', "").replace('self.phase = "secondaries"\n', "")),
    "writes the primary's write record but leaves its lock": _answer(commit_primary='''\
def commit_primary(self, m):
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        if rt.read(lock_col(m.cell.column), self.start_ts, self.start_ts) is None:
            return False
        rt.write(write_col(m.cell.column), self.commit_ts, Write(self.start_ts, m.kind))
        return True
'''),
    "points the write record at commit_ts": _answer(commit_primary='''\
def commit_primary(self, m):
    notify = self.session.is_observed(m.cell.table, m.cell.column)
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        if rows.held_lock(rt, m.cell.column, self.start_ts) is None:
            return False
        rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.commit_ts, m.kind),
                                          self.commit_ts, notify))
        return True
'''),
    "checks that the primary is still locked, by anyone, at the commit point": _answer(
        commit_primary='''\
def commit_primary(self, m):
    notify = self.session.is_observed(m.cell.table, m.cell.column)
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        if rt.read(lock_col(m.cell.column)) is None:      # my lock was cleaned up: abort
            return False
        rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.start_ts, m.kind),
                                          self.commit_ts, notify))
        return True
'''),
    "checks its primary lock in one row transaction, commits it in the next": _answer(
        commit_primary='''\
def commit_primary(self, m):
    notify = self.session.is_observed(m.cell.table, m.cell.column)
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        held = rows.held_lock(rt, m.cell.column, self.start_ts) is not None
    if not held:                       # a cleaner rolled me back: abort
        return False
    # my lock is there, so nobody can take the primary from me: commit it
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_PRIMARY) as rt:
        rows.apply(rt, rows.commit_writes(m.cell.column, Write(self.start_ts, m.kind),
                                          self.commit_ts, notify))
    return True
'''),
    "erases a secondary's lock, then writes its record in another row transaction": _answer(
        rest=REST.replace('''for m in mutations[1:]:
    self.commit_secondary(m)
''', '''for m in mutations[1:]:             # release each lock at once, then publish the record
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_SECONDARY) as rt:
        rt.erase(lock_col(m.cell.column), self.start_ts)
    with self.session.row_transaction(m.cell.table, m.cell.row, Step.COMMIT_SECONDARY) as rt:
        rt.write(write_col(m.cell.column), self.commit_ts, Write(self.start_ts, m.kind))
''')),
    "rolls back after a failed commit point by erasing each cell's newest lock": _answer(
        rest=REST.replace('''    self.roll_back_own(mutations[1:])
''', '''    for s in mutations[1:]:            # the locks on my cells are mine: erase them
        with self.session.row_transaction(s.cell.table, s.cell.row,
                                          Step.ABORT_ROLLBACK) as rt:
            found = rt.read(lock_col(s.cell.column))
            if found is not None:
                rt.erase(lock_col(s.cell.column), found[0])
                rt.erase(data_col(s.cell.column), found[0])
''')),
}

INTERLEAVING = {
    # misconceptions that only an interleaving of clients shows: every single-client check passes
    "checks that the primary is still locked, by anyone, at the commit point",
    "checks its primary lock in one row transaction, commits it in the next",
    "erases a secondary's lock, then writes its record in another row transaction",
    "rolls back after a failed commit point by erasing each cell's newest lock",
}
