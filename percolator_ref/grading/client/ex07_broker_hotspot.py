"""Exercise 7 (the broker hotspot), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex07_broker_hotspot`'s."""
from __future__ import annotations

from ..framework import Exercise


exercise = Exercise(
    7, "TPC-E broker hotspot: a side table aggregated periodically", answer="answer",
    graded={"record_trade": (), "aggregate": (), "broker_volume": ()})


@exercise.role("trade")
def _trade(answer, cluster, broker, trade_id, amount):
    """One trade in its own transaction: did it commit?"""
    txn = cluster.begin()
    answer.record_trade(txn, broker, trade_id, amount)
    return txn.commit()


class Trader:
    """A trade driven step by step (so several can begin before any commits)."""

    def __init__(self, answer, cluster):
        self.answer, self.txn = answer, cluster.begin()

    def record(self, broker, trade_id, amount):
        self.answer.record_trade(self.txn, broker, trade_id, amount)

    def commit(self):
        return self.txn.commit()


@exercise.role("trader")
def _trader(answer, cluster):
    return Trader(answer, cluster)


@exercise.role("aggregate")
def _aggregate(answer, cluster, broker):
    return answer.aggregate(cluster, broker)


class Viewer:
    """A transaction that begins now and asks broker_volume later."""

    def __init__(self, answer, cluster):
        self.answer, self.txn = answer, cluster.begin()

    def volume(self, broker):
        return self.answer.broker_volume(self.txn, broker)


@exercise.role("viewer")
def _viewer(answer, cluster):
    return Viewer(answer, cluster)
