"""The TPC-E-style transactions. Each takes an open transaction ``t`` (any store's).

Every function reads first and writes after (a SQL store must not see its own
writes first) and returns a dict: ``queued`` trade ids for Trade-Result,
``completed`` for a Trade-Result that executed, ``violations`` for what a
read-only transaction found inconsistent in its snapshot.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Optional

from .schema import (ACCOUNT, ACCOUNT_TRADE, BROKER, BROKER_COMM, COMMISSION_PERCENT, HOLDING,
                     REQUEST, SECURITY, SETTLEMENT, SUMMARY, TRADE, UNFOLDED, prefix_range)


def trade_order(t, acct: str, symbol: str, qty: int, is_buy: bool,
                limit: Optional[int], trade_id: str) -> dict:
    """Order a trade; a sell of more than is held becomes a sell of what is held (or a buy)."""
    broker = t.get(acct, "broker", table=ACCOUNT)
    t.get(acct, "cash", table=ACCOUNT)                   # TPC-E: the customer's assets
    price = t.get(symbol, "price", table=SECURITY)
    if not is_buy:
        held = t.get(f"{acct}/{symbol}", "qty", table=SUMMARY) or 0
        if held == 0:
            is_buy = True
        qty = qty if is_buy else min(qty, held)
    if limit is not None:
        limit = price - limit if is_buy else price + limit    # a little below / above the market
    order = {"acct": acct, "symbol": symbol, "qty": qty, "buy": is_buy,
             "limit": limit, "broker": broker}
    t.set(trade_id, "order", json.dumps(order, sort_keys=True), table=TRADE)
    t.set(trade_id, "status", "submitted" if limit is not None else "pending", table=TRADE)
    t.set(f"{acct}/{trade_id}", "t", trade_id, table=ACCOUNT_TRADE)
    if limit is not None:
        t.set(f"{symbol}/{trade_id}", "req", json.dumps(order, sort_keys=True), table=REQUEST)
        return {"queued": []}
    return {"queued": [trade_id]}


def trade_result(t, trade_id: str, broker_fix: bool, notify: bool = False) -> dict:
    """Execute a pending trade at the last price: holdings, cash, settlement, broker.

    ``broker_fix``: write the commission to a side row instead of the broker row;
    ``notify`` (with it): also set a weak notification on the side row's group
    (:func:`side_group`), which wakes the :func:`fold_side_rows` observer.
    """
    if t.get(trade_id, "status", table=TRADE) != "pending":
        return {"completed": False}                       # already done (never twice)
    order = json.loads(t.get(trade_id, "order", table=TRADE))
    execution = _read_execution(t, order, broker_fix)
    _write_holdings(t, trade_id, order, execution)
    _write_settlement(t, trade_id, order, execution)
    _write_broker(t, trade_id, order, execution, broker_fix)
    if broker_fix and notify:                             # no write, so no conflict
        t.notify(side_group(order["broker"], trade_id), UNFOLDED, table=BROKER_COMM)
    return {"completed": True}


def side_group(broker: str, trade_id: str) -> str:
    """The group row of a trade's side row: ``B00/T0000004`` (the id without its last
    character: ten consecutive trade ids). An observer run folds one group."""
    return f"{broker}/{trade_id[:-1]}"


def side_row(broker: str, trade_id: str) -> str:
    """The broker fix's side row of a trade: ``B00/T0000004/T00000042``."""
    return f"{side_group(broker, trade_id)}/{trade_id}"


def _read_execution(t, order: dict, broker_fix: bool) -> dict:
    """Trade-Result's reads: price, cash, holdings (FIFO lots for a sell), broker totals."""
    acct, symbol = order["acct"], order["symbol"]
    price = t.get(symbol, "price", table=SECURITY)
    cash = t.get(acct, "cash", table=ACCOUNT)
    held = t.get(f"{acct}/{symbol}", "qty", table=SUMMARY) or 0
    if order["buy"]:
        qty, lots = order["qty"], {}
    else:
        qty = min(order["qty"], held)
        lots = take_lots(t, acct, symbol, qty)
    amount = qty * price
    commission = amount * COMMISSION_PERCENT // 100
    delta = -(amount + commission) if order["buy"] else amount - commission
    broker_totals = None if broker_fix else (
        t.get(order["broker"], "num_trades", table=BROKER),
        t.get(order["broker"], "comm_total", table=BROKER))
    return {"price": price, "cash": cash, "held": held, "qty": qty, "lots": lots,
            "commission": commission, "delta": delta, "broker_totals": broker_totals}


def _write_holdings(t, trade_id: str, order: dict, ex: dict) -> None:
    """A buy adds a lot; a sell shrinks or deletes the lots it takes; the summary follows."""
    acct, symbol = order["acct"], order["symbol"]
    if order["buy"]:
        t.set(f"{acct}/{symbol}/{trade_id}", "qty", ex["qty"], table=HOLDING)
    for row, left in ex["lots"].items():
        if left:
            t.set(row, "qty", left, table=HOLDING)
        else:
            t.delete(row, "qty", table=HOLDING)
    held, qty = ex["held"], ex["qty"]
    t.set(f"{acct}/{symbol}", "qty", held + qty if order["buy"] else held - qty, table=SUMMARY)


def _write_settlement(t, trade_id: str, order: dict, ex: dict) -> None:
    """The account's cash, the settlement, the trade's status and execution."""
    acct = order["acct"]
    t.set(acct, "cash", ex["cash"] + ex["delta"], table=ACCOUNT)
    t.set(trade_id, "cash", json.dumps({"acct": acct, "amount": ex["delta"]}, sort_keys=True),
          table=SETTLEMENT)
    t.set(trade_id, "status", "completed", table=TRADE)
    t.set(trade_id, "exec", json.dumps({"price": ex["price"], "qty": ex["qty"],
                                        "commission": ex["commission"]}, sort_keys=True),
          table=TRADE)


def _write_broker(t, trade_id: str, order: dict, ex: dict, broker_fix: bool) -> None:
    """The broker's trade count and commission: the hotspot row, or a side row (the fix)."""
    broker, commission = order["broker"], ex["commission"]
    if broker_fix:                                        # a side row, aggregated later
        t.set(side_row(broker, trade_id), "commission", commission, table=BROKER_COMM)
    else:                                                 # the hotspot
        count, total = ex["broker_totals"]
        t.set(broker, "num_trades", count + 1, table=BROKER)
        t.set(broker, "comm_total", total + commission, table=BROKER)


def take_lots(t, acct: str, symbol: str, qty: int) -> dict:
    """FIFO: ``{lot row: qty left}`` for the lots a sell of ``qty`` consumes."""
    taken = {}
    for row, _col, lot in t.scan(HOLDING, *prefix_range(f"{acct}/{symbol}")):
        if qty == 0:
            break
        use = min(qty, lot)
        taken[row] = lot - use
        qty -= use
    return taken


def market_feed(t, prices: dict) -> dict:
    """Set new last prices; queue the limit orders they trigger."""
    queued = []
    for symbol, price in sorted(prices.items()):
        t.set(symbol, "price", price, table=SECURITY)
        for row, _col, req in t.scan(REQUEST, *prefix_range(symbol)):
            order = json.loads(req)
            if (price <= order["limit"]) if order["buy"] else (price >= order["limit"]):
                trade_id = row.split("/", 1)[1]
                t.delete(row, "req", table=REQUEST)
                t.set(trade_id, "status", "pending", table=TRADE)
                queued.append(trade_id)
    return {"queued": queued}


def customer_position(t, acct: str) -> dict:
    """Read-only: cash, holdings and their value; check summary = sum of lots in the snapshot."""
    cash = t.get(acct, "cash", table=ACCOUNT)
    lots = defaultdict(int)
    for row, _col, qty in t.scan(HOLDING, *prefix_range(acct)):
        lots[row.split("/")[1]] += qty
    violations, value = [], 0
    for row, _col, qty in t.scan(SUMMARY, *prefix_range(acct)):
        symbol = row.split("/")[1]
        value += qty * t.get(symbol, "price", table=SECURITY)
        if qty != lots.pop(symbol, 0):
            violations.append(f"customer-position {acct}: summary {row}={qty} but lots sum "
                              f"to another quantity in the same snapshot")
    violations += [f"customer-position {acct}: lots of {s} without a summary"
                   for s, q in lots.items() if q]
    return {"violations": violations, "cash": cash, "value": value}


def trade_status(t, acct: str, last: int = 10) -> dict:
    """Read-only: the account's last trades; completed <=> settled and executed, in the snapshot."""
    index = t.scan(ACCOUNT_TRADE, *prefix_range(acct))
    violations = []
    for _row, _col, trade_id in index[-last:]:
        status = t.get(trade_id, "status", table=TRADE)
        done = (t.get(trade_id, "exec", table=TRADE) is not None,
                t.get(trade_id, "cash", table=SETTLEMENT) is not None)
        if (status == "completed") != done[0] or done[0] != done[1]:
            violations.append(f"trade-status {acct}: {trade_id} is {status} with exec/settlement "
                              f"{done} in the same snapshot")
    return {"violations": violations}


def fold_rows(t, broker: str, rows: list) -> int:
    """Add side ``rows`` (``[(row, commission)]``) to ``broker``'s totals, delete them."""
    if rows:
        count = t.get(broker, "num_trades", table=BROKER)
        total = t.get(broker, "comm_total", table=BROKER)
        t.set(broker, "num_trades", count + len(rows), table=BROKER)
        t.set(broker, "comm_total", total + sum(c for _r, c in rows), table=BROKER)
        for row, _c in rows:
            t.delete(row, "commission", table=BROKER_COMM)
    return len(rows)


def aggregate_commissions(t) -> dict:
    """The broker fix: fold every per-trade commission side row into its broker's totals."""
    per_broker = defaultdict(list)
    for row, _col, commission in t.scan(BROKER_COMM):
        per_broker[row.split("/")[0]].append((row, commission))
    return {"folded": sum(fold_rows(t, broker, rows)
                          for broker, rows in sorted(per_broker.items()))}


def fold_side_rows(txn, row: str, column: str) -> None:
    """The broker fix as an observer of the group rows' ``unfolded`` column (weak
    notifications): fold every side row of group ``row`` into its broker in one run,
    however many Trade-Results notified it (the notifications collapse)."""
    side_rows = [(r, c) for r, _col, c in txn.scan(BROKER_COMM, *prefix_range(row))]
    fold_rows(txn, row.split("/")[0], side_rows)


def fold_commission(txn, row: str, column: str) -> None:
    """The broker fix as an observer of ``broker_comm.commission``: fold one side row.

    One run per trade, and a second one, with nothing to do, for the delete
    (a write to the observed column notifies again): aggregation
    ``"observer-per-trade"``, kept to compare with :func:`fold_broker`.
    """
    commission = txn.get(row, column, table=BROKER_COMM)
    if commission is None:                 # the side row's own delete notified us
        return
    broker = row.split("/")[0]
    txn.set(broker, "num_trades", txn.get(broker, "num_trades", table=BROKER) + 1, table=BROKER)
    txn.set(broker, "comm_total", txn.get(broker, "comm_total", table=BROKER) + commission,
            table=BROKER)
    txn.delete(row, column, table=BROKER_COMM)


TRANSACTIONS = {"trade_order": trade_order, "trade_result": trade_result,
                "market_feed": market_feed, "customer_position": customer_position,
                "trade_status": trade_status, "aggregate": aggregate_commissions}
