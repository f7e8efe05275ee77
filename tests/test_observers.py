"""Observers and notifications (paper section 2.4): one scenario per test."""
import threading
import time

import pytest

from percolator_ref import ClientCrash, ObserverLoopError, WallClock
from percolator_ref.observers import clear_notification, process_notification, run_observer
from percolator_ref.observers.worker import Worker, wait_until_quiet


def write(cluster, row, column, value, table="default"):
    t = cluster.begin()
    t.set(row, column, value, table)
    assert t.commit()
    return t


def read(cluster, row, column, table="default"):
    return cluster.begin().get(row, column, table)


def notify_versions(cluster, row, column, table="default"):
    return [ts for ts, _ in cluster.bigtable.versions(table, row, f"{column}:notify")]


def ack_start(cluster, row, column, name, table="default"):
    """The committed ack's value (the start_ts of the observer's last run)."""
    versions = cluster.bigtable.versions(table, row, f"{column}:ack_{name}:write")
    if not versions:
        return None
    start = versions[0][1].start_ts
    assert cluster.bigtable.versions(table, row, f"{column}:ack_{name}:data")[0] == (start, start)
    return start


def copier(cluster, src, dst, calls=None, table="default"):
    """Register an observer copying column ``src`` to ``dst`` (recording its calls)."""
    def observer(txn, row, column):
        if calls is not None:
            calls.append((row, txn.start_ts))
        txn.set(row, dst, txn.get(row, column, table), table)
    observer.__name__ = f"copy_{src}_{dst}"
    cluster.observe(table, src)(observer)
    return observer


def test_observed_write_sets_notify_at_commit_ts(make_cluster):
    c = make_cluster()
    copier(c, "a", "b")
    t = write(c, "r", "a", "x")
    assert notify_versions(c, "r", "a") == [t.commit_ts]
    assert list(c.bigtable.notifications()) == [("default", "r", "a")]


def test_chain_of_observers_runs_in_one_call(make_cluster):
    c = make_cluster()
    copier(c, "a", "b")
    copier(c, "b", "c")
    copier(c, "c", "d")
    write(c, "r", "a", "x")
    assert c.run_observers() == 3
    assert [read(c, "r", col) for col in "abcd"] == ["x"] * 4
    assert list(c.bigtable.notifications()) == []


def test_exact_cells_of_one_run(make_cluster):
    c = make_cluster(first_timestamp=1)
    copier(c, "a", "b")
    write(c, "r", "a", "x")               # start 1, commit 2: notify @ 2
    assert c.run_observers() == 1         # run: start 3, commit 4
    assert ack_start(c, "r", "a", "copy_a_b") == 3
    assert c.bigtable.versions("default", "r", "a:ack_copy_a_b:write")[0][0] == 4
    assert notify_versions(c, "r", "a") == []      # erased after the commit
    assert c.bigtable.versions("default", "r", "b:data") == [(3, "x")]


def test_several_writes_collapse_into_one_run(make_cluster):
    c = make_cluster()
    calls = []
    copier(c, "a", "b", calls)
    for value in ("v1", "v2", "v3"):
        write(c, "r", "a", value)
    assert len(notify_versions(c, "r", "a")) == 3
    assert c.run_observers() == 1
    assert len(calls) == 1 and read(c, "r", "b") == "v3"
    assert notify_versions(c, "r", "a") == []


def test_acknowledged_write_does_not_run_again(make_cluster):
    c = make_cluster()
    calls = []
    copier(c, "a", "b", calls)
    write(c, "r", "a", "x")
    assert c.run_observers() == 1
    # a stale notify left behind (as after a crash before clearing) is just cleared
    c.bigtable.write("default", "r", "a:notify", True, 2)
    assert c.run_observers() == 0
    assert len(calls) == 1 and notify_versions(c, "r", "a") == []


def test_new_write_after_a_run_triggers_again(make_cluster):
    c = make_cluster()
    calls = []
    copier(c, "a", "b", calls)
    write(c, "r", "a", "x")
    c.run_observers()
    write(c, "r", "a", "y")
    assert c.run_observers() == 1
    assert len(calls) == 2 and read(c, "r", "b") == "y"
    assert ack_start(c, "r", "a", "copy_a_b") == calls[-1][1]


def test_delete_is_a_write_and_triggers(make_cluster):
    c = make_cluster()
    seen = []
    c.observe("default", "a")(lambda txn, row, col: seen.append(txn.get(row, col)))
    write(c, "r", "a", "x")
    c.run_observers()
    t = c.begin()
    t.delete("r", "a")
    assert t.commit()
    assert c.run_observers() == 1
    assert seen == ["x", None]


def test_weak_notification_triggers_without_a_write(make_cluster):
    c = make_cluster()
    runs = []

    @c.observe("default", "dirty")
    def refresh(txn, row, column):
        runs.append(row)
        txn.set(row, "fresh", txn.start_ts)

    t = c.begin()
    t.notify("r", "dirty")
    assert t.commit() and t.commit_ts is not None
    assert c.bigtable.versions("default", "r", "dirty:write") == []     # no write at all
    assert notify_versions(c, "r", "dirty") == [t.commit_ts]
    assert c.run_observers() == 1 and runs == ["r"]


def test_weak_notifications_do_not_conflict(make_cluster):
    c = make_cluster()
    c.observe("default", "dirty")(lambda txn, row, col: None)
    t1, t2 = c.begin(), c.begin()
    t1.notify("r", "dirty")
    t2.notify("r", "dirty")
    t2.set("r", "x", 1)
    assert t1.commit() and t2.commit()
    assert notify_versions(c, "r", "dirty") == [t2.commit_ts, t1.commit_ts]


def test_observer_registered_after_the_write_is_not_triggered(make_cluster):
    c = make_cluster()
    early = []
    c.observe("default", "a", name="early")(lambda txn, row, col: early.append(row))
    write(c, "r", "a", "x")                              # notify for "early" only
    late = []
    c.observe("default", "a", name="late")(lambda txn, row, col: late.append(row))
    assert c.run_observers() == 1
    assert early == ["r"] and late == []
    write(c, "r", "a", "y")
    assert c.run_observers() == 2 and late == ["r"]


def test_write_to_unobserved_column_sets_no_notify(make_cluster):
    c = make_cluster()
    write(c, "r", "a", "x")
    assert notify_versions(c, "r", "a") == [] and c.run_observers() == 0


def test_weak_notification_of_unobserved_column_is_cleared(make_cluster):
    c = make_cluster()
    t = c.begin()
    t.notify("r", "nobody")
    t.commit()
    assert c.run_observers() == 0
    assert list(c.bigtable.notifications()) == []


def test_two_observers_of_one_column_each_acknowledge(make_cluster):
    c = make_cluster()
    copier(c, "a", "b")
    copier(c, "a", "c")
    write(c, "r", "a", "x")
    assert c.run_observers() == 2
    assert ack_start(c, "r", "a", "copy_a_b") is not None
    assert ack_start(c, "r", "a", "copy_a_c") is not None
    assert read(c, "r", "b") == read(c, "r", "c") == "x"


def test_notify_kept_until_every_observer_acknowledged(make_cluster):
    c = make_cluster()
    copier(c, "a", "b")
    second = copier(c, "a", "c")
    write(c, "r", "a", "x")
    observer = next(o for o in c.observers.for_column("default", "a") if o.fn is second)
    assert run_observer(c, c.observers.for_column("default", "a")[0], "r")
    assert clear_notification(c, "default", "r", "a") is False      # "c" not run yet
    assert notify_versions(c, "r", "a") != []
    assert run_observer(c, observer, "r")
    assert clear_notification(c, "default", "r", "a") is True


def test_newer_notification_survives_clearing(make_cluster):
    c = make_cluster()
    calls = []
    copier(c, "a", "b", calls)
    write(c, "r", "a", "x")
    observer = c.observers.for_column("default", "a")[0]
    assert run_observer(c, observer, "r")
    later = write(c, "r", "a", "y")           # arrives between the run and the clearing
    clear_notification(c, "default", "r", "a")
    assert notify_versions(c, "r", "a") == [later.commit_ts]
    assert c.run_observers() == 1 and read(c, "r", "b") == "y"


def test_notify_and_ack_columns_are_hidden_from_get_and_scan(make_cluster):
    c = make_cluster()
    copier(c, "a", "b")
    write(c, "r", "a", "x")
    write(c, "s", "a", "y")
    c.run_observers()
    write(c, "s", "a", "z")                   # a pending notify on s
    t = c.begin()
    assert t.scan() == [("r", "a", "x"), ("r", "b", "x"), ("s", "a", "z"), ("s", "b", "y")]
    assert t.get("r", "a") == "x"


def test_observer_exception_propagates_and_keeps_notification(make_cluster):
    c = make_cluster()
    fail = [True]

    @c.observe("default", "a")
    def flaky(txn, row, column):
        txn.set(row, "b", "written")
        if fail[0]:
            raise RuntimeError("observer bug")

    write(c, "r", "a", "x")
    with pytest.raises(RuntimeError, match="observer bug"):
        c.run_observers()
    assert read(c, "r", "b") is None
    assert c.bigtable.versions("default", "r", "b:lock") == []
    assert ack_start(c, "r", "a", "flaky") is None
    assert list(c.bigtable.notifications()) == [("default", "r", "a")]
    fail[0] = False
    assert c.run_observers() == 1 and read(c, "r", "b") == "written"


def test_max_runs_bounds_a_self_triggering_loop(make_cluster):
    c = make_cluster()

    @c.observe("default", "n")
    def again(txn, row, column):
        txn.set(row, column, txn.get(row, column) + 1)

    write(c, "r", "n", 0)
    with pytest.raises(ObserverLoopError):
        c.run_observers(max_runs=5)
    assert read(c, "r", "n") == 5             # exactly five runs committed


def test_max_runs_not_passed_returns_normally(make_cluster):
    c = make_cluster()
    copier(c, "a", "b")
    write(c, "r", "a", "x")
    assert c.run_observers(max_runs=1) == 1


@pytest.mark.parametrize("bad, error", [("3", TypeError), (True, TypeError), (-1, ValueError)])
def test_bad_max_runs_is_rejected(make_cluster, bad, error):
    c = make_cluster()
    with pytest.raises(error, match="max_runs"):
        c.run_observers(max_runs=bad)


def test_bad_registrations_are_rejected(make_cluster):
    c = make_cluster()
    with pytest.raises(TypeError, match="fn"):
        c.observers.add("default", "a", "not callable")
    with pytest.raises(ValueError, match="column"):
        c.observe("default", "a:b")(lambda txn, row, col: None)
    with pytest.raises(ValueError, match="name"):
        c.observe("default", "a", name="x:y")(lambda txn, row, col: None)
    c.observe("default", "a", name="o")(lambda txn, row, col: None)
    with pytest.raises(ValueError, match="name"):
        c.observe("default", "a", name="o")(lambda txn, row, col: None)


def test_conflicting_runs_of_one_notification_only_one_commits(make_cluster):
    """A second run starts and commits while the first is between check and commit."""
    c = make_cluster()
    calls = []

    @c.observe("default", "a")
    def log(txn, row, column):
        calls.append(txn.start_ts)
        txn.set(f"run{txn.start_ts}", "log", "ran")     # disjoint writes: only the ack conflicts

    write(c, "r", "a", "x")
    observer = c.observers.for_column("default", "a")[0]
    inner = []

    def race():
        if not inner:
            inner.append(run_observer(c, observer, "r"))   # the other run, start to commit

    outer = run_observer(c, observer, "r", before_run=race)
    assert inner == [True] and outer is False
    inner_start, outer_start = calls                        # both ran the function...
    assert inner_start > outer_start
    logged = [row for row, col, _ in c.begin().scan() if col == "log"]
    assert logged == [f"run{inner_start}"]                  # ...only the inner one committed
    assert ack_start(c, "r", "a", "log") == inner_start


def test_concurrent_runs_in_threads_only_one_commits():
    from percolator_ref import Cluster
    c = Cluster(clock=WallClock())
    barrier = threading.Barrier(2, timeout=10)

    @c.observe("default", "a")
    def log(txn, row, column):
        txn.set(f"run{txn.start_ts}", "log", "ran")
        barrier.wait()                                       # both runs are in flight

    write(c, "r", "a", "x")
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        process_notification(c, ("default", "r", "a")))) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [0, 1]
    assert len([1 for _, col, _ in c.begin().scan() if col == "log"]) == 1


@pytest.mark.parametrize("crash_after", ["prewrite-primary", "prewrite", 1, 2])
def test_run_crashed_before_commit_point_runs_again(make_cluster, crash_after):
    c = make_cluster()
    calls = []
    copier(c, "a", "b", calls)
    t = c.begin()
    t.set("r", "a", "x")
    t.set("r", "z", "other")
    assert t.commit()
    with pytest.raises(ClientCrash):
        process_notification(c, ("default", "r", "a"), crash_after=crash_after)
    assert list(c.bigtable.notifications()) == [("default", "r", "a")]   # not lost
    c.clock.advance(c.lock_ttl + 1)
    assert c.run_observers() == 1                   # cleaned up and ran again
    # the crashed run's locks are cleaned up lazily (a retry may first abort on one)
    assert len(calls) >= 2 and read(c, "r", "b") == "x"
    assert ack_start(c, "r", "a", "copy_a_b") == calls[-1][1]
    assert c.bigtable.versions("default", "r", "a:ack_copy_a_b:lock") == []
    assert c.check_history().ok


def test_run_crashed_after_commit_point_is_rolled_forward_not_rerun(make_cluster):
    c = make_cluster()
    calls = []
    copier(c, "a", "b", calls)
    write(c, "r", "a", "x")
    with pytest.raises(ClientCrash):
        process_notification(c, ("default", "r", "a"), crash_after="commit-primary")
    assert c.bigtable.versions("default", "r", "b:lock") != []          # secondary locked
    assert c.run_observers() == 0                   # the run committed: nothing to redo
    assert len(calls) == 1 and read(c, "r", "b") == "x"
    assert c.bigtable.versions("default", "r", "b:lock") == []
    assert list(c.bigtable.notifications()) == []
    assert c.check_history().ok


# -- the worker: scanner threads and a thread pool -------------------------------

def _load_rows(cluster, rows, loaders=3):
    def load(part):
        for row in part:
            write(cluster, row, "in", row)
    threads = [threading.Thread(target=load, args=(rows[i::loaders],)) for i in range(loaders)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def test_scanner_threads_process_every_notification_exactly_once_in_effect():
    from percolator_ref import Cluster
    c = Cluster(clock=WallClock())
    buckets = 4

    @c.observe("default", "in")
    def count(txn, row, column):
        txn.set(row, "out", txn.get(row, column))
        txn.set(row, "runs", (txn.get(row, "runs") or 0) + 1)
        bucket = f"bucket{hash(row) % buckets}"          # contended: forces retries
        txn.set(bucket, "total", (txn.get(bucket, "total") or 0) + 1)

    rows = [f"r{i:03d}" for i in range(120)]
    workers = [Worker(c, scanners=3, threads=3, seed=s) for s in range(2)]
    for w in workers:
        w.start()
    try:
        _load_rows(c, rows)
        assert wait_until_quiet(c, workers, timeout=120)
    finally:
        for w in workers:
            w.stop()
    assert not any(w.errors for w in workers)
    snapshot = {(row, col): v for row, col, v in c.begin().scan()}
    assert all(snapshot[(row, "out")] == row and snapshot[(row, "runs")] == 1 for row in rows)
    assert sum(snapshot[(f"bucket{b}", "total")] for b in range(buckets)
               if (f"bucket{b}", "total") in snapshot) == len(rows)
    assert sum(w.runs for w in workers) == len(rows)
    assert c.check_history().ok


def test_scanner_jumps_away_from_a_claimed_region():
    from percolator_ref import Cluster
    c = Cluster(clock=WallClock())
    copier(c, "a", "b")
    rows = [f"r{i}" for i in range(10)]
    for row in rows:
        write(c, row, "a", row)
    c.lockservice.register("other-scanner")
    for row in rows[:5]:                      # another scanner holds these regions
        assert c.lockservice.try_acquire(f"scan:default/{row}", "other-scanner")
    worker = Worker(c, scanners=2, threads=2, seed=1).start()
    try:
        deadline = time.monotonic() + 60
        while not all(read(c, row, "b") for row in rows[5:]) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert all(read(c, row, "b") is None for row in rows[:5])   # claimed: skipped
        assert worker.jumps > 0
        for row in rows[:5]:
            c.lockservice.release_lock(f"scan:default/{row}", "other-scanner")
        assert wait_until_quiet(c, [worker], timeout=60)
    finally:
        worker.stop()
    assert all(read(c, row, "b") == row for row in rows)


def test_worker_rejects_bad_arguments(make_cluster):
    c = make_cluster()
    with pytest.raises(ValueError, match="scanners"):
        Worker(c, scanners=0)
    with pytest.raises(TypeError, match="threads"):
        Worker(c, threads="4")
