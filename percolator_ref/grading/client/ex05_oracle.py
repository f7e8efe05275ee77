"""Exercise 5 (the timestamp oracle), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex05_oracle`'s."""
from __future__ import annotations

from ..framework import Exercise
from .vdisk import serving


exercise = Exercise(
    5, "timestamp oracle: ranges and a persisted high-water mark",
    answer="Oracle", graded={"Oracle": ("__init__", "get_timestamp")},
    hidden=("percolator_ref.services.oracle:TimestampOracle",), forbidden_bases=("TimestampOracle",))


class OracleClient:
    """The student's oracle on the world's disk: each call's file operations are messages."""

    def __init__(self, Oracle, cluster, state_path, first, size):
        self.request = cluster.oracle.request
        with serving(self.request):
            self.oracle = Oracle(state_path, first_timestamp=first, range_size=size)

    def get_timestamp(self):
        with serving(self.request):
            return self.oracle.get_timestamp()


@exercise.role("oracle")
def _oracle(Oracle, cluster, state_path, first, size):
    return OracleClient(Oracle, cluster, state_path, first, size)
