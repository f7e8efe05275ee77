"""A TPC-E-style trading workload (paper section 3.3), small and checkable.

The paper ran TPC-E on Percolator: throughput grew about linearly with
resources from 11 to 15,000 cores, at about 30 times the CPU of its baseline
system (§3.3). This is a faithful small subset of TPC-E's brokerage:

==================  ===================================  ==========================
table               row                                  columns
==================  ===================================  ==========================
``account``         ``A0007``                            ``cash`` (cents), ``broker``
``broker``          ``B00``                              ``num_trades``, ``comm_total``
``security``        ``S03``                              ``price`` (last trade, cents)
``trade``           ``T00000042``                        ``order`` (JSON), ``status``, ``exec`` (JSON)
``account_trade``   ``A0007/T00000042``                  ``t`` (index for Trade-Status)
``trade_request``   ``S03/T00000042``                    ``req`` (a pending limit order)
``holding``         ``A0007/S03/T00000042``              ``qty`` (one lot per buy)
``holding_summary`` ``A0007/S03``                        ``qty``
``settlement``      ``T00000042``                        ``cash`` (JSON: account, amount)
``broker_comm``     ``B00/T00000042``                    ``commission`` (the broker fix's side rows)
==================  ===================================  ==========================

Transactions, in TPC-E's mix (:data:`MIX`, about 10.1 : 10 : 1 : 13 : 19):

- **Trade-Order**: a customer orders a market or limit buy/sell; market orders
  go to the market (the pending queue), limit orders wait as trade requests.
- **Trade-Result**: the market executed a trade: holdings (lots, FIFO for
  sells) and holding summary, the account's cash, a settlement, the trade's
  status and execution, and the broker's trade count and commission total.
- **Market-Feed**: new last prices for a few securities; the limit orders they
  trigger go to the market.
- **Customer-Position** and **Trade-Status** (read-only): each checks that what
  it saw is a consistent snapshot (a summary equals the sum of its lots; a
  completed trade has its settlement and execution, a pending one neither).

Every transaction runs on a store with ``begin()`` whose transactions have
the Percolator interface (``get/set/delete/scan/commit``), so the same code
runs on Percolator and, for the CPU comparison, on SQLite in memory
(:class:`SqliteStore`). Each retries on conflict with backoff.

**The broker hotspot** (the kit's own experiment: the notes on the paper do
not mention brokers): every Trade-Result of a broker's customers writes that
broker's row, so concurrent Trade-Results conflict. The fix follows the
spirit of §2.4's advice, that an observer conflicting on a hotspot can be
split into two joined by a notification. With ``broker_fix=True`` a
Trade-Result instead writes one side row per trade (``broker_comm``); an
aggregation folds them into the broker row
(an observer where the cluster runs observers, else a periodic aggregator
transaction), and the broker conditions hold once aggregated.

Drivers: :meth:`Tpce.run_rounds` is deterministic (``clients`` transactions
run concurrently in each round: all read, then all commit in a seeded order),
for tests and notebooks; :meth:`Tpce.run_threads` runs real emulator threads
for a number of seconds (with ``latency`` modeling a round trip per row
transaction) and measures tpsE. :meth:`Tpce.check_invariants` checks TPC-E's
consistency conditions after a run.
"""
from __future__ import annotations

import json
import math
import random
import sqlite3
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..interceptors import Latency

ACCOUNT, BROKER, SECURITY, TRADE = "account", "broker", "security", "trade"
ACCOUNT_TRADE, REQUEST, HOLDING = "account_trade", "trade_request", "holding"
SUMMARY, SETTLEMENT, BROKER_COMM = "holding_summary", "settlement", "broker_comm"

MIX = {"trade_order": 10.1, "trade_result": 10.0, "market_feed": 1.0,
       "customer_position": 13.0, "trade_status": 19.0}
READ_ONLY = ("customer_position", "trade_status")
COMMISSION_PERCENT = 1
FEED_SYMBOLS = 3           # securities whose price one Market-Feed moves
MAX_ATTEMPTS = 30


def _prefix_range(prefix: str) -> tuple:
    """Rows starting with ``prefix + '/'``: ``[prefix/, prefix0)`` ('0' follows '/')."""
    return f"{prefix}/", f"{prefix}0"


def _positive_int(value, argument: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{argument} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class TpceConfig:
    """Sizes of the database. TPC-E has one broker per 100 customers (at least one here)."""
    customers: int = 200
    securities: int = 20
    brokers: Optional[int] = None
    initial_cash: int = 10_000_000          # cents per account
    initial_lots: int = 2                   # securities held per account at load
    lot_qty: int = 100
    broker_fix: bool = False
    aggregation: str = "observer"           # broker fix: "observer" or "periodic" transaction
    seed: int = 0

    def __post_init__(self):
        _positive_int(self.customers, "customers")
        _positive_int(self.securities, "securities")
        if self.brokers is not None:
            _positive_int(self.brokers, "brokers")
        _positive_int(self.initial_cash, "initial_cash", 0)
        _positive_int(self.initial_lots, "initial_lots", 0)
        if self.initial_lots > self.securities:
            raise ValueError(f"initial_lots must be <= securities, got {self.initial_lots}")
        _positive_int(self.lot_qty, "lot_qty")
        if not isinstance(self.broker_fix, bool):
            raise TypeError(f"broker_fix must be a bool, got {self.broker_fix!r}")
        _positive_int(self.seed, "seed", 0)
        if self.aggregation not in ("observer", "periodic"):
            raise ValueError(f"aggregation must be 'observer' or 'periodic', "
                             f"got {self.aggregation!r}")

    @property
    def n_brokers(self) -> int:
        return self.brokers or max(1, self.customers // 100)

    def accounts(self) -> list:
        return [f"A{i:04d}" for i in range(self.customers)]

    def symbols(self) -> list:
        return [f"S{i:02d}" for i in range(self.securities)]

    def broker_of(self, i: int) -> str:
        return f"B{i % self.n_brokers:02d}"


# -- the transactions (each takes an open transaction ``t``) -------------------

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


def trade_result(t, trade_id: str, broker_fix: bool) -> dict:
    """Execute a pending trade at the last price: holdings, cash, settlement, broker."""
    if t.get(trade_id, "status", table=TRADE) != "pending":
        return {"completed": False}                       # already done (never twice)
    order = json.loads(t.get(trade_id, "order", table=TRADE))
    acct, symbol = order["acct"], order["symbol"]
    price = t.get(symbol, "price", table=SECURITY)
    cash = t.get(acct, "cash", table=ACCOUNT)
    summary_row = f"{acct}/{symbol}"
    held = t.get(summary_row, "qty", table=SUMMARY) or 0
    if order["buy"]:
        qty = order["qty"]
        lots = {}
    else:
        qty = min(order["qty"], held)
        lots = _take_lots(t, acct, symbol, qty)
    amount = qty * price
    commission = amount * COMMISSION_PERCENT // 100
    delta = -(amount + commission) if order["buy"] else amount - commission
    broker_totals = None if broker_fix else (
        t.get(order["broker"], "num_trades", table=BROKER),
        t.get(order["broker"], "comm_total", table=BROKER))
    # -- writes (after every read: a SQL store must not see its own writes first)
    if order["buy"]:
        t.set(f"{acct}/{symbol}/{trade_id}", "qty", qty, table=HOLDING)
    for row, left in lots.items():
        if left:
            t.set(row, "qty", left, table=HOLDING)
        else:
            t.delete(row, "qty", table=HOLDING)
    t.set(summary_row, "qty", held + qty if order["buy"] else held - qty, table=SUMMARY)
    t.set(acct, "cash", cash + delta, table=ACCOUNT)
    t.set(trade_id, "cash", json.dumps({"acct": acct, "amount": delta}, sort_keys=True),
          table=SETTLEMENT)
    t.set(trade_id, "status", "completed", table=TRADE)
    t.set(trade_id, "exec", json.dumps({"price": price, "qty": qty, "commission": commission},
                                       sort_keys=True), table=TRADE)
    if broker_fix:                                        # a side row, aggregated later
        t.set(f"{order['broker']}/{trade_id}", "commission", commission, table=BROKER_COMM)
    else:                                                 # the hotspot
        t.set(order["broker"], "num_trades", broker_totals[0] + 1, table=BROKER)
        t.set(order["broker"], "comm_total", broker_totals[1] + commission, table=BROKER)
    return {"completed": True}


def _take_lots(t, acct: str, symbol: str, qty: int) -> dict:
    """FIFO: ``{lot row: qty left}`` for the lots a sell of ``qty`` consumes."""
    taken = {}
    for row, _col, lot in t.scan(HOLDING, *_prefix_range(f"{acct}/{symbol}")):
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
        for row, _col, req in t.scan(REQUEST, *_prefix_range(symbol)):
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
    for row, _col, qty in t.scan(HOLDING, *_prefix_range(acct)):
        lots[row.split("/")[1]] += qty
    violations, value = [], 0
    for row, _col, qty in t.scan(SUMMARY, *_prefix_range(acct)):
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
    index = t.scan(ACCOUNT_TRADE, *_prefix_range(acct))
    violations = []
    for _row, _col, trade_id in index[-last:]:
        status = t.get(trade_id, "status", table=TRADE)
        done = (t.get(trade_id, "exec", table=TRADE) is not None,
                t.get(trade_id, "cash", table=SETTLEMENT) is not None)
        if (status == "completed") != done[0] or done[0] != done[1]:
            violations.append(f"trade-status {acct}: {trade_id} is {status} with exec/settlement "
                              f"{done} in the same snapshot")
    return {"violations": violations}


def aggregate_commissions(t) -> dict:
    """The broker fix: fold every per-trade commission side row into its broker's totals."""
    per_broker = defaultdict(list)
    for row, _col, commission in t.scan(BROKER_COMM):
        per_broker[row.split("/")[0]].append((row, commission))
    for broker, rows in sorted(per_broker.items()):
        count = t.get(broker, "num_trades", table=BROKER)
        total = t.get(broker, "comm_total", table=BROKER)
        t.set(broker, "num_trades", count + len(rows), table=BROKER)
        t.set(broker, "comm_total", total + sum(c for _r, c in rows), table=BROKER)
        for row, _c in rows:
            t.delete(row, "commission", table=BROKER_COMM)
    return {"folded": sum(len(r) for r in per_broker.values())}


def fold_commission(txn, row: str, column: str) -> None:
    """The broker fix as an observer of ``broker_comm.commission``: fold one side row."""
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


# -- stores --------------------------------------------------------------------

class PercolatorStore:
    """Transactions on a :class:`~percolator_ref.Cluster`."""
    name = "percolator"

    def __init__(self, cluster):
        self.cluster = cluster

    def begin(self):
        return self.cluster.begin()


class SqliteTxn:
    """The Percolator transaction interface over one SQLite transaction."""

    def __init__(self, conn):
        self.conn = conn
        conn.execute("BEGIN")

    def get(self, row, column, table="default"):
        hit = self.conn.execute("SELECT v FROM cells WHERE tbl=? AND row=? AND col=?",
                                (table, row, column)).fetchone()
        return None if hit is None else hit[0]

    def set(self, row, column, value, table="default"):
        self.conn.execute("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?)",
                          (table, row, column, value))

    def delete(self, row, column, table="default"):
        self.conn.execute("DELETE FROM cells WHERE tbl=? AND row=? AND col=?",
                          (table, row, column))

    def scan(self, table="default", start_row=None, end_row=None):
        return self.conn.execute(
            "SELECT row, col, v FROM cells WHERE tbl=? AND row>=? AND row<? ORDER BY row, col",
            (table, start_row or "", end_row or "\U0010ffff")).fetchall()

    def commit(self) -> bool:
        self.conn.execute("COMMIT")
        return True


class SqliteStore:
    """SQLite in memory: one ``cells(tbl, row, col, v)`` table, the same transactions."""
    name = "sqlite"

    def __init__(self):
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.execute("CREATE TABLE cells (tbl TEXT, row TEXT, col TEXT, v, "
                          "PRIMARY KEY (tbl, row, col)) WITHOUT ROWID")

    def begin(self):
        return SqliteTxn(self.conn)


# -- statistics ----------------------------------------------------------------

@dataclass
class Stats:
    """Counts of one run: commits and aborted attempts per transaction type, latencies."""
    committed: Counter = field(default_factory=Counter)
    aborted: Counter = field(default_factory=Counter)
    gave_up: Counter = field(default_factory=Counter)
    trade_results: int = 0
    latencies: list = field(default_factory=list)      # seconds per committed logical txn
    violations: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def abort_rate(self, names=None) -> float:
        names = names or set(self.committed) | set(self.aborted)
        attempts = sum(self.committed[n] + self.aborted[n] for n in names)
        return sum(self.aborted[n] for n in names) / attempts if attempts else 0.0


def percentile(values: list, p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``; 0.0 if empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(p / 100 * len(ordered))           # nearest-rank definition
    return ordered[min(len(ordered), max(rank, 1)) - 1]


# -- the workload ----------------------------------------------------------------

class Tpce:
    """One TPC-E-style database on ``store`` (a Cluster, or a store with ``begin()``).

    Several client processes on one shared store (see :func:`run_processes`):
    one process loads; the others pass ``load=False`` (same config: they only
    recompute the initial holdings), a ``trade_id_prefix`` of their own (trade
    ids unique per process) and a ``stream`` of their own (their emulators'
    random streams differ).
    """

    def __init__(self, store, config: Optional[TpceConfig] = None, *, load: bool = True,
                 trade_id_prefix: str = "T", stream: int = 0, **kwargs):
        if config is not None and kwargs:
            raise TypeError("pass either config or keyword settings, not both")
        self.config = config if config is not None else TpceConfig(**kwargs)
        if hasattr(store, "bigtable"):                    # a Cluster
            store = PercolatorStore(store)
        if not callable(getattr(store, "begin", None)):
            raise TypeError(f"store must be a Cluster or have begin(), got {store!r}")
        self.store = store
        self.cluster = getattr(store, "cluster", None)
        self.stats = Stats()
        self.pending = deque()                            # trade ids for Trade-Result
        self._ids = 0
        self.trade_id_prefix = trade_id_prefix
        self.stream = _positive_int(stream, "stream", 0)
        self._ids_lock = threading.Lock()
        self._feed_lock = threading.Lock()
        self._aggregate_lock = threading.Lock()
        self.initial_holdings = {}
        self.aggregation = self._install_aggregation()
        self._load(write=load)

    def _install_aggregation(self) -> Optional[str]:
        """The broker fix's aggregation: an observer on a cluster, else a periodic transaction."""
        if not self.config.broker_fix:
            return None
        if self.cluster is not None and self.config.aggregation == "observer":
            self.cluster.observe(BROKER_COMM, "commission", name="fold")(fold_commission)
            return "observer"
        return "periodic"

    # -- loading ------------------------------------------------------------
    def _load(self, write: bool = True) -> None:
        cfg = self.config
        rng = random.Random(cfg.seed)
        t = self.store.begin() if write else _NoWrites()
        for b in range(cfg.n_brokers):
            t.set(f"B{b:02d}", "num_trades", 0, table=BROKER)
            t.set(f"B{b:02d}", "comm_total", 0, table=BROKER)
        for symbol in cfg.symbols():
            t.set(symbol, "price", rng.randrange(2000, 10000), table=SECURITY)
        for i, acct in enumerate(cfg.accounts()):
            t.set(acct, "cash", cfg.initial_cash, table=ACCOUNT)
            t.set(acct, "broker", cfg.broker_of(i), table=ACCOUNT)
            for symbol in rng.sample(cfg.symbols(), cfg.initial_lots):
                t.set(f"{acct}/{symbol}/I{i:04d}", "qty", cfg.lot_qty, table=HOLDING)
                t.set(f"{acct}/{symbol}", "qty", cfg.lot_qty, table=SUMMARY)
                self.initial_holdings[(acct, symbol)] = cfg.lot_qty
        if not t.commit():
            raise RuntimeError("loading the TPC-E database failed")

    # -- choosing work --------------------------------------------------------
    def _new_trade_id(self) -> str:
        with self._ids_lock:
            self._ids += 1
            return f"{self.trade_id_prefix}{self._ids:08d}"

    def next_job(self, rng: random.Random, feed_busy: bool = False) -> tuple:
        """Draw a transaction by TPC-E's mix: ``(name, args)``.

        Trade-Result takes the oldest pending trade (a Trade-Order if none is
        pending); only one Market-Feed runs at a time (a Trade-Status instead).
        """
        cfg = self.config
        name = rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if name == "trade_result":
            try:
                return name, (self.pending.popleft(), cfg.broker_fix)
            except IndexError:
                name = "trade_order"
        if name == "market_feed" and feed_busy:
            name = "trade_status"
        acct = rng.choice(cfg.accounts())
        if name == "trade_order":
            limit = rng.choice([None, None, rng.randrange(0, 300)])   # 1/3 limit orders
            return name, (acct, rng.choice(cfg.symbols()), rng.choice([10, 20, 50, 100]),
                          rng.random() < 0.5, limit, self._new_trade_id())
        if name == "market_feed":
            return name, (self._feed_prices(rng),)
        return name, (acct,)

    def _feed_prices(self, rng: random.Random) -> dict:
        """A random walk step for a few securities (the market emulator's ticker)."""
        t = self.store.begin()
        symbols = rng.sample(self.config.symbols(), min(FEED_SYMBOLS, self.config.securities))
        prices = {s: max(100, t.get(s, "price", table=SECURITY) + rng.randrange(-300, 301))
                  for s in symbols}
        t.commit()
        return prices

    # -- running one attempt ------------------------------------------------
    def attempt(self, name: str, args: tuple) -> tuple:
        """Begin, run and commit one attempt: ``(committed, result)``."""
        t = self.store.begin()
        result = TRANSACTIONS[name](t, *args)
        return t.commit(), result

    def _after_commit(self, name: str, result: dict, started: float) -> None:
        stats = self.stats
        with stats.lock:
            stats.committed[name] += 1
            stats.latencies.append(time.perf_counter() - started)
            stats.violations.extend(result.get("violations", ()))
            if result.get("completed"):
                stats.trade_results += 1
        self.pending.extend(result.get("queued", ()))

    def _after_abort(self, name: str) -> None:
        with self.stats.lock:
            self.stats.aborted[name] += 1

    def execute(self, name: str, args: tuple, rng: random.Random,
                sleep: Callable = time.sleep) -> bool:
        """Run a logical transaction, retrying on conflict with jittered exponential backoff."""
        started = time.perf_counter()
        for attempt in range(MAX_ATTEMPTS):
            ok, result = self.attempt(name, args)
            if ok:
                self._after_commit(name, result, started)
                return True
            self._after_abort(name)
            sleep(rng.uniform(0, min(0.001 * 2 ** attempt, 0.05)))
        with self.stats.lock:
            self.stats.gave_up[name] += 1
        if name == "trade_result":
            self.pending.append(args[0])                  # the market tries again later
        return False

    # -- drivers --------------------------------------------------------------
    def run_rounds(self, clients: int = 4, rounds: int = 100, aggregate_every: int = 10,
                   progress: bool = False) -> Stats:
        """Deterministic concurrency: in each round ``clients`` transactions all read, then
        all commit in a seeded order (so they are all concurrent); an aborted one is
        retried in the next round. With the broker fix, an aggregator runs every
        ``aggregate_every`` rounds. Ends with :meth:`drain`.
        """
        _positive_int(clients, "clients")
        _positive_int(rounds, "rounds", 0)
        _positive_int(aggregate_every, "aggregate_every")
        from tqdm.auto import tqdm
        rng = random.Random(self.config.seed * 7919 + clients)
        jobs = [None] * clients
        for r in tqdm(range(rounds), desc=f"tpce rounds x{clients}", disable=not progress,
                      leave=False):
            staged = []
            for c in range(clients):
                if jobs[c] is None:
                    feed_busy = any(j is not None and j[0] == "market_feed" for j in jobs)
                    jobs[c] = self.next_job(rng, feed_busy)
                name, args = jobs[c]
                t = self.store.begin()
                staged.append((c, t, TRANSACTIONS[name](t, *args), time.perf_counter()))
            rng.shuffle(staged)
            for c, t, result, started in staged:
                name = jobs[c][0]
                if t.commit():
                    self._after_commit(name, result, started)
                    jobs[c] = None
                else:
                    self._after_abort(name)
            if self.config.broker_fix and (r + 1) % aggregate_every == 0:
                self.aggregate()
        for job in jobs:                                  # unfinished trade results go back
            if job is not None and job[0] == "trade_result":
                self.pending.appendleft(job[1][0])
        self.drain()
        return self.stats

    def run_threads(self, threads: int = 4, seconds: float = 2.0, latency: float = 0.0,
                    aggregate_period: float = 0.05, progress: bool = False,
                    drain: bool = True) -> dict:
        """Emulator threads for ``seconds``: each draws transactions from the mix (as customer
        or market emulator). ``latency`` (seconds) models a round trip per row transaction
        during the timed part only (slept outside the store's lock, so threads overlap).
        Returns :meth:`summary` over the timed part (drain excluded).
        """
        _positive_int(threads, "threads")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ValueError(f"seconds must be a positive number, got {seconds!r}")
        if isinstance(latency, bool) or not isinstance(latency, (int, float)) or latency < 0:
            raise ValueError(f"latency must be a number of seconds >= 0, got {latency!r}")
        if latency and self.cluster is None:
            raise ValueError("latency is modeled on a Percolator cluster only")
        from tqdm.auto import tqdm
        stop = threading.Event()

        def emulator(i: int) -> None:
            rng = random.Random(self.config.seed * 100003 + self.stream * 1009 + i)
            while not stop.is_set():
                feed = self._feed_lock.acquire(blocking=False)
                name, args = self.next_job(rng, feed_busy=not feed)
                if name != "market_feed" and feed:
                    self._feed_lock.release()
                    feed = False
                try:
                    self.execute(name, args, rng)
                finally:
                    if feed:
                        self._feed_lock.release()

        def aggregator() -> None:
            while not stop.wait(aggregate_period):
                self.aggregate()

        workers = [threading.Thread(target=emulator, args=(i,), daemon=True)
                   for i in range(threads)]
        if self.config.broker_fix:
            workers.append(threading.Thread(target=aggregator, daemon=True))
        modeled = Latency(latency)
        self.cluster.bigtable.interceptors.append(modeled)
        cpu0, t0 = time.process_time(), time.perf_counter()
        for w in workers:
            w.start()
        with tqdm(total=round(seconds, 1), desc=f"tpce {threads} threads", unit="s",
                  disable=not progress, leave=False, bar_format="{l_bar}{bar}| {n:.1f}/{total}s "
                  "{postfix}") as bar:
            while (elapsed := time.perf_counter() - t0) < seconds:
                time.sleep(min(0.1, seconds - elapsed))
                bar.n = round(min(time.perf_counter() - t0, seconds), 1)
                bar.set_postfix_str(f"tpsE={self.stats.trade_results / max(elapsed, 1e-9):.0f}")
        stop.set()
        for w in workers:
            w.join()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        self.cluster.bigtable.interceptors.remove(modeled)
        summary = self.summary(elapsed, cpu)
        summary.update(threads=threads, latency_s=latency)
        if drain:
            self.drain()
        return summary

    def aggregate(self) -> None:
        """Fold the broker side rows (the broker fix): run the observers, or one aggregator
        transaction (retried on conflict)."""
        if self.aggregation == "observer":
            with self._aggregate_lock:         # one observer runner at a time
                runs = self.cluster.run_observers()
            with self.stats.lock:
                self.stats.committed["aggregate"] += runs
        else:
            self.execute("aggregate", (), random.Random(0))

    def drain(self) -> None:
        """Finish: run every pending Trade-Result, then aggregate (broker fix)."""
        rng = random.Random(1)
        while self.pending:
            self.execute("trade_result", (self.pending.popleft(), self.config.broker_fix), rng)
        if self.config.broker_fix:
            self.aggregate()

    # -- results -----------------------------------------------------------
    def summary(self, elapsed: float, cpu: Optional[float] = None) -> dict:
        """tpsE, abort rates and latency percentiles of the run so far."""
        s = self.stats
        with s.lock:
            lat = [x * 1000 for x in s.latencies]
            out = {"seconds": round(elapsed, 3), "trade_results": s.trade_results,
                   "tpsE": round(s.trade_results / elapsed, 2) if elapsed > 0 else 0.0,
                   "committed": sum(s.committed.values()), "aborts": sum(s.aborted.values()),
                   "abort_rate": round(s.abort_rate(), 4),
                   "trade_result_abort_rate": round(s.abort_rate(["trade_result"]), 4),
                   "gave_up": sum(s.gave_up.values()),
                   "latency_ms_p50": round(percentile(lat, 50), 3),
                   "latency_ms_p90": round(percentile(lat, 90), 3),
                   "latency_ms_p99": round(percentile(lat, 99), 3),
                   "mix": dict(sorted(s.committed.items())),
                   "aborted_by_txn": dict(sorted(s.aborted.items()))}
        if cpu is not None:
            out["cpu_seconds"] = round(cpu, 3)
            out["cpu_ms_per_trade_result"] = (round(1000 * cpu / s.trade_results, 3)
                                              if s.trade_results else None)
        return out

    def check_invariants(self) -> list:
        """TPC-E's consistency conditions on one snapshot; the violations found (empty: OK).

        Run after :meth:`drain` (no trade pending). Also reports every inconsistent
        snapshot a read-only transaction saw during the run.
        """
        t = self.store.begin()
        snap = {name: defaultdict(dict) for name in (ACCOUNT, BROKER, TRADE, ACCOUNT_TRADE,
                                                        REQUEST, HOLDING, SUMMARY, SETTLEMENT,
                                                        BROKER_COMM)}
        for table, rows in snap.items():
            for row, col, value in t.scan(table):
                rows[row][col] = value
        t.commit()
        return list(self.stats.violations) + _check_snapshot(self, snap)


class _NoWrites:
    """Stands in for the loading transaction when another process loaded the data."""

    def set(self, *args, **kwargs) -> None:
        pass

    def commit(self) -> bool:
        return True


def _check_snapshot(w: Tpce, snap: dict) -> list:
    v = []
    cfg = w.config
    trades = snap[TRADE]
    expected_cash = {a: cfg.initial_cash for a in cfg.accounts()}
    expected_qty = defaultdict(int, w.initial_holdings)
    per_broker = defaultdict(lambda: [0, 0])
    completed = 0
    for trade_id, cols in sorted(trades.items()):
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
            continue
        completed += 1
        ex = json.loads(cols["exec"])
        amount = ex["qty"] * ex["price"]
        delta = -(amount + ex["commission"]) if order["buy"] else amount - ex["commission"]
        if settled is None or json.loads(settled) != {"acct": order["acct"], "amount": delta}:
            v.append(f"trade {trade_id}: settlement {settled} does not match its execution")
        expected_cash[order["acct"]] += delta
        expected_qty[(order["acct"], order["symbol"])] += ex["qty"] if order["buy"] else -ex["qty"]
        per_broker[order["broker"]][0] += 1
        per_broker[order["broker"]][1] += ex["commission"]
    if completed != w.stats.trade_results:
        v.append(f"{completed} trades completed but {w.stats.trade_results} Trade-Results "
                 f"committed a completion (each trade must complete exactly once)")
    orphans = set(snap[SETTLEMENT]) - {k for k, c in trades.items()
                                       if c.get("status") == "completed"}
    v += [f"settlement {k} without a completed trade" for k in sorted(orphans)]
    for acct in cfg.accounts():
        cash = snap[ACCOUNT][acct]["cash"]
        if cash != expected_cash[acct]:
            v.append(f"account {acct}: cash {cash} != initial + settlements {expected_cash[acct]}")
    lots = defaultdict(int)
    for row, cols in snap[HOLDING].items():
        acct, symbol, _ = row.split("/")
        lots[(acct, symbol)] += cols["qty"]
    summaries = {tuple(row.split("/")): cols["qty"] for row, cols in snap[SUMMARY].items()}
    for key in sorted(set(lots) | set(summaries) | set(expected_qty)):
        have, lot_sum, want = summaries.get(key, 0), lots.get(key, 0), expected_qty.get(key, 0)
        if have != lot_sum:
            v.append(f"holding summary {key}: {have} != sum of holdings {lot_sum}")
        if have != want:
            v.append(f"holding {key}: {have} != initial + buys - sells {want}")
    pending_comm = defaultdict(lambda: [0, 0])
    for row, cols in snap[BROKER_COMM].items():
        pending_comm[row.split("/")[0]][0] += 1
        pending_comm[row.split("/")[0]][1] += cols["commission"]
    for b in range(cfg.n_brokers):
        broker = f"B{b:02d}"
        cols = snap[BROKER][broker]
        got = [cols["num_trades"] + pending_comm[broker][0],
               cols["comm_total"] + pending_comm[broker][1]]
        if got != per_broker[broker]:
            v.append(f"broker {broker}: trades/commission {got} != completed trades "
                     f"{per_broker[broker]}")
        if pending_comm[broker][0]:
            v.append(f"broker {broker}: {pending_comm[broker][0]} commission rows not aggregated")
    return v


# -- convenience -----------------------------------------------------------------

def new_cluster(backend=None, record_history: bool = False, clock=None):
    """A cluster for the workload (wall clock unless ``clock`` is given)."""
    from ..cluster import Cluster
    return Cluster(clock=clock, backend=backend, record_history=record_history)


def cpu_per_trade(rounds: int = 400, customers: int = 200, seed: int = 0,
                  broker_fix: bool = False) -> dict:
    """CPU (``time.process_time``) per Trade-Result: Percolator vs SQLite in memory.

    One client, deterministic: both stores run the same sequence of transactions.
    """
    from ..clock import ManualClock
    out = {}
    for store in (PercolatorStore(new_cluster(clock=ManualClock())), SqliteStore()):
        w = Tpce(store, TpceConfig(customers=customers, seed=seed, broker_fix=broker_fix))
        cpu0 = time.process_time()
        w.run_rounds(clients=1, rounds=rounds)
        cpu = time.process_time() - cpu0
        out[store.name] = {"trade_results": w.stats.trade_results,
                           "transactions": sum(w.stats.committed.values()),
                           "cpu_seconds": round(cpu, 4),
                           "cpu_ms_per_trade_result": round(1000 * cpu / w.stats.trade_results, 4),
                           "violations": len(w.check_invariants())}
    out["ratio"] = round(out["percolator"]["cpu_ms_per_trade_result"]
                         / out["sqlite"]["cpu_ms_per_trade_result"], 2)
    out["paper_ratio"] = 30
    return out


# -- several client processes on a shared store (Redis) ----------------------------

def _process_worker(cluster, index: int, config: TpceConfig, threads: int, seconds: float,
                    latency: float) -> dict:
    """One client process: emulator threads on the shared database (loaded by the parent)."""
    w = Tpce(cluster, config, load=False, trade_id_prefix=f"T{index:02d}-", stream=index + 1)
    summary = w.run_threads(threads=threads, seconds=seconds, latency=latency, drain=False)
    latencies = list(w.stats.latencies)
    w.drain()
    return {"summary": summary, "latencies": latencies, "violations": list(w.stats.violations),
            "trade_results_total": w.stats.trade_results}


def run_processes(backend: str, config: TpceConfig, processes: int = 2, threads: int = 1,
                  seconds: float = 2.0, latency: float = 0.0, progress: bool = False) -> tuple:
    """TPC-E with ``processes`` client processes (``threads`` emulators each) on one store.

    The parent loads the database, the workers run for ``seconds`` and drain
    their pending trades; the parent then aggregates (broker fix) and checks
    the invariants over the shared store. Returns ``(result, workload)``:
    ``result`` has the keys of :meth:`Tpce.summary` summed over the processes
    (tpsE is the sum of the processes' rates; latency percentiles over every
    process's latencies), ``invariants_ok``, ``violations`` (all of them) and
    ``per_process``.
    """
    from ..harness.multiprocess import run_processes as start_all
    _positive_int(processes, "processes")
    _positive_int(threads, "threads")
    w = Tpce(new_cluster(backend=backend), config)
    run = start_all(backend, _process_worker, processes, (config, threads, seconds, latency),
                    cluster_options={"record_history": False}, progress=progress)
    failed = [r.error or f"exit code {r.exitcode}" for r in run.workers if not
              (r.error is None and r.exitcode == 0)]
    if failed:
        raise RuntimeError("a TPC-E worker process failed:\n" + "\n".join(failed))
    outs = [r.result for r in run.workers]
    w.stats.trade_results = sum(o["trade_results_total"] for o in outs)
    w.stats.violations = [v for o in outs for v in o["violations"]]
    if config.broker_fix:
        w.aggregate()                      # fold what the workers left for the observer
    violations = w.check_invariants()
    result = _merge_summaries([o["summary"] for o in outs], [o["latencies"] for o in outs])
    result.update(processes=processes, threads_per_process=threads, threads=processes * threads,
                  latency_s=latency, invariants_ok=not violations, violations=violations,
                  violation_count=len(violations),
                  per_process=[{k: o["summary"][k] for k in ("tpsE", "trade_results", "committed",
                                                           "aborts", "seconds")} for o in outs])
    return result, w


def _merge_summaries(summaries: list, latencies: list) -> dict:
    committed, aborted = Counter(), Counter()
    for s in summaries:
        committed.update(s["mix"])
        aborted.update(s["aborted_by_txn"])
    stats = Stats(committed=committed, aborted=aborted)
    lat = [x * 1000 for per in latencies for x in per]
    trade_results = sum(s["trade_results"] for s in summaries)
    cpu = sum(s["cpu_seconds"] for s in summaries)
    return {"seconds": max(s["seconds"] for s in summaries), "trade_results": trade_results,
            "tpsE": round(sum(s["tpsE"] for s in summaries), 2),
            "committed": sum(committed.values()), "aborts": sum(aborted.values()),
            "abort_rate": round(stats.abort_rate(), 4),
            "trade_result_abort_rate": round(stats.abort_rate(["trade_result"]), 4),
            "gave_up": sum(s["gave_up"] for s in summaries),
            "latency_ms_p50": round(percentile(lat, 50), 3),
            "latency_ms_p90": round(percentile(lat, 90), 3),
            "latency_ms_p99": round(percentile(lat, 99), 3),
            "mix": dict(sorted(committed.items())), "aborted_by_txn": dict(sorted(aborted.items())),
            "cpu_seconds": round(cpu, 3),
            "cpu_ms_per_trade_result": round(1000 * cpu / trade_results, 3) if trade_results
            else None}
