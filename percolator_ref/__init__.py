"""percolator_ref: a compact, complete reference implementation of Google's Percolator.

Peng & Dabek, "Large-scale Incremental Processing Using Distributed
Transactions and Notifications", OSDI 2010. See API.md for the contract and
the README for a map from the paper's sections and figures to this code.
"""
from .bigtable import Bigtable, RowTransaction
from .checking.checker import CheckReport, History, check_history
from .services.clock import ManualClock, WallClock
from .cluster import Cluster
from .errors import (ClientCrash, CommitOutcomeUnknown, ObserverLoopError, OracleStateCorrupt,
                     OracleExhausted, PercolatorError, StoreUnavailable, TransactionClosed)
from .services.lockservice import LockService
from .model import Cell, CommitPhase, Lock, TxStatus, Write, WriteKind
from .services.oracle import BatchingOracleClient, TimestampOracle
from .trace import Change, RowTransactionEvent, Tracer
from .session import Session
from .step import CRASH_POINTS, Step
from .transaction import Transaction

__all__ = [
    "Bigtable", "RowTransaction", "CommitOutcomeUnknown", "Session", "Step", "CheckReport",
    "History", "check_history", "ManualClock", "WallClock", "Cluster", "ClientCrash",
    "ObserverLoopError", "OracleStateCorrupt", "PercolatorError",
    "OracleExhausted", "StoreUnavailable", "TransactionClosed", "LockService", "Cell", "Lock", "Write",
    "WriteKind", "BatchingOracleClient", "TimestampOracle", "Change", "RowTransactionEvent",
    "Tracer", "CRASH_POINTS", "Transaction", "TxStatus", "CommitPhase",
]
__version__ = "0.1.0"
