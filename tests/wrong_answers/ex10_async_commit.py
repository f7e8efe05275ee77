"""Exercise 10 (async commit): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check. INTERLEAVING
names the entries whose misconception shows only in an interleaving of the
readers with the async-commit transfer (every check of one client passes).
"""
import textwrap

HEADER = '''from percolator_ref import rows
from percolator_ref.cleanup import Cleanup
from percolator_ref.model import Cell, Write, WriteKind, lock_col, write_col
from percolator_ref.step import Step

'''

PRIMARY = '''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    lock = rows.held_lock(rt, primary.column, start_ts)
if commit_ts is not None or lock is None:
    return commit_ts
'''

CHECK = '''\
found = [lock.min_commit_ts]
for cell in map(Cell._make, lock.secondaries):
    with self.session.row_transaction(cell.table, cell.row, Step.CLEANUP_PRIMARY) as rt:
        other = rows.held_lock(rt, cell.column, start_ts)
        done = rows.find_commit_ts(rt, cell.column, start_ts)
        if other is None and done is None:
            rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    if done is not None:
        found = [done]
        break
    if other is None:
        found = None
        break
    found.append(other.min_commit_ts)
decided = max(found) if found else None
'''

DECIDE = '''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, start_ts) is None:
        return rows.find_commit_ts(rt, primary.column, start_ts)
    if decided is None:
        rows.apply(rt, rows.rollback_writes(primary.column, start_ts) + [
            (write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    else:
        rows.apply(rt, rows.commit_writes(primary.column, Write(start_ts, lock.kind), decided,
                                          notify=False))
    return decided
'''


def _answer(primary=PRIMARY, check=CHECK, decide=DECIDE) -> str:
    """A whole answer cell: the class with the student's resolve_primary, in three parts."""
    body = "".join(textwrap.dedent(part) for part in (primary, check, decide))
    return (HEADER + "\nclass AsyncResolve(Cleanup):\n"
            "    def resolve_primary(self, primary, start_ts, holder=None):\n"
            + textwrap.indent(body, " " * 8))


def _check(missing: str) -> str:
    """CHECK with another treatment of a secondary that holds no lock and no commit."""
    return CHECK.replace('''        if other is None and done is None:
            rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
''', missing)


WRONG = {
    "the paper's resolution: a primary still locked is rolled back": _answer(check='''\
decided = None                         # the holder is dead before its commit point
'''),
    "commit at the primary's own min_commit_ts": _answer(check=CHECK + '''\
decided = lock.min_commit_ts if decided is not None else None
'''),
    "commit at a fresh timestamp, as the paper's commit takes one": _answer(check=CHECK + '''\
decided = self.session.timestamp() if decided is not None else None
'''),
    "the largest min_commit_ts of the secondaries, without the primary's": _answer(
        check=CHECK.replace("found = [lock.min_commit_ts]", "found = []").replace(
            "decided = max(found) if found else None",
            "decided = max(found) if found is not None else None")),
    "one secondary locked is enough to commit": _answer(check='''\
decided = None
for cell in map(Cell._make, lock.secondaries):
    with self.session.row_transaction(cell.table, cell.row, Step.CLEANUP_PRIMARY) as rt:
        other = rows.held_lock(rt, cell.column, start_ts)
    if other is not None:              # it got that far: the transaction is committed
        decided = max(lock.min_commit_ts, other.min_commit_ts)
        break
'''),
    "a rollback record on the primary is read as its commit": _answer(primary='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    found = rt.read(write_col(primary.column))
    lock = rows.held_lock(rt, primary.column, start_ts)
if found is not None and found[1].start_ts == start_ts:
    return found[0]                    # a write record for our start_ts: decided
if lock is None:
    return None
'''),
    "commits the primary but reports no commit_ts": _answer(decide=DECIDE.replace(
        "    return decided\n", "    return None\n")),
    "a missing secondary is rolled back, but nothing is written there": _answer(check=_check("")),
    "the rollback record goes on the primary only": _answer(check=_check(""), decide='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, start_ts) is None:
        return rows.find_commit_ts(rt, primary.column, start_ts)
    if decided is None:                # the primary's record refuses the transaction for good
        rows.apply(rt, rows.rollback_writes(primary.column, start_ts) + [
            (write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    else:
        rows.apply(rt, rows.commit_writes(primary.column, Write(start_ts, lock.kind), decided,
                                          notify=False))
    return decided
'''),
    "the missing secondary's record is written in a row transaction of its own": _answer(
        check=_check("").replace('''    if other is None:
        found = None
        break
''', '''    if other is None:                  # missing: leave a rollback record there
        with self.session.row_transaction(cell.table, cell.row, Step.ROLL_BACK) as rt:
            rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
        found = None
        break
''')),
    "a secondary without a lock is missing (committed ones too)": _answer(check='''\
found = [lock.min_commit_ts]
for cell in map(Cell._make, lock.secondaries):
    with self.session.row_transaction(cell.table, cell.row, Step.CLEANUP_PRIMARY) as rt:
        other = rows.held_lock(rt, cell.column, start_ts)
        if other is None:              # no lock: never prewritten, refuse it from now on
            rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    if other is None:
        found = None
        break
    found.append(other.min_commit_ts)
decided = max(found) if found else None
'''),
}

INTERLEAVING = {
    # "a missing secondary is rolled back, but nothing is written there" and "the rollback
    # record goes on the primary only": no longer here: the missing-secondary check reads the
    # rollback record at start_ts on the missing secondary with one client.
    "the missing secondary's record is written in a row transaction of its own",
    "a secondary without a lock is missing (committed ones too)",
}


# Another transaction's lock on a cell the transaction lists, where its own prewrite never
# landed (issue 30, class 3): only the missing-secondary check's classes with X's lock show
# these; every other check meets only W's locks.
WRONG.update({
    "a listed secondary that is locked counts as prewritten": _answer(check=CHECK.replace(
        "        other = rows.held_lock(rt, cell.column, start_ts)\n",
        "        other = rt.read(lock_col(cell.column))           # is the secondary still locked?\n"
        "        other = other[1] if other is not None else None\n")),
    "a secondary's lock from before start_ts counts as the transaction's": _answer(check=CHECK.replace(
        "        other = rows.held_lock(rt, cell.column, start_ts)\n",
        "        other = rt.read(lock_col(cell.column), start_ts)      # locked when we started?\n"
        "        other = other[1] if other is not None else None\n")),
    "the primary's lock is the transaction's: resolves at its start_ts": _answer(primary='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    found = rt.read(lock_col(primary.column))            # the primary's lock
if commit_ts is not None or found is None:
    return commit_ts
lock = found[1]
''', decide=DECIDE.replace("start_ts", "lock.start_ts")),
})


# A rollback record on a secondary while the primary is still locked: a cleaner that fenced
# the secondary and died (or was overtaken) before rolling the primary back (issue 30, class
# 5). Only the family of two readers of a transfer that died half-prewritten, one of them
# overtaken (one preemption) or dead (one crash) half-way, builds it.
WRONG.update({
    "a rollback record on a secondary: someone already rolled the transaction back": _answer(
        check=_check('''\
        undone = rt.read(write_col(cell.column), start_ts, start_ts) is not None
        if other is None and done is None and not undone:
            rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
''').replace('''    if other is None:
        found = None
''', '''    if undone:                         # a rollback record: someone already rolled it back
        return None
    if other is None:
        found = None
''')),
    "the cleaner that wrote a secondary's rollback record rolls the primary back": _answer(
        check=_check('''\
        if other is None and done is None:
            fenced = rt.read(write_col(cell.column), start_ts, start_ts) is None
            if fenced:                 # we found it missing: we roll the transaction back
                rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
'''), decide=DECIDE.replace("    if decided is None:\n", """    if decided is None:
        if not fenced:                 # another cleaner's record: the primary is its to roll back
            return None
""")),
})
INTERLEAVING |= {
    "a rollback record on a secondary: someone already rolled the transaction back",
    "the cleaner that wrote a secondary's rollback record rolls the primary back",
}


# A holder judged dead that comes back (heartbeats) before its last prewrite lands (issue 30,
# class 4): only the family whose writer stalls and heartbeats, as a message of its own, before
# that prewrite, with three preemptions, shows this.
WRONG.update({
    "a live holder's missing secondary is only late: no record for it": _answer(check=_check('''\
        if other is None and done is None and not self.session.is_alive(holder):
            rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
''')),
})
INTERLEAVING |= {"a live holder's missing secondary is only late: no record for it"}


# A holder alive again by the time the reader has looked at the primary: the answer leaves the
# transaction to it and returns None, so the reader rolls its own secondary back while the
# holder goes on to its last prewrite and commits (issue 30, class 4). Only the coming-back
# family whose reader reads a secondary already prewritten, the heartbeat placed between the
# reader's look at that lock and its look at the primary, shows it.
WRONG.update({
    "a holder alive again after the look at the primary is left to finish: None": _answer(
        primary=PRIMARY + '''\
if self.session.is_alive(holder):      # it is back: nothing is decided, leave it to it
    return None
'''),
})
INTERLEAVING |= {"a holder alive again after the look at the primary is left to finish: None"}


# A reader that claims the primary (erases its lock) before it has decided, so that a second
# reader keeps out: the second finds neither lock nor commit there and rolls its own cell back
# while the first commits. Only the two-reader family's transfer that died with every prewrite
# landed (one reader overtaken between its claim and its decision) builds it (issue 30, class
# 5/7: before, only two preemptions or a crash beside the live writer's reached it).
WRONG.update({
    "claims the primary first (erases its lock) so that no other reader resolves it": _answer(
        primary='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    lock = rows.held_lock(rt, primary.column, start_ts)
    if lock is not None:               # claim it: no other reader resolves it meanwhile
        rt.erase(lock_col(primary.column), start_ts)
if commit_ts is not None or lock is None:
    return commit_ts
''', decide=DECIDE.replace('''    if rows.held_lock(rt, primary.column, start_ts) is None:
        return rows.find_commit_ts(rt, primary.column, start_ts)
''', '')),                              # it claimed the primary: no need to look again
})
INTERLEAVING |= {"claims the primary first (erases its lock) so that no other reader resolves it"}


# A transfer that deletes its primary and a secondary: the resolution commits the primary as the
# lock says (lock.kind), and a secondary's delete lock (no data) is a prewrite that landed. Only
# the primary reader's check's second value class (deletes) shows these; before, every lock of
# every check was a put.
WRONG.update({
    "commits the primary as a put (Write(start_ts)), whatever its lock's kind": _answer(
        decide=DECIDE.replace("Write(start_ts, lock.kind)", "Write(start_ts)")),
    "a secondary's prewrite landed when its data is there": _answer(
        check="from percolator_ref.model import data_col\n" + CHECK.replace('''        other = rows.held_lock(rt, cell.column, start_ts)
''', '''        landed = rt.read(data_col(cell.column), start_ts, start_ts)   # its prewrite's data
        other = rows.held_lock(rt, cell.column, start_ts) if landed is not None else None
''')),
})


# A rollback that fences with a record elsewhere than the rolled-back transaction's own
# start_ts, or not at all on its primary: only the missing-secondary check's records (at
# start_ts, on the missing secondary and on the rolled-back primary) show these.
WRONG.update({
    "the missing secondary's rollback record at a fresh timestamp, above every other": _answer(
        check=CHECK.replace(
            "rows.apply(rt, [(write_col(cell.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])",
            "rows.apply(rt, [(write_col(cell.column), self.session.timestamp(),   # newest: seen first\n"
            "                 Write(start_ts, WriteKind.ROLLBACK))])")),
    "the primary rolled back without a record (the missing secondary holds it)": _answer(
        decide=DECIDE.replace('''        rows.apply(rt, rows.rollback_writes(primary.column, start_ts) + [
            (write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])''',
                              '''        rows.apply(rt, rows.rollback_writes(primary.column, start_ts))   # the secondary's record fences it''')),
})
