"""Exercise 6 (observers), client side: its spec and roles; its checks are
:mod:`percolator_ref.grading.judge.ex06_observers`'s."""
from __future__ import annotations

from percolator_ref.observers import Observer

from ..framework import Exercise


exercise = Exercise(
    6, "observers: acknowledgement and message collapsing", answer="answer",
    graded={"pending_notification": (), "run_observer": ()},
    hidden=("percolator_ref.observers:pending_notification",
            "percolator_ref.observers:run_observer"))


TABLE, COLUMN = "docs", "contents"


class Runner:
    """A worker: the observers ``[[name, registered_ts], ...]`` and the answer's two steps.

    Each observer reads ``docs/<row>.contents`` and writes ``docs/<row>.<name>``
    = upper(value); with ``fail_first`` its first call raises RuntimeError.
    """

    def __init__(self, answer, cluster, observers, fail_first=False):
        self.answer, self.cluster, self.fail = answer, cluster, fail_first
        self.observers = {name: Observer(name, TABLE, COLUMN, self.observer_fn(name), ts)
                          for name, ts in observers}

    def observer_fn(self, name):
        def fn(txn, row, column):
            value = txn.get(row, column, table=TABLE)
            if self.fail:
                self.fail = False
                raise RuntimeError("the observer failed (disk full)")
            txn.set(row, name, str(value).upper(), table=TABLE)
        return fn

    def run(self, name, row, client=None, crash_after=None):
        return self.answer.run_observer(self.cluster, self.observers[name], row, client=client,
                                        crash_after=crash_after)

    def pending(self, name, row):
        return self.answer.pending_notification(self.cluster.begin(), self.observers[name], row)


class Looker(Runner):
    """A transaction begun at construction; ``pending`` asks in its snapshot."""

    def __init__(self, answer, cluster, observers):
        super().__init__(answer, cluster, observers)
        self.txn = cluster.begin()

    def pending(self, name, row):
        return self.answer.pending_notification(self.txn, self.observers[name], row)


@exercise.role("runner")
def _runner(answer, cluster, observers, fail_first=False):
    return Runner(answer, cluster, observers, fail_first)


@exercise.role("looker")
def _looker(answer, cluster, observers):
    return Looker(answer, cluster, observers)


@exercise.role("run")
def _run(answer, cluster, observers, name, row):
    """One call of run_observer (a family's participant)."""
    return Runner(answer, cluster, observers).run(name, row)


@exercise.role("writer")
def _writer(txn_class, cluster, row, column, value):
    """A reference transaction writing one cell (a family's trusted participant); the world's
    observers watch docs/contents, so writing it sets a notification."""
    txn = txn_class(cluster)
    txn.set(row, column, value, table=TABLE)
    return txn.commit()
