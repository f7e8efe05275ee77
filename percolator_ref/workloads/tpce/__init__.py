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

**The broker hotspot** (the paper's own, §3.3): every Trade-Result of a
broker's customers writes that broker's row, so concurrent Trade-Results
conflict. The paper proposes writing the increment to a side table and
aggregating it periodically (and for its benchmark omitted the write); the
fix builds that with §2.4's weak notifications. With ``broker_fix=True`` a
Trade-Result instead writes one side row per trade (``broker_comm``); an
aggregation folds them into the broker row, and the broker conditions hold
once aggregated. ``TpceConfig.aggregation`` picks how:

- ``"observer"`` (default): the Trade-Result also sets a weak notification
  (no write, no conflict) on its side row's group (ten consecutive trade ids,
  :func:`side_group`); the :func:`fold_side_rows` observer folds the whole
  group in one run, however many trades notified it (they collapse);
- ``"observer-per-trade"``: the side row's own write notifies
  :func:`fold_commission`, one run per trade, plus a second, idle one for the
  delete: kept to measure what collapsing saves;
- ``"periodic"``: one aggregator transaction folds every side row (also off a
  cluster). On the kit's Bigtable its scan also reads the rows it already
  folded (a delete leaves a record), so its cost grows with the run's length.

Drivers: :meth:`Tpce.run_rounds` is deterministic (``clients`` transactions
run concurrently in each round: all read, then all commit in a seeded order),
for tests and notebooks; :meth:`Tpce.run_threads` runs real emulator threads
for a number of seconds (with ``latency`` modeling a round trip per row
transaction) and measures tpsE over that window; what is still in flight
when it closes (and the aggregation's backlog) is reported apart. :meth:`Tpce.check_invariants` checks TPC-E's
consistency conditions after a run.

The package's modules:

==================  ==========================================================
``schema``          table names, the mix, :class:`TpceConfig`
``transactions``    the five transactions and the broker fix's aggregation
``stores``          :class:`PercolatorStore`, :class:`SqliteStore`
``workload``        :class:`Tpce`: loading, the mix, retries, aggregation
``drivers``         deterministic rounds, emulator threads, modeled latency
``invariants``      TPC-E's consistency conditions on one snapshot
``stats``           counts (and their DataFrame), percentiles, summaries
``processes``       client processes on a shared store; CPU against SQLite
==================  ==========================================================
"""
from __future__ import annotations

from .drivers import count_side_rows, modeled_latency, observer_sweep
from .invariants import check_snapshot, read_snapshot
from .processes import (cpu_per_trade, merge_process_results, new_cluster, process_worker,
                        run_processes)
from .schema import (ACCOUNT, ACCOUNT_TRADE, AGGREGATIONS, BROKER, BROKER_COMM,
                     COMMISSION_PERCENT, FEED_SYMBOLS, HOLDING, MAX_ATTEMPTS, MIX, READ_ONLY,
                     REQUEST, SECURITY, SETTLEMENT, SUMMARY, TRADE, UNFOLDED, TpceConfig,
                     positive_int, prefix_range)
from .stats import Stats, merge_summaries, percentile, summarize
from .stores import NoWrites, PercolatorStore, SqliteStore, SqliteTxn
from .transactions import (TRANSACTIONS, aggregate_commissions, customer_position,
                           fold_commission, fold_rows, fold_side_rows, market_feed, side_group,
                           side_row, take_lots, trade_order, trade_result, trade_status)
from .workload import Tpce

__all__ = [
    "ACCOUNT", "ACCOUNT_TRADE", "AGGREGATIONS", "BROKER", "BROKER_COMM", "COMMISSION_PERCENT",
    "FEED_SYMBOLS", "HOLDING", "MAX_ATTEMPTS", "MIX", "READ_ONLY", "REQUEST", "SECURITY",
    "SETTLEMENT", "SUMMARY", "TRADE", "TRANSACTIONS", "UNFOLDED", "NoWrites",
    "PercolatorStore", "SqliteStore", "SqliteTxn", "Stats", "Tpce", "TpceConfig",
    "aggregate_commissions", "check_snapshot", "count_side_rows", "cpu_per_trade",
    "customer_position", "fold_commission", "fold_rows", "fold_side_rows", "market_feed",
    "merge_process_results", "merge_summaries", "modeled_latency", "new_cluster",
    "observer_sweep", "percentile", "positive_int", "prefix_range", "process_worker",
    "read_snapshot", "run_processes", "side_group", "side_row", "summarize", "take_lots",
    "trade_order", "trade_result", "trade_status",
]
