"""Exercise 4 (lock cleanup): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.
"""
import textwrap

HEADER = '''from percolator_ref import rows
from percolator_ref.model import Cell, Write, data_col, lock_col, write_col
from percolator_ref.step import Step

'''

WAIT = '''\
if session.is_alive(lock.client):
    session.backoff(attempt)
    return
'''

PRIMARY = '''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
    if commit_ts is None and rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary:
    return
'''

SECONDARY = '''\
step = Step.ROLL_BACK if commit_ts is None else Step.ROLL_FORWARD
with session.row_transaction(cell.table, cell.row, step) as rt:
    if rows.held_lock(rt, cell.column, lock.start_ts) is None:
        return
    if commit_ts is None:
        rows.apply(rt, rows.rollback_writes(cell.column, lock.start_ts))
    else:
        notify = session.is_observed(cell.table, cell.column)
        rows.apply(rt, rows.commit_writes(cell.column, Write(lock.start_ts, lock.kind),
                                          commit_ts, notify))
'''


def _answer(wait=WAIT, primary=PRIMARY, secondary=SECONDARY) -> str:
    """A whole answer cell: the function with the student's three parts."""
    body = "".join(textwrap.dedent(part) for part in (wait, primary, secondary))
    return (HEADER + "\ndef backoff_and_maybe_cleanup_lock(session, cell, lock, attempt):\n"
            + textwrap.indent(body, " " * 4))


WRONG = {
    "rolls back whenever the primary is no longer locked (even if it committed)": _answer(primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
commit_ts = None                   # the primary lock is gone either way: not committed
if lock.is_primary:
    return
'''),
    "cleans up a live holder's lock too": _answer(wait=""),
    "rolls forward at the secondary's own start_ts": _answer(secondary=SECONDARY.replace(
        "Write(lock.start_ts, lock.kind),\n                                          commit_ts,",
        "Write(lock.start_ts, lock.kind),\n                                          lock.start_ts,")),
    "rolls forward at a fresh timestamp from the oracle": _answer(secondary=SECONDARY.replace(
        "Write(lock.start_ts, lock.kind),\n                                          commit_ts,",
        "Write(lock.start_ts, lock.kind),\n                                          session.timestamp(),")),
    "never backs off (returns at once for a live holder)": _answer(wait='''\
if session.is_alive(lock.client):
    return                         # get() will simply read again
'''),
    "sleeps a fixed time instead of backing off": _answer(wait='''\
if session.is_alive(lock.client):
    session.clock.sleep(0.01)
    return
'''),
    "erases the data but leaves the lock when rolling back": _answer(primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
    if commit_ts is None and rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rt.erase(data_col(primary.column), lock.start_ts)      # undo the write
if lock.is_primary:
    return
''', secondary='''\
step = Step.ROLL_BACK if commit_ts is None else Step.ROLL_FORWARD
with session.row_transaction(cell.table, cell.row, step) as rt:
    if rows.held_lock(rt, cell.column, lock.start_ts) is None:
        return
    if commit_ts is None:
        rt.erase(data_col(cell.column), lock.start_ts)
    else:
        notify = session.is_observed(cell.table, cell.column)
        rows.apply(rt, rows.commit_writes(cell.column, Write(lock.start_ts, lock.kind),
                                          commit_ts, notify))
'''),
    "rolls back the secondary without touching the primary": _answer(primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
    if lock.is_primary and commit_ts is None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary:
    return
'''),
    "cleans the secondary first, then the primary": _answer(primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
if not lock.is_primary:
    step = Step.ROLL_BACK if commit_ts is None else Step.ROLL_FORWARD
    with session.row_transaction(cell.table, cell.row, step) as rt:
        if rows.held_lock(rt, cell.column, lock.start_ts) is not None:
            if commit_ts is None:
                rows.apply(rt, rows.rollback_writes(cell.column, lock.start_ts))
            else:
                notify = session.is_observed(cell.table, cell.column)
                rows.apply(rt, rows.commit_writes(cell.column, Write(lock.start_ts, lock.kind),
                                                  commit_ts, notify))
if commit_ts is None:              # now the primary
    with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
        if rows.held_lock(rt, primary.column, lock.start_ts) is not None:
            rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
''', secondary=""),
    "rolls a delete forward as a write": _answer(secondary=SECONDARY.replace(
        "Write(lock.start_ts, lock.kind)", "Write(lock.start_ts)")),
    "counts only a crashed client as dead": _answer(wait='''\
if session.lockservice.status(lock.client) != "crashed":
    session.backoff(attempt)           # still there: wait for it
    return
'''),
    "erases the newest lock of the cell": _answer(secondary='''\
step = Step.ROLL_BACK if commit_ts is None else Step.ROLL_FORWARD
with session.row_transaction(cell.table, cell.row, step) as rt:
    found = rt.read(lock_col(cell.column))
    if found is None:
        return
    if commit_ts is None:
        rows.apply(rt, rows.rollback_writes(cell.column, found[0]))
    else:
        notify = session.is_observed(cell.table, cell.column)
        rows.apply(rt, rows.commit_writes(cell.column, Write(found[0], lock.kind),
                                          commit_ts, notify))
'''),
    "decides at the primary in one row transaction, rolls it back in another": _answer(
        primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
if commit_ts is None:              # not committed: now roll the primary back
    with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
        if rows.held_lock(rt, primary.column, lock.start_ts) is not None:
            rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary:
    return
'''),
    "takes a primary with no lock as committed, at its newest write record": _answer(
        primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
        commit_ts = None
    else:                          # the primary lock is gone: the commit point was reached
        commit_ts = rt.read(write_col(primary.column))[0]
if lock.is_primary:
    return
'''),
    "leaves the secondary to whoever already rolled the primary back": _answer(
        primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
    held = rows.held_lock(rt, primary.column, lock.start_ts) is not None
    if commit_ts is None and held:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary or (commit_ts is None and not held):
    return                         # another cleaner rolled it back: it erases the rest
'''),
    "rolls back a dead holder's primary lock met earlier without looking again": _answer(
        primary='''\
primary = Cell(*lock.primary)
if lock.is_primary:                # a dead holder's primary lock: it never reached its commit
    with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
    return
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
    if commit_ts is None and rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
'''),
}

INTERLEAVING = {
    # misconceptions that only an interleaving of clients (or a crash) shows: every
    # single-client check passes them
    "decides at the primary in one row transaction, rolls it back in another",
    # "takes a primary with no lock as committed, at its newest write record": no longer here: the same single-client class catches it.
    # "leaves the secondary to whoever already rolled the primary back": no longer here: the secondary-reader check's second primary class (a later writer of the primary) catches it
    # with one client.
    "rolls back a dead holder's primary lock met earlier without looking again",
}


# A holder still alive after more than ten backoffs: only the live-holder check's third value
# class (an attempt past ten) shows these.
WRONG.update({
    "takes a live holder that outlasts ten backoffs for stuck and cleans it up": _answer(wait='''\
if session.is_alive(lock.client) and attempt < 10:
    session.backoff(attempt)       # give a live holder ten chances ...
    return
                                   # ... then it must be stuck: clean its lock up
'''),
    "gives up with an error after ten backoffs": _answer(wait='''\
if session.is_alive(lock.client):
    if attempt > 10:
        raise TimeoutError(f"{cell} is still locked by {lock.client} after {attempt} tries")
    session.backoff(attempt)
    return
'''),
})


# A primary rolled back by another cleaner and then written by a later transaction: only the
# secondary-reader check's second value class shows these (one writer touched the primary).
WRONG.update({
    "decides from the primary's newest write record": _answer(primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    newest = rt.read(write_col(primary.column))          # the primary's latest commit
    commit_ts = newest[0] if newest is not None and newest[0] > lock.start_ts else None
    if commit_ts is None and rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary:
    return
'''),
    "takes an unlocked primary with a commit after the lock for the transaction's commit": _answer(
        primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    if rows.held_lock(rt, primary.column, lock.start_ts) is not None:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))   # still locked: abort
        commit_ts = None
    else:
        # the primary lock was replaced by its write record: committed after the lock began
        later = rt.read(write_col(primary.column), min_ts=lock.start_ts + 1)
        commit_ts = later[0] if later is not None else None
if lock.is_primary:
    return
'''),
})


# Two row transactions where one must decide: rolling a secondary forward (a second reader
# between them, once the holder committed its primary and died), or deciding at the primary
# and rolling it back (the slow holder commits between them). Every single-client check ends
# in the same cells; the families of exercise 4 catch them (issue 30 owed exercise 4 two).
WRONG.update({
    "rolls forward by erasing the lock first, then writing the record": _answer(secondary='''\
with session.row_transaction(cell.table, cell.row, Step.ROLL_BACK) as rt:
    if rows.held_lock(rt, cell.column, lock.start_ts) is None:
        return
    rt.erase(lock_col(cell.column), lock.start_ts)   # take the lock away first: it is ours now
    if commit_ts is None:
        rt.erase(data_col(cell.column), lock.start_ts)
        return
notify = session.is_observed(cell.table, cell.column)
with session.row_transaction(cell.table, cell.row, Step.ROLL_FORWARD) as rt:
    rows.apply(rt, rows.commit_writes(cell.column, Write(lock.start_ts, lock.kind), commit_ts,
                                      notify))
'''),
    "asks again whether the holder is alive before rolling its primary back": _answer(primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    commit_ts = rows.find_commit_ts(rt, primary.column, lock.start_ts)
    locked = rows.held_lock(rt, primary.column, lock.start_ts) is not None
if commit_ts is None and locked:
    if session.is_alive(lock.client):  # it came back meanwhile: let it finish
        return
    with session.row_transaction(primary.table, primary.row, Step.ROLL_BACK) as rt:
        rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary:
    return
'''),
})
INTERLEAVING |= {
    "rolls forward by erasing the lock first, then writing the record",
    "asks again whether the holder is alive before rolling its primary back",
}


# A roll-forward that finishes the secondary's write record but not its notification (issue
# 30): only the roll-forward check whose secondary is of another column than its primary, one
# of the two observed (value classes enumerated), reads a secondary's notify.
def _notify(expression: str) -> str:
    """The answer whose roll-forward computes its ``notify`` as ``expression``."""
    return _answer(secondary=SECONDARY.replace(
        "notify = session.is_observed(cell.table, cell.column)", f"notify = {expression}"))


WRONG.update({
    "rolls a secondary forward without its notification":
        _notify("False                      # the writer set it before its commit point"),
    "the secondary's notification follows the primary's column":
        _notify("session.is_observed(primary.table, primary.column)   # as the commit did"),
    "rolling forward always sets the notification":
        _notify("True                       # a roll-forward is a new write: notify it"),
})


# W committed at its primary and died; a later transaction V then wrote the primary (its lock was
# gone): the primary's newest write record is V's. Only the roll-forward check's second primary
# class shows this (issue 30's class 2, the committed side).
WRONG.update({
    "the primary's newest write record decides: W's start_ts there means committed": _answer(
        primary='''\
primary = Cell(*lock.primary)
with session.row_transaction(primary.table, primary.row, Step.CLEANUP_PRIMARY) as rt:
    newest = rt.read(write_col(primary.column))          # the primary's latest commit
    if newest is not None and newest[1].start_ts == lock.start_ts:
        commit_ts = newest[0]                            # it is ours: committed there
    else:
        commit_ts = None
        if rows.held_lock(rt, primary.column, lock.start_ts) is not None:
            rows.apply(rt, rows.rollback_writes(primary.column, lock.start_ts))
if lock.is_primary:
    return
'''),
})
