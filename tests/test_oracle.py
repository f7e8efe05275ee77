"""The timestamp oracle: strictly increasing, restarts never go back, batching."""
import threading
import time

import pytest

from percolator_ref import BatchingOracleClient, TimestampOracle


def test_consecutive_from_first_timestamp():
    oracle = TimestampOracle(first_timestamp=5)
    assert [oracle.get_timestamp() for _ in range(4)] == [5, 6, 7, 8]
    assert oracle.get_timestamps(3) == range(9, 12)
    assert oracle.peek() == 12
    assert oracle.calls == 5


def test_cluster_figure4_timestamps(make_cluster):
    cluster = make_cluster(first_timestamp=5)
    t = cluster.begin()
    t.set("Bob", "bal", 10)
    assert t.commit() and (t.start_ts, t.commit_ts) == (5, 6)
    assert cluster.begin().start_ts == 7


def test_restart_never_goes_back(tmp_path):
    path = tmp_path / "oracle.state"
    handed_out = []
    oracle = TimestampOracle(state_path=path, first_timestamp=1, range_size=10)
    handed_out += [oracle.get_timestamp() for _ in range(25)]     # crosses range boundaries
    assert oracle.range_writes == 3
    del oracle                                                    # abandoned, as after a crash
    for _ in range(3):
        oracle = TimestampOracle(state_path=path, first_timestamp=1, range_size=10)
        fresh = [oracle.get_timestamp() for _ in range(7)]
        assert min(fresh) > max(handed_out)
        handed_out += fresh
    assert handed_out == sorted(set(handed_out))


def test_restart_after_a_batch(tmp_path):
    path = tmp_path / "oracle.state"
    first = TimestampOracle(state_path=path, range_size=4)
    batch = first.get_timestamps(50)                 # larger than a range
    second = TimestampOracle(state_path=path, range_size=4)
    assert second.get_timestamp() > batch[-1]


def test_restart_respects_a_larger_first_timestamp(tmp_path):
    path = tmp_path / "oracle.state"
    TimestampOracle(state_path=path, range_size=10).get_timestamp()
    assert TimestampOracle(state_path=path, first_timestamp=1000).get_timestamp() == 1000


def test_garbage_state_file_is_reported(tmp_path):
    path = tmp_path / "oracle.state"
    path.write_text("not a number")
    with pytest.raises(ValueError, match="state_path"):
        TimestampOracle(state_path=path)


def _run_threads(worker, n):
    """Run ``worker(i)`` for i in range(n), each in its own thread, and wait for all."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_many_threads_get_unique_per_thread_increasing_timestamps():
    oracle = TimestampOracle(range_size=97)
    per_thread = {}

    def worker(i):
        per_thread[i] = [oracle.get_timestamp() for _ in range(2000)]

    _run_threads(worker, 8)
    everything = [ts for stamps in per_thread.values() for ts in stamps]
    assert len(everything) == len(set(everything)) == 16000
    for stamps in per_thread.values():
        assert all(a < b for a, b in zip(stamps, stamps[1:]))
    assert sorted(everything) == list(range(1, 16001))   # no restart: consecutive


class SlowOracle(TimestampOracle):
    """An oracle whose calls take a millisecond, like an RPC, so callers pile up."""

    def get_timestamps(self, n):
        time.sleep(0.001)
        return super().get_timestamps(n)


def test_batching_client_batches_and_stays_unique():
    oracle = SlowOracle()
    client = BatchingOracleClient(oracle)
    per_thread = {}
    start = threading.Barrier(8)

    def worker(i):
        start.wait()
        per_thread[i] = [client.get_timestamp() for _ in range(100)]

    _run_threads(worker, 8)
    everything = [ts for stamps in per_thread.values() for ts in stamps]
    assert len(everything) == len(set(everything)) == 800 == client.served
    for stamps in per_thread.values():
        assert all(a < b for a, b in zip(stamps, stamps[1:]))
    print(f"\nbatching: {client.served} timestamps in {client.requests} oracle calls")
    assert client.requests == oracle.calls
    assert client.requests < client.served            # concurrent callers shared calls


def test_batching_client_alone_makes_one_call_per_timestamp():
    oracle = TimestampOracle(first_timestamp=3)
    client = BatchingOracleClient(oracle)
    assert [client.get_timestamp() for _ in range(3)] == [3, 4, 5]
    assert client.requests == oracle.calls == 3


@pytest.mark.parametrize("kwargs, error", [
    ({"first_timestamp": "1"}, TypeError), ({"first_timestamp": 1.0}, TypeError),
    ({"first_timestamp": True}, TypeError), ({"first_timestamp": -1}, ValueError),
    ({"range_size": 0}, ValueError), ({"state_path": 3}, TypeError)])
def test_bad_oracle_arguments(kwargs, error):
    name = next(iter(kwargs))
    with pytest.raises(error, match=name):
        TimestampOracle(**kwargs)


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_bad_batch_size(n):
    with pytest.raises(ValueError, match="n must"):
        TimestampOracle().get_timestamps(n)


def test_batching_client_hands_an_oracle_failure_to_every_waiting_caller():
    """A failed request must not leave the batch in flight forever: each caller raises."""
    import threading

    from percolator_ref import BatchingOracleClient, StoreUnavailable, TimestampOracle

    class Failing(TimestampOracle):
        fail = True

        def get_timestamps(self, n):
            if self.fail:
                raise StoreUnavailable("oracle down")
            return super().get_timestamps(n)

    oracle = Failing()
    client = BatchingOracleClient(oracle)
    errors = []

    def call():
        try:
            client.get_timestamp()
        except StoreUnavailable as e:
            errors.append(e)
    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads) and len(errors) == 6
    oracle.fail = False
    assert client.get_timestamp() == 1           # the client recovers


def test_batching_client_hands_an_interrupt_of_the_leader_to_every_waiter():
    """Issue 21: a KeyboardInterrupt (any BaseException) in the leading caller's request
    reaches every caller of its batch; nobody waits forever, and later callers are served."""
    from percolator_ref import BatchingOracleClient, TimestampOracle

    class Interrupted(TimestampOracle):
        def __init__(self):
            super().__init__()
            self.release, self.entered, self.requests_seen = threading.Event(), threading.Event(), 0

        def get_timestamps(self, n):
            self.requests_seen += 1
            if self.requests_seen == 1:          # the first request is held: a batch queues up
                self.entered.set()
                self.release.wait(10)
            elif self.requests_seen == 2:        # that batch's request is interrupted
                raise KeyboardInterrupt("Stop pressed in the leader")
            return super().get_timestamps(n)

    oracle = Interrupted()
    client = BatchingOracleClient(oracle)
    outcomes = {}

    def call(name):
        try:
            outcomes[name] = client.get_timestamp()
        except BaseException as e:              # noqa: BLE001 - what each caller got
            outcomes[name] = type(e)
    first = threading.Thread(target=call, args=("first",))
    first.start()
    assert oracle.entered.wait(10)
    batch = [threading.Thread(target=call, args=(f"b{i}",)) for i in range(3)]
    for t in batch:
        t.start()
    deadline = time.monotonic() + 10
    while client._waiting < 3 and time.monotonic() < deadline:   # noqa: SLF001 - test sync
        time.sleep(0.01)
    oracle.release.set()
    for t in [first] + batch:
        t.join(10)
    assert not any(t.is_alive() for t in [first] + batch), "a caller waits forever"
    assert isinstance(outcomes.pop("first"), int)
    assert outcomes == {f"b{i}": KeyboardInterrupt for i in range(3)}
    later = threading.Thread(target=call, args=("later",))
    later.start()
    later.join(10)
    assert not later.is_alive() and isinstance(outcomes["later"], int)
