"""The TPC-E-style database: table names, the transaction mix and the sizes (:class:`TpceConfig`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

ACCOUNT, BROKER, SECURITY, TRADE = "account", "broker", "security", "trade"
ACCOUNT_TRADE, REQUEST, HOLDING = "account_trade", "trade_request", "holding"
SUMMARY, SETTLEMENT, BROKER_COMM = "holding_summary", "settlement", "broker_comm"
UNFOLDED = "unfolded"      # a side-row group's column, notified (weakly) by Trade-Results
AGGREGATIONS = ("observer", "observer-per-trade", "periodic")

MIX = {"trade_order": 10.1, "trade_result": 10.0, "market_feed": 1.0,
       "customer_position": 13.0, "trade_status": 19.0}
READ_ONLY = ("customer_position", "trade_status")
COMMISSION_PERCENT = 1
FEED_SYMBOLS = 3           # securities whose price one Market-Feed moves
MAX_ATTEMPTS = 30


def prefix_range(prefix: str) -> tuple:
    """Rows starting with ``prefix + '/'``: ``[prefix/, prefix0)`` ('0' follows '/')."""
    return f"{prefix}/", f"{prefix}0"


def positive_int(value, argument: str, minimum: int = 1) -> int:
    """``value`` if it is an int ``>= minimum``; else TypeError/ValueError naming ``argument``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{argument} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class TpceConfig:
    """Sizes of the database. TPC-E has one broker per 100 customers (at least one here).

    ``broker_fix``: Trade-Results write side rows instead of the broker row;
    ``aggregation`` says how the side rows are folded into it: ``"observer"``
    (a weak notification on the side row's group wakes :func:`fold_side_rows`,
    one run folding all the side rows of the group), ``"observer-per-trade"`` (each side
    row notifies :func:`fold_commission`, one run per trade) or ``"periodic"``
    (an aggregator transaction folds every side row; also off a cluster).
    """
    customers: int = 200
    securities: int = 20
    brokers: Optional[int] = None
    initial_cash: int = 10_000_000          # cents per account
    initial_lots: int = 2                   # securities held per account at load
    lot_qty: int = 100
    broker_fix: bool = False
    aggregation: str = "observer"           # broker fix: one of AGGREGATIONS
    seed: int = 0

    def __post_init__(self):
        positive_int(self.customers, "customers")
        positive_int(self.securities, "securities")
        if self.brokers is not None:
            positive_int(self.brokers, "brokers")
        positive_int(self.initial_cash, "initial_cash", 0)
        positive_int(self.initial_lots, "initial_lots", 0)
        if self.initial_lots > self.securities:
            raise ValueError(f"initial_lots must be <= securities, got {self.initial_lots}")
        positive_int(self.lot_qty, "lot_qty")
        if not isinstance(self.broker_fix, bool):
            raise TypeError(f"broker_fix must be a bool, got {self.broker_fix!r}")
        positive_int(self.seed, "seed", 0)
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, "
                             f"got {self.aggregation!r}")

    @property
    def n_brokers(self) -> int:
        return self.brokers or max(1, self.customers // 100)

    def account(self, i: int) -> str:
        """The ``i``-th customer's account row."""
        return f"A{i:04d}"

    def accounts(self) -> list:
        return [self.account(i) for i in range(self.customers)]

    def symbol(self, i: int) -> str:
        """The ``i``-th security's row."""
        return f"S{i:02d}"

    def symbols(self) -> list:
        return [self.symbol(i) for i in range(self.securities)]

    def sample_symbols(self, rng, k: int) -> list:
        """``rng.sample(self.symbols(), k)`` without building the list (same draws)."""
        return [self.symbol(i) for i in rng.sample(range(self.securities), k)]

    def broker_of(self, i: int) -> str:
        return f"B{i % self.n_brokers:02d}"
