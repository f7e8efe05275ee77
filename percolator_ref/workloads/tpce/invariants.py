"""TPC-E's consistency conditions, checked on one snapshot of the whole database.

:func:`read_snapshot` reads every table in one transaction; :func:`check_snapshot`
returns the violations found (empty: the database is consistent):

- every trade is in a final state; a limit order waits as a request iff submitted;
- a completed trade has a settlement matching its execution; nothing else is settled;
- each trade completed exactly once (as many completions as committed Trade-Results);
- each account's cash is its initial cash plus its settlements;
- each holding summary equals the sum of its lots and the initial holdings plus
  buys minus sells;
- each broker's totals (plus side rows not yet aggregated) equal its completed
  trades and commissions, and no side row is left once aggregated.
"""
from __future__ import annotations

import json
from collections import defaultdict

from .schema import (ACCOUNT, ACCOUNT_TRADE, BROKER, BROKER_COMM, HOLDING, REQUEST,
                     SETTLEMENT, SUMMARY, TRADE)

SNAPSHOT_TABLES = (ACCOUNT, BROKER, TRADE, ACCOUNT_TRADE, REQUEST, HOLDING, SUMMARY,
                   SETTLEMENT, BROKER_COMM)


def read_snapshot(store) -> dict:
    """``{table: {row: {column: value}}}`` of every checked table, in one transaction."""
    t = store.begin()
    snap = {name: defaultdict(dict) for name in SNAPSHOT_TABLES}
    for table, rows in snap.items():
        for row, col, value in t.scan(table):
            rows[row][col] = value
    t.commit()
    return snap


class Expected:
    """What the completed trades imply: cash per account, quantity per holding, per broker."""

    def __init__(self, config, initial_holdings: dict):
        self.cash = {a: config.initial_cash for a in config.accounts()}
        self.qty = defaultdict(int, initial_holdings)
        self.per_broker = defaultdict(lambda: [0, 0])
        self.completed = 0

    def add_completed(self, order: dict, ex: dict, delta: int) -> None:
        self.completed += 1
        self.cash[order["acct"]] += delta
        self.qty[(order["acct"], order["symbol"])] += ex["qty"] if order["buy"] else -ex["qty"]
        self.per_broker[order["broker"]][0] += 1
        self.per_broker[order["broker"]][1] += ex["commission"]


def check_snapshot(config, initial_holdings: dict, trade_results: int, snap: dict) -> list:
    """Every violation of the conditions above in ``snap``; ``trade_results`` committed."""
    expected = Expected(config, initial_holdings)
    v = []
    for trade_id, cols in sorted(snap[TRADE].items()):
        v += check_trade(trade_id, cols, snap, expected)
    if expected.completed != trade_results:
        v.append(f"{expected.completed} trades completed but {trade_results} Trade-Results "
                 f"committed a completion (each trade must complete exactly once)")
    orphans = set(snap[SETTLEMENT]) - {k for k, c in snap[TRADE].items()
                                       if c.get("status") == "completed"}
    v += [f"settlement {k} without a completed trade" for k in sorted(orphans)]
    v += check_cash(config, snap, expected)
    v += check_holdings(snap, expected)
    v += check_brokers(config, snap, expected)
    return v


def check_trade(trade_id: str, cols: dict, snap: dict, expected: Expected) -> list:
    """One trade's state, request and settlement; a completed one is added to ``expected``."""
    v = []
    missing = [c for c in ("order", "status") if c not in cols]
    if missing or (cols.get("status") == "completed" and "exec" not in cols):
        return [f"trade {trade_id}: columns {missing or ['exec']} missing (a lost write?)"]
    order, status = json.loads(cols["order"]), cols.get("status")
    settled = snap[SETTLEMENT].get(trade_id, {}).get("cash")
    if status == "pending":
        v.append(f"trade {trade_id} still pending after the run")
    if (status == "submitted") != (f"{order['symbol']}/{trade_id}" in snap[REQUEST]):
        v.append(f"trade {trade_id}: status {status} but limit request present="
                 f"{not status == 'submitted'}")
    if status != "completed":
        if settled is not None or "exec" in cols:
            v.append(f"trade {trade_id}: not completed but settled or executed")
        return v
    ex = json.loads(cols["exec"])
    amount = ex["qty"] * ex["price"]
    delta = -(amount + ex["commission"]) if order["buy"] else amount - ex["commission"]
    if settled is None or json.loads(settled) != {"acct": order["acct"], "amount": delta}:
        v.append(f"trade {trade_id}: settlement {settled} does not match its execution")
    expected.add_completed(order, ex, delta)
    return v


def check_cash(config, snap: dict, expected: Expected) -> list:
    """Each account's cash is its initial cash plus its settlements."""
    v = []
    for acct in config.accounts():
        cash = snap[ACCOUNT][acct]["cash"]
        if cash != expected.cash[acct]:
            v.append(f"account {acct}: cash {cash} != initial + settlements {expected.cash[acct]}")
    return v


def check_holdings(snap: dict, expected: Expected) -> list:
    """Summary = sum of lots = initial + buys - sells, for every (account, security)."""
    v = []
    lots = defaultdict(int)
    for row, cols in snap[HOLDING].items():
        acct, symbol, _ = row.split("/")
        lots[(acct, symbol)] += cols["qty"]
    summaries = {tuple(row.split("/")): cols["qty"] for row, cols in snap[SUMMARY].items()}
    for key in sorted(set(lots) | set(summaries) | set(expected.qty)):
        have, lot_sum, want = summaries.get(key, 0), lots.get(key, 0), expected.qty.get(key, 0)
        if have != lot_sum:
            v.append(f"holding summary {key}: {have} != sum of holdings {lot_sum}")
        if have != want:
            v.append(f"holding {key}: {have} != initial + buys - sells {want}")
    return v


def check_brokers(config, snap: dict, expected: Expected) -> list:
    """Broker totals plus pending side rows = completed trades; no side row left over."""
    v = []
    pending = defaultdict(lambda: [0, 0])
    for row, cols in snap[BROKER_COMM].items():
        pending[row.split("/")[0]][0] += 1
        pending[row.split("/")[0]][1] += cols["commission"]
    for b in range(config.n_brokers):
        broker = f"B{b:02d}"
        cols = snap[BROKER][broker]
        got = [cols["num_trades"] + pending[broker][0], cols["comm_total"] + pending[broker][1]]
        if got != expected.per_broker[broker]:
            v.append(f"broker {broker}: trades/commission {got} != completed trades "
                     f"{expected.per_broker[broker]}")
        if pending[broker][0]:
            v.append(f"broker {broker}: {pending[broker][0]} commission rows not aggregated")
    return v
