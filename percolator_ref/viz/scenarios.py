"""Ready-made stepper scenarios: the paper's Figure 4 transfer and friends.

These are transaction *scripts* (what a client program does), not protocol
code: each uses only ``cluster.begin()``, ``get``, ``set`` and ``commit``.
"""
from __future__ import annotations

from functools import partial

from .stepper import Stepper


def figure4_setup(cluster) -> None:
    """Figure 4's initial state: Bob has $10 and Joe $2 (start 5, commit 6)."""
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    t.set("Joe", "bal", 2)
    assert t.commit()


def transfer(cluster, src: str = "Bob", dst: str = "Joe", amount: int = 7) -> bool:
    """Move ``amount`` dollars from ``src`` to ``dst`` in one transaction (``src`` is the primary)."""
    t = cluster.begin()
    a, b = t.get(src, "bal"), t.get(dst, "bal")
    t.set(src, "bal", a - amount)
    t.set(dst, "bal", b + amount)
    return t.commit()


def figure4_stepper() -> Stepper:
    """The paper's Figure 4: one transfer of $7 from Bob to Joe, start 7, commit 8."""
    return Stepper({"transfer": transfer}, setup=figure4_setup)


def two_transfers_stepper() -> Stepper:
    """Two transfers that meet: Bob -> Joe $7 (T7) and Joe -> Bob $1 (T8)."""
    return Stepper({"bob_to_joe": transfer,
                    "joe_to_bob": partial(transfer, src="Joe", dst="Bob", amount=1)},
                   setup=figure4_setup)


# -- the races of notebooks 3, 4 and 5 ----------------------------------------------

def read_balance(cluster, who: str = "Bob"):
    """A reader: one snapshot read of ``who``'s balance, then commit (read-only)."""
    t = cluster.begin()
    value = t.get(who, "bal")
    t.commit()
    return value


def slow_holder_stepper(lock_ttl: float = 1.0) -> Stepper:
    """Cleanup racing a slow holder (notebook 3): Figure 4's transfer T7 and a reader T8.

    The lock service counts a client dead once its token is older than
    ``lock_ttl`` seconds on the cluster's manual clock. Step T7 until it has
    locked Bob, then step T8: it backs off (the clock advances) until T7's
    token is too old, then cleans T7 up; step T7 again to see what is left
    of its commit.
    """
    from ..services.clock import ManualClock
    from ..cluster import Cluster
    return Stepper({"transfer": transfer, "reader": read_balance}, setup=figure4_setup,
                   make_cluster=lambda: Cluster(first_timestamp=5, clock=ManualClock(),
                                                lock_ttl=lock_ttl))


def write_transfer(cluster, client_class=None) -> bool:
    """Figure 4's transfer without its reads (Bob 3, Joe 9), by ``client_class`` (a Transaction)."""
    t = cluster.begin() if client_class is None else client_class(cluster)
    t.set("Bob", "bal", 3)
    t.set("Joe", "bal", 9)
    return t.commit()


def oracle_race_stepper(client_class=None) -> Stepper:
    """§2.3's race (notebook 4): a writer's commit timestamp against a reader's start.

    The writer (``client_class``, default the correct
    :class:`~percolator_ref.transaction.Transaction`; pass
    :class:`~percolator_ref.workloads.broken.EarlyCommitTimestamp` for the
    broken order) buffers Figure 4's two writes and commits; the reader begins
    once the writer has parked before its first row transaction, so its start
    timestamp is above every timestamp the writer has taken so far.
    """
    return Stepper({"writer": partial(write_transfer, client_class=client_class),
                    "reader": read_balance}, setup=figure4_setup)


def counter_setup(cluster) -> None:
    """An observer ``copy_count`` on ``default/count``, and one write of page.count = 1."""
    @cluster.observe("default", "count")
    def copy_count(txn, row, column):
        txn.set(row, "copy", txn.get(row, column))

    t = cluster.begin()
    t.set("page", "count", 1)
    assert t.commit()


def observe_page(cluster) -> int:
    """A scanner's work for page.count's notification: run the observer, then clear it."""
    from ..observers import process_notification
    return process_notification(cluster, ("default", "page", "count"))


def write_count(cluster, value: int = 2) -> bool:
    """A new write of page.count, racing the observer run."""
    t = cluster.begin()
    t.set("page", "count", value)
    return t.commit()


def observer_race_stepper() -> Stepper:
    """An observer run racing a new write of its column (notebook 5).

    ``copy_count`` copies page.count into page.copy. Setup: page.count = 1 is
    committed and notified. The ``observer`` script runs the observer for that
    notification; the ``writer`` writes page.count = 2 meanwhile. Whether the
    new write needs a second run depends on where it commits against the run's
    start timestamp (its acknowledgement).
    """
    return Stepper({"observer": observe_page, "writer": write_count}, setup=counter_setup)
