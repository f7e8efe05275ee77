"""Exercise 7 (challenge): a broker hotspot, the kit's own TPC-E experiment (section 3.3).

Every trade updates its broker's running volume; a few brokers take a large
share of the trades, so the broker row is a write-write hotspot: concurrent
trades conflict and retry. The kit's fix (the notes on the paper carry no
broker hotspot; section 2.4 advises splitting a hotspot observer into two
joined by a notification): trades append to a *side table* and a periodic job
folds the side table into the broker rows.

The student writes ``record_trade(txn, broker, trade_id, amount)``,
``aggregate(cluster, broker) -> int`` and ``broker_volume(txn, broker) -> int``.
Layout: table ``brokers`` row ``broker`` column ``volume``; side table
``broker_updates`` rows ``f"{broker}/{trade_id}"`` column ``amount``.
"""
from __future__ import annotations

from types import SimpleNamespace

from percolator_ref import Transaction

from .battery import Battery
from .scenarios import expect, new_cluster, on_step

battery = Battery(7, "TPC-E broker hotspot: a side table aggregated periodically")
BROKERS, SIDE = "brokers", "broker_updates"


def _side_rows(txn, broker):
    return txn.scan(SIDE, start_row=f"{broker}/", end_row=f"{broker}0")


def _record_trade(txn, broker, trade_id, amount):
    txn.set(f"{broker}/{trade_id}", "amount", amount, table=SIDE)


def _aggregate(cluster, broker):
    t = cluster.begin()
    pending = _side_rows(t, broker)
    if not pending:
        return 0
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    for row, column, _ in pending:
        t.delete(row, column, table=SIDE)       # only what this snapshot counted
    return len(pending) if t.commit() else 0


def _broker_volume(txn, broker):
    return (txn.get(broker, "volume", table=BROKERS) or 0) + sum(
        v for _, _, v in _side_rows(txn, broker))


reference = SimpleNamespace(record_trade=_record_trade, aggregate=_aggregate,
                            broker_volume=_broker_volume)


def _trades(c, impl, broker, amounts, first_id=0):
    txns = [Transaction(c) for _ in amounts]            # all concurrent
    for i, (t, amount) in enumerate(zip(txns, amounts)):
        impl.record_trade(t, broker, f"t{first_id + i:03d}", amount)
    return [t.commit() for t in txns]


def _volume(c, impl, broker):
    return impl.broker_volume(Transaction(c), broker)


@battery.check("concurrent trades of one broker all commit")
def _no_hotspot(impl):
    c = new_cluster()
    expect(_trades(c, impl, "B1", [10, 20, 30, 40, 50]), [True] * 5, "commits of 5 concurrent trades")


@battery.check("broker_volume counts trades not yet aggregated")
def _volume_pending(impl):
    c = new_cluster()
    _trades(c, impl, "B1", [10, 20, 30])
    expect(_volume(c, impl, "B1"), 60, "broker_volume before aggregation")


@battery.check("aggregate folds the side table into the broker row")
def _fold(impl):
    c = new_cluster()
    _trades(c, impl, "B1", [10, 20, 30])
    impl.aggregate(c, "B1")
    t = Transaction(c)
    expect(t.get("B1", "volume", table=BROKERS), 60, "brokers/B1.volume")
    expect(_side_rows(t, "B1"), [], "B1's rows left in the side table")
    expect(_volume(c, impl, "B1"), 60, "broker_volume after aggregation")


@battery.check("aggregating again does not count a trade twice")
def _idempotent(impl):
    c = new_cluster()
    _trades(c, impl, "B1", [10, 20])
    impl.aggregate(c, "B1")
    impl.aggregate(c, "B1")
    _trades(c, impl, "B1", [5], first_id=10)
    impl.aggregate(c, "B1")
    expect(Transaction(c).get("B1", "volume", table=BROKERS), 35, "brokers/B1.volume")


@battery.check("a trade committed during an aggregation is not lost")
def _concurrent(impl):
    c = new_cluster()
    _trades(c, impl, "B1", [10, 20])
    fired = []

    def trade_meanwhile(client, table, row, step):
        if table == BROKERS and step.startswith("prewrite") and not fired:
            fired.append(_trades(c, impl, "B1", [7], first_id=50))
    watcher = on_step(c, trade_meanwhile)
    impl.aggregate(c, "B1")
    assert fired, "aggregate never prewrote the broker row"
    expect(fired[0], [True], "commit of the trade made during the aggregation")
    c.bigtable.interceptors.remove(watcher)
    expect(_volume(c, impl, "B1"), 37, "broker_volume after the aggregation")
    impl.aggregate(c, "B1")
    expect(Transaction(c).get("B1", "volume", table=BROKERS), 37, "brokers/B1.volume")


@battery.check("aggregating one broker leaves the others alone")
def _others(impl):
    c = new_cluster()
    _trades(c, impl, "B1", [10])
    _trades(c, impl, "B2", [99], first_id=1)
    impl.aggregate(c, "B1")
    t = Transaction(c)
    expect(t.get("B2", "volume", table=BROKERS), None, "brokers/B2.volume")
    expect(_volume(c, impl, "B2"), 99, "broker_volume of B2")


# -- mutants ------------------------------------------------------------------

def _hotspot_trade(txn, broker, trade_id, amount):
    txn.set(broker, "volume", (txn.get(broker, "volume", table=BROKERS) or 0) + amount,
            table=BROKERS)


def _hotspot_volume(txn, broker):
    return txn.get(broker, "volume", table=BROKERS) or 0


def _no_delete(cluster, broker):
    t = cluster.begin()
    pending = _side_rows(t, broker)
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    return len(pending) if t.commit() else 0


def _delete_later(cluster, broker):
    t = cluster.begin()
    pending = _side_rows(t, broker)
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    if not t.commit():
        return 0
    t2 = cluster.begin()                        # a newer snapshot: sees trades never counted
    for row, column, _ in _side_rows(t2, broker):
        t2.delete(row, column, table=SIDE)
    t2.commit()
    return len(pending)


def _all_brokers(cluster, broker):
    t = cluster.begin()
    pending = t.scan(SIDE)
    if not pending:
        return 0
    t.set(broker, "volume", (t.get(broker, "volume", table=BROKERS) or 0)
          + sum(v for _, _, v in pending), table=BROKERS)
    for row, column, _ in pending:
        t.delete(row, column, table=SIDE)
    return len(pending) if t.commit() else 0


def _pending_ignored(txn, broker):
    return txn.get(broker, "volume", table=BROKERS) or 0


def _variant(**kw):
    fns = dict(record_trade=_record_trade, aggregate=_aggregate, broker_volume=_broker_volume)
    fns.update(kw)
    return SimpleNamespace(**fns)


mutants = {
    "trades updating the broker row (the hotspot)":
        _variant(record_trade=_hotspot_trade, broker_volume=_hotspot_volume,
                 aggregate=lambda cluster, broker: 0),
    "aggregate that never deletes folded trades": _variant(aggregate=_no_delete),
    "aggregate deleting in a second, newer transaction": _variant(aggregate=_delete_later),
    "aggregate folding every broker's trades": _variant(aggregate=_all_brokers),
    "broker_volume ignoring the side table": _variant(broker_volume=_pending_ignored),
}
