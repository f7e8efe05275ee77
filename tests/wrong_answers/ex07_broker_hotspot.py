"""Exercise 7 (broker hotspot): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.

The functions a wrong answer gets right are written once (``CORRECT_*``); each
entry spells out only what it gets wrong, and ``cell(...)`` joins the parts
into the whole answer cell that is graded.
"""

CORRECT_RECORD_TRADE = '''
def record_trade(txn, broker, trade_id, amount):
    txn.set(f"{broker}/{trade_id}", "amount", amount, table=SIDE)
'''

CORRECT_AGGREGATE = '''
def aggregate(cluster, broker):
    t = cluster.begin()
    pending = _pending(t, broker)
    if not pending:
        return 0
    volume = t.get(broker, "volume", table=BROKERS) or 0
    t.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
    for row, column, _ in pending:
        t.delete(row, column, table=SIDE)
    return len(pending) if t.commit() else 0
'''

CORRECT_BROKER_VOLUME = '''
def broker_volume(txn, broker):
    return (txn.get(broker, "volume", table=BROKERS) or 0) + sum(v for _, _, v in _pending(txn, broker))
'''

CORRECT_PENDING = '''
def _pending(txn, broker):
    return txn.scan(SIDE, start_row=f"{broker}/", end_row=f"{broker}0")
'''

ANSWER = '''
answer = SimpleNamespace(record_trade=record_trade, aggregate=aggregate, broker_volume=broker_volume)
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
    'keeps the running volume on the broker row (the hotspot itself)': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        '''
def record_trade(txn, broker, trade_id, amount):
    volume = txn.get(broker, "volume", table=BROKERS) or 0
    txn.set(broker, "volume", volume + amount, table=BROKERS)
''',
        '''
def aggregate(cluster, broker):
    return 0                                  # nothing to fold: the volume is always current
''',
        variant(CORRECT_BROKER_VOLUME,
            ('''    return (txn.get(broker, "volume", table=BROKERS) or 0) + sum(v for _, _, v in _pending(txn, broker))
''',
             '''    return txn.get(broker, "volume", table=BROKERS) or 0
''')),
        ANSWER),
    'reads the broker row in every trade (to store a running total with it)': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        '''
def record_trade(txn, broker, trade_id, amount):
    # keep the broker's volume at the time of the trade with it, for reports
    before = txn.get(broker, "volume", table=BROKERS) or 0
    txn.set(f"{broker}/{trade_id}", "amount", amount, table=SIDE)
    txn.set(f"{broker}/{trade_id}", "volume_before", before, table=SIDE)
''',
        '''
def _pending(txn, broker):
    rows = txn.scan(SIDE, start_row=f"{broker}/", end_row=f"{broker}0")
    return [(row, column, value) for row, column, value in rows if column == "amount"]
''',
        '''
def aggregate(cluster, broker):
    t = cluster.begin()
    pending = _pending(t, broker)
    if not pending:
        return 0
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    for row, _, _ in pending:
        t.delete(row, "amount", table=SIDE)
        t.delete(row, "volume_before", table=SIDE)
    return len(pending) if t.commit() else 0
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    'folds the side rows but never deletes them': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        variant(CORRECT_AGGREGATE,
            ('''    for row, column, _ in pending:
        t.delete(row, column, table=SIDE)
''',
             '''''')),
        CORRECT_BROKER_VOLUME,
        ANSWER),
    'folds in one transaction, then deletes what a new scan finds': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    t = cluster.begin()
    pending = _pending(t, broker)
    if not pending:
        return 0
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    if not t.commit():
        return 0
    cleanup = cluster.begin()                 # now empty the side table
    for row, column, _ in _pending(cleanup, broker):
        cleanup.delete(row, column, table=SIDE)
    cleanup.commit()
    return len(pending)
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    'deletes the side rows first, then adds them up in a second transaction': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    take = cluster.begin()                    # claim the rows, so nobody folds them twice
    pending = _pending(take, broker)
    if not pending:
        return 0
    for row, column, _ in pending:
        take.delete(row, column, table=SIDE)
    if not take.commit():
        return 0
    add = cluster.begin()
    add.set(broker, "volume", (add.get(broker, "volume", table=BROKERS) or 0)
            + sum(v for _, _, v in pending), table=BROKERS)
    add.commit()
    return len(pending)
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    "picks the broker's side rows by name prefix (B4 also takes B47's)": cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        '''
def _pending(txn, broker):
    return [(row, column, value) for row, column, value in txn.scan(SIDE)
            if row.startswith(broker)]
''',
        variant(CORRECT_AGGREGATE,
            ('''    volume = t.get(broker, "volume", table=BROKERS) or 0
    t.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
''',
             '''    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
''')),
        CORRECT_BROKER_VOLUME,
        ANSWER),
    'reports only the folded volume (pending trades ignored)': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        variant(CORRECT_AGGREGATE,
            ('''    pending = _pending(t, broker)
''',
             '''    pending = t.scan(SIDE, start_row=f"{broker}/", end_row=f"{broker}0")
'''),
            ('''    volume = t.get(broker, "volume", table=BROKERS) or 0
    t.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
''',
             '''    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
''')),
        variant(CORRECT_BROKER_VOLUME,
            ('''    return (txn.get(broker, "volume", table=BROKERS) or 0) + sum(v for _, _, v in _pending(txn, broker))
''',
             '''    return txn.get(broker, "volume", table=BROKERS) or 0      # the aggregator keeps it current
''')),
        ANSWER),
    'reads in one transaction and writes the new volume in another': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    look = cluster.begin()                    # a read-only look first: cheap
    pending = _pending(look, broker)
    volume = look.get(broker, "volume", table=BROKERS) or 0
    look.commit()
    if not pending:
        return 0
    write = cluster.begin()
    write.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
    for row, column, _ in pending:
        write.delete(row, column, table=SIDE)
    return len(pending) if write.commit() else 0
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    'returns how many rows it saw even when its commit lost': cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    t = cluster.begin()
    pending = _pending(t, broker)
    if pending:
        t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
              + sum(v for _, _, v in pending), table=BROKERS)
        for row, column, _ in pending:
            t.delete(row, column, table=SIDE)
    t.commit()
    return len(pending)
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
}


# Misconceptions that show only in an interleaving or a crash: each answer folds every
# trade exactly once when aggregations, trades and crashes do not overlap.
WRONG.update({
    "retries a fold that lost its conflict, with the side rows it had already read": cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    t = cluster.begin()
    pending = _pending(t, broker)
    if not pending:
        return 0
    for attempt in range(5):                  # the broker row is busy: try again
        t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
              + sum(v for _, _, v in pending), table=BROKERS)
        for row, column, _ in pending:
            t.delete(row, column, table=SIDE)
        if t.commit():
            return len(pending)
        t.session.backoff(attempt)
        t = cluster.begin()
    return 0
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    "folds in one transaction, then deletes exactly the rows it folded in a second": cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    t = cluster.begin()
    pending = _pending(t, broker)
    if not pending:
        return 0
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    if not t.commit():                        # a small transaction on the hot row
        return 0
    done = cluster.begin()                    # only the rows counted above: a late trade stays
    for row, column, _ in pending:
        done.delete(row, column, table=SIDE)
    done.commit()
    return len(pending)
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    "reads the folded volume with a quick transaction of its own, then scans and folds": cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def _folded(cluster, broker):
    return cluster.begin().get(broker, "volume", table=BROKERS) or 0


def aggregate(cluster, broker):
    volume = _folded(cluster, broker)
    t = cluster.begin()
    pending = _pending(t, broker)
    if not pending:
        return 0
    t.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
    for row, column, _ in pending:
        t.delete(row, column, table=SIDE)
    return len(pending) if t.commit() else 0
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
    "counts the pending trades with a fresh transaction (the newest trades count too)": cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        variant(CORRECT_AGGREGATE,
            ('''    volume = t.get(broker, "volume", table=BROKERS) or 0
    t.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
''',
             '''    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
''')),
        '''
def broker_volume(txn, broker):
    folded = txn.get(broker, "volume", table=BROKERS) or 0
    return folded + sum(v for _, _, v in _pending(txn.cluster.begin(), broker))
''',
        ANSWER),
    "retries a lost fold with a fresh scan, but keeps the volume it read the first time": cell(
        '''
from types import SimpleNamespace

SIDE, BROKERS = "broker_updates", "brokers"
''',
        CORRECT_RECORD_TRADE,
        CORRECT_PENDING,
        '''
def aggregate(cluster, broker):
    volume = None
    for attempt in range(5):
        t = cluster.begin()
        if volume is None:                    # only aggregate writes the volume: read it once
            volume = t.get(broker, "volume", table=BROKERS) or 0
        pending = _pending(t, broker)
        if not pending:
            return 0
        t.set(broker, "volume", volume + sum(v for _, _, v in pending), table=BROKERS)
        for row, column, _ in pending:
            t.delete(row, column, table=SIDE)
        if t.commit():
            return len(pending)
        t.session.backoff(attempt)
    return 0
''',
        CORRECT_BROKER_VOLUME,
        ANSWER),
})

INTERLEAVING = {
    # misconceptions that only an interleaving of clients (or a crash) shows: every check that
    # runs one client at a time, or trades in a fixed order, passes them
    "retries a fold that lost its conflict, with the side rows it had already read",
    "folds in one transaction, then deletes exactly the rows it folded in a second",
    "reads the folded volume with a quick transaction of its own, then scans and folds",
    "retries a lost fold with a fresh scan, but keeps the volume it read the first time",
    "folds in one transaction, then deletes what a new scan finds",
    "deletes the side rows first, then adds them up in a second transaction",
    "reads in one transaction and writes the new volume in another",
    "returns how many rows it saw even when its commit lost",
}
