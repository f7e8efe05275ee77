"""Exercise 8 (write skew), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex08_write_skew`'s."""
from __future__ import annotations

from ..framework import Exercise


exercise = Exercise(8, "write skew: keep checking + savings >= 0 under snapshot isolation",
                    answer="withdraw", graded={"withdraw": ()})


class Teller:
    """One withdrawal's transaction, driven step by step: begin, withdraw, commit."""

    def __init__(self, withdraw, cluster):
        self.withdraw_fn, self.txn = withdraw, cluster.begin()

    def withdraw(self, customer, account, amount):
        return self.withdraw_fn(self.txn, customer, account, amount)

    def commit(self):
        return self.txn.commit()


@exercise.role("teller")
def _teller(withdraw, cluster):
    return Teller(withdraw, cluster)


@exercise.role("withdrawal")
def _withdrawal(withdraw, cluster, customer, account, amount):
    """One transaction: withdraw, then commit if withdraw returned (what it returned)."""
    txn = cluster.begin()
    returned = withdraw(txn, customer, account, amount)
    txn.commit()
    return returned
