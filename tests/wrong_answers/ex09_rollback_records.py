"""Exercise 9 (rollback records): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check. INTERLEAVING
names the entries whose misconception shows only in an interleaving of the
reader with the transfer (every check that builds one client at a time passes).
"""
import textwrap

HEADER = '''from percolator_ref import rows
from percolator_ref.cleanup import Cleanup
from percolator_ref.model import Write, WriteKind, data_col, lock_col, write_col
from percolator_ref.step import Step

'''

# The opening most answers share: in one row transaction at the primary, a commit found is
# returned and the transaction's own lock is rolled back; the answers differ in what follows.
COMMITTED_OR_LOCKED = '''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    if commit_ts is not None:
        return commit_ts
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
'''

RESOLVE = COMMITTED_OR_LOCKED + '''\
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''

ROLLBACK = '''\
record = Write(start_ts, WriteKind.ROLLBACK)
return rows.rollback_writes(column, start_ts) + [(write_col(column), start_ts, record)]
'''


def _answer(resolve=RESOLVE, rollback=ROLLBACK) -> str:
    """A whole answer cell: the class with the student's two methods."""
    return (HEADER + "\nclass RollbackCleanup(Cleanup):\n"
            "    def resolve_primary(self, primary, start_ts, holder=None):\n"
            + textwrap.indent(textwrap.dedent(resolve), " " * 8)
            + "\n    def rollback_writes(self, column, start_ts):\n"
            + textwrap.indent(textwrap.dedent(rollback), " " * 8))


WRONG = {
    "the paper's rollback: erase the lock and the data, no record": _answer(rollback='''\
return [(lock_col(column), start_ts, None), (data_col(column), start_ts, None)]
'''),
    "the record is a commit (kind PUT) at start_ts": _answer(rollback='''\
return rows.rollback_writes(column, start_ts) + [(write_col(column), start_ts, Write(start_ts))]
'''),
    "the record at the next timestamp, as a commit would be": _answer(rollback='''\
record = Write(start_ts, WriteKind.ROLLBACK)
return rows.rollback_writes(column, start_ts) + [(write_col(column), start_ts + 1, record)]
'''),
    "the record replaces the erasures (the lock stays)": _answer(rollback='''\
return [(data_col(column), start_ts, None),
        (write_col(column), start_ts, Write(start_ts, WriteKind.ROLLBACK))]
'''),
    "any write record at start_ts means committed, a rollback record too": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    found = rt.read(write_col(primary.column))
    if found is not None and found[1].start_ts == start_ts:
        return found[0]                    # the newest write record is ours: committed
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
    "no lock on the primary: roll it back, whether or not it committed": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
    "a primary that is neither locked nor committed was rolled back: nothing to write": _answer(
        resolve=COMMITTED_OR_LOCKED + '''\
    return None                        # no lock: someone already rolled it back
'''),
    "decide in one row transaction, roll back in the next": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    locked = rows.held_lock(rt, primary.column, start_ts) is not None
    recorded = rt.read(write_col(primary.column), start_ts, start_ts) is not None
if commit_ts is not None:
    return commit_ts
if locked or not recorded:             # not committed: roll it back, record and all
    with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
return None
'''),
    "the record for a missing primary written after the check, in its own row transaction": _answer(
        resolve=COMMITTED_OR_LOCKED + '''\
        return None
    missing = rt.read(write_col(primary.column), start_ts, start_ts) is None
if missing:                            # nothing there yet: leave a record behind
    with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
return None
'''),
    "check for a commit first, then lock or record in a second row transaction": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
if commit_ts is not None:              # committed: nothing else to decide
    return commit_ts
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
return None
'''),
}

INTERLEAVING = {
    # "a primary that is neither locked nor committed was rolled back: nothing to write": no longer here: the secondary-reader check's class 3 (another transaction's lock on the primary) catches it
    # with one client.
    "decide in one row transaction, roll back in the next",
    "the record for a missing primary written after the check, in its own row transaction",
    "check for a commit first, then lock or record in a second row transaction",
}


# A primary rolled back by another cleaner and then written by a later transaction: only the
# secondary-reader check's second value class shows these (one writer touched the primary).
WRONG.update({
    "a commit after start_ts on the primary (not a rollback) is the transaction's": _answer(
        resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    newest = rt.read(write_col(primary.column))
    if newest is not None and newest[0] > start_ts and newest[1].kind is not WriteKind.ROLLBACK:
        return newest[0]                   # committed after we started: our commit
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
    "looks for the commit record above start_ts only": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    above = rt.read(write_col(primary.column), min_ts=start_ts + 1)   # commit_ts > start_ts
    if above is not None:
        return above[0]
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
})


# Another transaction's lock on the primary, whose own prewrite never landed: only the
# secondary-reader check's third and fourth value classes show these.
WRONG.update({
    "rolls back whatever lock the primary holds": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    if commit_ts is not None:
        return commit_ts
    lock = rt.read(lock_col(primary.column))
    if lock is not None:                        # the primary is still locked: roll it back
        rows.apply(rt, self.rollback_writes(primary.column, lock[0]))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
    "takes the primary's lock at or below start_ts for the transaction's": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, start_ts)
    if commit_ts is not None:
        return commit_ts
    lock = rt.read(lock_col(primary.column), start_ts)      # a lock from before we started
    if lock is not None:
        rows.apply(rt, self.rollback_writes(primary.column, lock[0]))
    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
})


# A holder judged dead that comes back (heartbeats) before its primary's prewrite lands
# (issue 30, class 4): only the late-primary family, whose writer heartbeats as a message of
# its own before that prewrite, with three preemptions, shows these.
WRONG.update({
    "a live holder's primary prewrite is on its way: no record for it": _answer(resolve=RESOLVE.replace(
        "    elif rt.read(write_col(primary.column), start_ts, start_ts) is None:\n",
        "    elif rt.read(write_col(primary.column), start_ts, start_ts) is None \\\n"
        "            and not self.session.is_alive(holder):   # alive: it will prewrite, leave it be\n")),
})
INTERLEAVING |= {"a live holder's primary prewrite is on its way: no record for it"}


# Value classes the check of a reader of the secondary (an older transaction's rollback record
# on the primary, below start_ts, W's prewrite of it never landed) and the roll-forward check
# (W's commit on the primary, then a later transaction's) build for these (issue 30, classes 1
# and 2); no other check's primary holds a write record of another transaction near W's.
WRONG.update({
    "the newest rollback record up to start_ts on the primary means rolled back": _answer(
        resolve=COMMITTED_OR_LOCKED + '''\
        return None
    last = rt.read(write_col(primary.column), start_ts)     # newest record up to start_ts
    if last is not None and last[1].kind is WriteKind.ROLLBACK:
        return None                        # already rolled back
    rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
    "the primary's newest write record decides, committed or rolled back": _answer(resolve='''\
with self.session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    newest = rt.read(write_col(primary.column))
    if newest is not None and newest[1].start_ts == start_ts:
        return None if newest[1].kind is WriteKind.ROLLBACK else newest[0]
    if rows.held_lock(rt, primary.column, start_ts) is not None:
        rows.apply(rt, self.rollback_writes(primary.column, start_ts))
    else:                                  # nothing of ours: refuse a late prewrite
        rows.apply(rt, [(write_col(primary.column), start_ts, Write(start_ts, WriteKind.ROLLBACK))])
    return None
'''),
})


# A holder judged dead that comes back (heartbeats) after every prewrite landed, its primary
# lock still held, before its commit (issue 30, class 4): only the family whose holder stalls before
# its commit, its reader reading the secondary only (a reader that goes on to the primary meets
# the lock again and rolls it back once the holder is dead again), shows these. In the other
# families the holder comes back before its primary's lock is there.
ROLL_BACK_PRIMARY = "        rows.apply(rt, self.rollback_writes(primary.column, start_ts))\n"
ALIVE_AGAIN = RESOLVE.replace(ROLL_BACK_PRIMARY, """\
        if self.session.is_alive(holder):
{alive}        else:
    """ + ROLL_BACK_PRIMARY)
WRONG.update({
    "a holder alive again keeps its primary lock: nothing to resolve": _answer(
        resolve=ALIVE_AGAIN.format(alive='''\
            return None                # it heartbeated: the lock is its own again, leave it
''')),
    "a holder alive again is fenced by the rollback record alone, its lock left": _answer(
        resolve=ALIVE_AGAIN.format(alive='''\
            # alive again: don't pull its lock away under it; the record stops its commit
            rows.apply(rt, [(write_col(primary.column), start_ts,
                             Write(start_ts, WriteKind.ROLLBACK))])
''')),
})
INTERLEAVING |= {"a holder alive again keeps its primary lock: nothing to resolve",
                 "a holder alive again is fenced by the rollback record alone, its lock left"}
