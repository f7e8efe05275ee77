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
