"""Exercise 6 (observers): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.

The functions a wrong answer gets right are written once (``CORRECT_*``); each
entry spells out only what it gets wrong, and ``cell(...)`` joins the parts
into the whole answer cell that is graded.
"""

CORRECT_PENDING_NOTIFICATION = '''
def pending_notification(txn, observer, row):
    ack = observer.ack_cell(row)
    attempt = 0
    while True:
        with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
            notified = rt.read(notify_col(observer.column), txn.start_ts)
            acked = txn.snapshot_read(rt, ack)
        if acked.lock is not None:
            cleanup.backoff_and_maybe_cleanup_lock(txn.session, ack, acked.lock, attempt)
            attempt += 1
            continue
        if notified is None or notified[0] < observer.registered_ts:
            return None
        if acked.value is not None and notified[0] < acked.value:
            return None
        return notified[0]
'''

CORRECT_RUN_OBSERVER = '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    attempt = 0
    while True:
        txn = cluster.begin(client=client)
        if pending_notification(txn, observer, row) is None:
            txn.commit()
            return False
        txn.acknowledge(observer.ack_cell(row))
        try:
            observer.fn(txn, row, observer.column)
        except Exception:
            txn.abandon()
            raise
        if txn.commit(crash_after=crash_after):
            return True
        txn.session.backoff(attempt)
        attempt += 1
'''

ANSWER = '''
answer = SimpleNamespace(pending_notification=pending_notification, run_observer=run_observer)
'''



def variant(correct: str, *edits) -> str:
    """``correct`` with each ``(old, new)`` edit made once: the wrong part, spelled out."""
    for old, new in edits:
        if correct.count(old) != 1:
            raise ValueError(f"edit must match once: {old!r}")
        correct = correct.replace(old, new, 1)
    return correct


def cell(*parts: str) -> str:
    """One answer cell from its parts, in order."""
    return "\n\n".join(part.strip("\n") for part in parts) + "\n"


WRONG = {
    "puts the acknowledgement in the write buffer after the observer's writes": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import WriteKind, notify_col
from percolator_ref.step import Step
from percolator_ref.transaction import Mutation
''',
        CORRECT_PENDING_NOTIFICATION,
        variant(CORRECT_RUN_OBSERVER,
            ('''        txn.acknowledge(observer.ack_cell(row))
        try:
            observer.fn(txn, row, observer.column)
        except Exception:
            txn.abandon()
            raise
''',
             '''        observer.fn(txn, row, observer.column)
        ack = observer.ack_cell(row)           # record that the work is done
        txn.writes[ack] = Mutation(ack, WriteKind.PUT, txn.start_ts)
''')),
        ANSWER),
    'forgets registered_ts (an old write triggers a new observer)': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        '''
def pending_notification(txn, observer, row):
    ack = observer.ack_cell(row)
    attempt = 0
    while True:
        with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
            notified = rt.read(notify_col(observer.column), txn.start_ts)
            acked = txn.snapshot_read(rt, ack)
        if acked.lock is None:
            break
        cleanup.backoff_and_maybe_cleanup_lock(txn.session, ack, acked.lock, attempt)
        attempt += 1
    if notified is None:
        return None
    if acked.value is not None and notified[0] < acked.value:
        return None
    return notified[0]
''',
        CORRECT_RUN_OBSERVER,
        ANSWER),
    'treats a write committed at registered_ts as older than the observer (<=)': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        '''
def pending_notification(txn, observer, row):
    ack = observer.ack_cell(row)
    for attempt in range(1000):
        with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
            notified = rt.read(notify_col(observer.column), txn.start_ts)
            acked = txn.snapshot_read(rt, ack)
        if acked.lock is None:
            break
        cleanup.backoff_and_maybe_cleanup_lock(txn.session, ack, acked.lock, attempt)
    if notified is None:
        return None
    ts = notified[0]
    if ts <= observer.registered_ts:          # from before the observer was registered
        return None
    if acked.value is not None and ts <= acked.value:
        return None
    return ts
''',
        CORRECT_RUN_OBSERVER,
        ANSWER),
    'compares the notification with when the ack was committed, not its value': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        variant(CORRECT_PENDING_NOTIFICATION,
            ('''        if acked.value is not None and notified[0] < acked.value:
''',
             '''        # acked.version is when the last run committed: anything before it is done
        if acked.version is not None and notified[0] < acked.version:
''')),
        CORRECT_RUN_OBSERVER,
        ANSWER),
    "gives up when the run's commit conflicts (no retry)": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    txn = cluster.begin(client=client)
    if pending_notification(txn, observer, row) is None:
        txn.commit()
        return False
    txn.acknowledge(observer.ack_cell(row))
    try:
        observer.fn(txn, row, observer.column)
    except Exception:
        txn.abandon()
        raise
    return txn.commit(crash_after=crash_after)      # the notification stays if we lose
''',
        ANSWER),
    'never looks at the acknowledgement (runs for every notification it finds)': cell(
        '''
from types import SimpleNamespace

from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        '''
def pending_notification(txn, observer, row):
    with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
        notified = rt.read(notify_col(observer.column), txn.start_ts)
    if notified is None or notified[0] < observer.registered_ts:
        return None
    return notified[0]
''',
        CORRECT_RUN_OBSERVER,
        ANSWER),
    'reads the newest notification, even one above start_ts': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        variant(CORRECT_PENDING_NOTIFICATION,
            ('''            notified = rt.read(notify_col(observer.column), txn.start_ts)
''',
             '''            notified = rt.read(notify_col(observer.column))        # the latest notification
''')),
        CORRECT_RUN_OBSERVER,
        ANSWER),
    'erases the notification before the run commits': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    attempt = 0
    while True:
        txn = cluster.begin(client=client)
        ts = pending_notification(txn, observer, row)
        if ts is None:
            txn.commit()
            return False
        # taken: remove the notification so no other worker picks it up
        cluster.bigtable.erase(observer.table, row, notify_col(observer.column), ts)
        txn.acknowledge(observer.ack_cell(row))
        observer.fn(txn, row, observer.column)
        if txn.commit(crash_after=crash_after):
            return True
        txn.session.backoff(attempt)
        attempt += 1
''',
        ANSWER),
    'commits the acknowledgement in its own transaction, then runs the observer': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    attempt = 0
    while True:
        claim = cluster.begin(client=client)
        if pending_notification(claim, observer, row) is None:
            claim.commit()
            return False
        claim.acknowledge(observer.ack_cell(row))     # claim the notification first
        if not claim.commit():
            claim.session.backoff(attempt)
            attempt += 1
            continue
        work = cluster.begin(client=client)
        observer.fn(work, row, observer.column)
        return work.commit(crash_after=crash_after)
''',
        ANSWER),
    "reads the acknowledgement's data column directly (an uncommitted ack counts)": cell(
        '''
from types import SimpleNamespace

from percolator_ref.model import data_col, notify_col
from percolator_ref.step import Step
''',
        '''
def pending_notification(txn, observer, row):
    ack = observer.ack_cell(row)
    with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
        notified = rt.read(notify_col(observer.column), txn.start_ts)
        acked = rt.read(data_col(ack.column), txn.start_ts)      # (ts, start of the last run)
    if notified is None or notified[0] < observer.registered_ts:
        return None
    if acked is not None and notified[0] < acked[1]:
        return None
    return notified[0]
''',
        CORRECT_RUN_OBSERVER,
        ANSWER),
    "catches the observer's exception and commits the run anyway": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        variant(CORRECT_RUN_OBSERVER,
            ('''        except Exception:
            txn.abandon()
            raise
''',
             '''        except Exception as exc:                 # keep the worker alive
            print("observer failed:", exc)
''')),
        ANSWER),
    'retries the observer without checking the notification again': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    txn = cluster.begin(client=client)
    if pending_notification(txn, observer, row) is None:
        txn.commit()
        return False
    attempt = 0
    while True:                                  # it is pending: run until it commits
        txn.acknowledge(observer.ack_cell(row))
        observer.fn(txn, row, observer.column)
        if txn.commit(crash_after=crash_after):
            return True
        txn.session.backoff(attempt)
        attempt += 1
        txn = cluster.begin(client=client)
''',
        ANSWER),
    'runs the observer once per write it was notified of (no collapsing)': cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        variant(CORRECT_RUN_OBSERVER,
            ('''        try:
''',
             '''        notes = cluster.bigtable.versions(observer.table, row, notify_col(observer.column))
        for ts, _ in notes:                      # every write gets its run
'''),
            ('''        except Exception:
            txn.abandon()
            raise
''',
             '''''')),
        ANSWER),
}
WRONG.update({
    "takes the notification off the table while it runs, and puts it back if the run fails": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    notify = notify_col(observer.column)
    attempt = 0
    while True:
        txn = cluster.begin(client=client)
        ts = pending_notification(txn, observer, row)
        if ts is None:
            txn.commit()
            return False
        cluster.bigtable.erase(observer.table, row, notify, ts)     # mine: others skip it
        txn.acknowledge(observer.ack_cell(row))
        try:
            observer.fn(txn, row, observer.column)
            done = txn.commit(crash_after=crash_after)
        except BaseException:
            cluster.bigtable.write(observer.table, row, notify, True, ts)   # put it back
            raise
        if done:
            return True
        cluster.bigtable.write(observer.table, row, notify, True, ts)       # put it back
        txn.session.backoff(attempt)
        attempt += 1
''',
        ANSWER),
})


# Misconceptions that show only in an interleaving or a crash: each answer runs every
# notification exactly once when the runs, the writes and the crashes do not overlap.
WRONG.update({
    "checks for the notification in a read-only transaction, then runs the observer in a new one": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        variant(CORRECT_RUN_OBSERVER,
            ('''        txn = cluster.begin(client=client)
        if pending_notification(txn, observer, row) is None:
            txn.commit()
''',
             '''        look = cluster.begin(client=client)          # a cheap read-only look first
        if pending_notification(look, observer, row) is None:
            look.commit()
'''),
            ('''            return False
''',
             '''            return False
        look.commit()
        txn = cluster.begin(client=client)           # it is pending: do the work
''')),
        ANSWER),
    "after its run commits, erases the notifications up to its commit timestamp": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        variant(CORRECT_RUN_OBSERVER,
            ('''        if txn.commit(crash_after=crash_after):
''',
             '''        if txn.commit(crash_after=crash_after):
            notify = notify_col(observer.column)     # tidy up: those are handled now
            for ts, _ in cluster.bigtable.versions(observer.table, row, notify):
                if ts <= txn.commit_ts:
                    cluster.bigtable.erase(observer.table, row, notify, ts)
''')),
        ANSWER),
    "retries a lost commit by committing the same transaction again": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        CORRECT_PENDING_NOTIFICATION,
        '''
def run_observer(cluster, observer, row, client=None, crash_after=None):
    txn = cluster.begin(client=client)
    if pending_notification(txn, observer, row) is None:
        txn.commit()
        return False
    txn.acknowledge(observer.ack_cell(row))
    try:
        observer.fn(txn, row, observer.column)
    except Exception:
        txn.abandon()
        raise
    for attempt in range(10):                   # the row is busy: back off, try the commit again
        if txn.commit(crash_after=crash_after):
            return True
        txn.session.backoff(attempt)
    return False
''',
        ANSWER),
    "ignores a lock on the acknowledgement (a run that has not committed does not count)": cell(
        '''
from types import SimpleNamespace

from percolator_ref.model import notify_col
from percolator_ref.step import Step
''',
        '''
def pending_notification(txn, observer, row):
    with txn.session.row_transaction(observer.table, row, Step.OBSERVER_CHECK) as rt:
        notified = rt.read(notify_col(observer.column), txn.start_ts)
        acked = txn.snapshot_read(rt, observer.ack_cell(row))
    # a lock on the ack is a run still in progress: only a committed ack counts
    if notified is None or notified[0] < observer.registered_ts:
        return None
    if acked.value is not None and notified[0] < acked.value:
        return None
    return notified[0]
''',
        CORRECT_RUN_OBSERVER,
        ANSWER),
    "acknowledges with a timestamp taken just before it commits (all work up to now is done)": cell(
        '''
from types import SimpleNamespace

from percolator_ref import cleanup
from percolator_ref.model import WriteKind, notify_col
from percolator_ref.step import Step
from percolator_ref.transaction import Mutation
''',
        CORRECT_PENDING_NOTIFICATION,
        variant(CORRECT_RUN_OBSERVER,
            ('''            raise
''',
             '''            raise
        ack = observer.ack_cell(row)                 # done up to now, not just up to start_ts
        txn.writes[ack] = Mutation(ack, WriteKind.PUT, cluster.oracle.get_timestamp())
''')),
        ANSWER),
})

INTERLEAVING = {
    # misconceptions that only an interleaving of clients (or a crash) shows: every check that
    # runs one client at a time passes them
    "checks for the notification in a read-only transaction, then runs the observer in a new one",
    "ignores a lock on the acknowledgement (a run that has not committed does not count)",
    "acknowledges with a timestamp taken just before it commits (all work up to now is done)",
    "retries a lost commit by committing the same transaction again",
    "compares the notification with when the ack was committed, not its value",
    "gives up when the run's commit conflicts (no retry)",
    "reads the acknowledgement's data column directly (an uncommitted ack counts)",
    "retries the observer without checking the notification again",
}
