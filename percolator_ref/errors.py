"""Exceptions of the public API (all importable from ``percolator_ref``)."""


class PercolatorError(Exception):
    """Base class of every error this package raises on purpose."""


class TransactionClosed(PercolatorError):
    """The transaction was used after ``commit()`` returned or after a crash."""


class ClientCrash(PercolatorError):
    """Raised by ``commit(crash_after=...)``: the client died right after a step.

    The store is left exactly as the crashed client left it. ``step`` (a str)
    names where it stopped: the crash point given (``"prewrite"`` ...) or, for
    a crash after a count of row transactions, the step of the last one
    (see :mod:`percolator_ref.step`); ``row_transactions`` counts the commit's
    row transactions that applied.
    """

    def __init__(self, step, row_transactions):
        super().__init__(f"client crashed after {step!r} "
                         f"({row_transactions} row transactions into commit)")
        self.step = step
        self.row_transactions = row_transactions


class CommitOutcomeUnknown(PercolatorError):
    """The store failed while the commit point was being written: the outcome is unknown.

    The transaction is closed; its primary decides (``Transaction.outcome()``).
    """


class StoreUnavailable(PercolatorError):
    """The store behind the Bigtable interface cannot be reached."""


class OracleExhausted(StoreUnavailable):
    """The oracle has no timestamp left below MAX_TIMESTAMP (2**63 - 1) to hand out."""


class ObserverLoopError(PercolatorError):
    """``run_observers(max_runs=...)`` passed its bound (a self-triggering loop?)."""


class OracleStateCorrupt(PercolatorError, ValueError):
    """The timestamp oracle's state file cannot be trusted (see :mod:`percolator_ref.oracle`).

    The message names the file and what is wrong with it (empty, not UTF-8,
    truncated, checksum mismatch, malformed number, trailing data). The
    oracle refuses to start: a wrong high-water mark could reissue
    timestamps. Also a ``ValueError``, as the earlier versions raised.
    """
