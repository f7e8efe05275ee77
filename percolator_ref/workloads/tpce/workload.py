"""One TPC-E-style database and its customer and market emulators (:class:`Tpce`)."""
from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import Callable, Optional

from . import drivers
from .invariants import check_snapshot, read_snapshot
from .schema import (ACCOUNT, BROKER, BROKER_COMM, FEED_SYMBOLS, HOLDING, MAX_ATTEMPTS, MIX,
                     SECURITY, SUMMARY, UNFOLDED, TpceConfig, positive_int)
from .stats import Stats, summarize
from .stores import NoWrites, PercolatorStore
from .transactions import TRANSACTIONS, fold_commission, fold_side_rows


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
        self.stream = positive_int(stream, "stream", 0)
        self._ids_lock = threading.Lock()
        self.feed_lock = threading.Lock()                 # one Market-Feed at a time
        self._aggregate_lock = threading.Lock()
        self.initial_holdings = {}
        self.aggregation = self._install_aggregation()
        self._load(write=load)

    def _install_aggregation(self) -> Optional[str]:
        """The broker fix's aggregation: an observer on a cluster, else a periodic transaction."""
        if not self.config.broker_fix:
            return None
        if self.cluster is None or self.config.aggregation == "periodic":
            return "periodic"
        if self.config.aggregation == "observer":
            self.cluster.observe(BROKER_COMM, UNFOLDED, name="fold")(fold_side_rows)
        else:
            self.cluster.observe(BROKER_COMM, "commission", name="fold")(fold_commission)
        return self.config.aggregation

    # -- loading ------------------------------------------------------------
    def _load(self, write: bool = True) -> None:
        """Brokers, securities, accounts with their initial lots, in one transaction."""
        cfg = self.config
        rng = random.Random(cfg.seed)
        t = self.store.begin() if write else NoWrites()
        for b in range(cfg.n_brokers):
            t.set(f"B{b:02d}", "num_trades", 0, table=BROKER)
            t.set(f"B{b:02d}", "comm_total", 0, table=BROKER)
        for symbol in cfg.symbols():
            t.set(symbol, "price", rng.randrange(2000, 10000), table=SECURITY)
        for i, acct in enumerate(cfg.accounts()):
            t.set(acct, "cash", cfg.initial_cash, table=ACCOUNT)
            t.set(acct, "broker", cfg.broker_of(i), table=ACCOUNT)
            for symbol in cfg.sample_symbols(rng, cfg.initial_lots):
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
                return name, self.trade_result_args(self.pending.popleft())
            except IndexError:
                name = "trade_order"
        if name == "market_feed" and feed_busy:
            name = "trade_status"
        acct = cfg.account(rng.randrange(cfg.customers))  # = rng.choice(cfg.accounts())
        if name == "trade_order":
            limit = rng.choice([None, None, rng.randrange(0, 300)])   # 1/3 limit orders
            symbol = cfg.symbol(rng.randrange(cfg.securities))    # = rng.choice(cfg.symbols())
            return name, (acct, symbol, rng.choice([10, 20, 50, 100]),
                          rng.random() < 0.5, limit, self._new_trade_id())
        if name == "market_feed":
            return name, (self._feed_prices(rng),)
        return name, (acct,)

    def trade_result_args(self, trade_id: str) -> tuple:
        """The arguments of :func:`trade_result` for ``trade_id`` in this configuration."""
        return trade_id, self.config.broker_fix, self.aggregation == "observer"

    def _feed_prices(self, rng: random.Random) -> dict:
        """A random walk step for a few securities (the market emulator's ticker)."""
        t = self.store.begin()
        symbols = self.config.sample_symbols(rng, min(FEED_SYMBOLS, self.config.securities))
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

    def record_commit(self, name: str, result: dict, started: float) -> None:
        """Count a committed logical transaction and queue the trades it made pending."""
        stats = self.stats
        with stats.lock:
            stats.committed[name] += 1
            stats.latencies.append(time.perf_counter() - started)
            stats.violations.extend(result.get("violations", ()))
            if result.get("completed"):
                stats.trade_results += 1
        self.pending.extend(result.get("queued", ()))

    def record_abort(self, name: str) -> None:
        """Count one aborted attempt."""
        with self.stats.lock:
            self.stats.aborted[name] += 1

    def execute(self, name: str, args: tuple, rng: random.Random,
                sleep: Callable = time.sleep, give_up: Optional[Callable] = None) -> bool:
        """Run a logical transaction, retrying on conflict with jittered exponential backoff
        (at most MAX_ATTEMPTS attempts, fewer if ``give_up()`` turns true, e.g. at the
        end of a run). A Trade-Result given up goes back to the pending trades."""
        started = time.perf_counter()
        for attempt in range(MAX_ATTEMPTS):
            ok, result = self.attempt(name, args)
            if ok:
                self.record_commit(name, result, started)
                return True
            self.record_abort(name)
            if give_up is not None and give_up():
                break
            sleep(rng.uniform(0, min(0.001 * 2 ** attempt, 0.05)))
        with self.stats.lock:
            self.stats.gave_up[name] += 1
        if name == "trade_result":
            self.pending.append(args[0])                  # the market tries again later
        return False

    def emulate_one(self, rng: random.Random, sleep: Callable = time.sleep,
                    feed_lock: Optional[threading.Lock] = None,
                    give_up: Optional[Callable] = None) -> bool:
        """One emulator step: draw a job by the mix and run it (see :meth:`execute`). Only
        one Market-Feed runs at a time per ``feed_lock`` (default: the workload's own, one
        market emulator; a simulation of many machines gives each machine its own)."""
        feed_lock = feed_lock if feed_lock is not None else self.feed_lock
        feed = feed_lock.acquire(blocking=False)
        try:
            name, args = self.next_job(rng, feed_busy=not feed)
            if name != "market_feed" and feed:
                feed_lock.release()
                feed = False
            return self.execute(name, args, rng, sleep, give_up)
        finally:
            if feed:
                feed_lock.release()

    # -- drivers (see drivers.py) ---------------------------------------------
    def run_rounds(self, clients: int = 4, rounds: int = 100, aggregate_every: int = 10,
                   progress: bool = False) -> Stats:
        """Deterministic concurrency: see :func:`drivers.run_rounds`."""
        return drivers.run_rounds(self, clients, rounds, aggregate_every, progress)

    def run_threads(self, threads: int = 4, seconds: float = 2.0, latency: float = 0.0,
                    aggregate_period: float = 0.05, progress: bool = False,
                    drain: bool = True) -> dict:
        """Emulator threads for ``seconds``: see :func:`drivers.run_threads`."""
        return drivers.run_threads(self, threads, seconds, latency, aggregate_period,
                                   progress, drain)

    def aggregate(self, sleep: Callable = time.sleep,
                  stop: Optional[threading.Event] = None) -> None:
        """Fold the broker side rows (the broker fix): run the observers, or one aggregator
        transaction (retried on conflict, backing off with ``sleep``).

        Observers run until no notification is pending; with ``stop``, one sweep
        over the notifications pending now, ending early once ``stop`` is set.
        """
        if self.aggregation == "periodic":
            self.execute("aggregate", (), random.Random(0), sleep)
            return
        with self._aggregate_lock:             # one observer runner at a time
            runs = (self.cluster.run_observers() if stop is None
                    else drivers.observer_sweep(self.cluster, stop))
        with self.stats.lock:
            self.stats.committed["aggregate"] += runs

    def drain(self) -> None:
        """Finish: run every pending Trade-Result, then aggregate (broker fix)."""
        rng = random.Random(1)
        while self.pending:
            self.execute("trade_result", self.trade_result_args(self.pending.popleft()), rng)
        if self.config.broker_fix:
            self.aggregate()

    # -- results -----------------------------------------------------------
    def summary(self, elapsed: float, cpu: Optional[float] = None) -> dict:
        """tpsE, abort rates and latency percentiles of the run so far."""
        return summarize(self.stats, elapsed, cpu)

    def check_invariants(self) -> list:
        """TPC-E's consistency conditions on one snapshot; the violations found (empty: OK).

        Run after :meth:`drain` (no trade pending). Also reports every inconsistent
        snapshot a read-only transaction saw during the run.
        """
        snap = read_snapshot(self.store)
        return list(self.stats.violations) + check_snapshot(
            self.config, self.initial_holdings, self.stats.trade_results, snap)
