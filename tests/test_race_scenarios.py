"""The race steppers of notebooks 3, 4 and 5 (viz.scenarios), driven from code."""
from percolator_ref.viz.frames import stepper_frame
from percolator_ref.viz import observer_race_stepper, oracle_race_stepper, slow_holder_stepper
from percolator_ref.workloads.broken import EarlyCommitTimestamp


def test_cleanup_races_a_slow_holder_both_ways():
    def run(t8_outwaits_ttl):
        s = slow_holder_stepper()
        for _ in range(3):
            s.step("T7")
        s.step("T8")
        first = "T8" if t8_outwaits_ttl else "T7"
        while first in s.runnable:
            s.step(first)
        s.run()
        cleaned = bool((stepper_frame(s.frames).step == "cleanup-primary").any())
        return s.runners[0].result, s.runners[1].result, cleaned, s.cluster.check_history().ok
    assert run(True) == (False, 10, True, True)       # T7 rolled back by the reader
    assert run(False) == (True, 10, False, True)      # T7 commits; the reader's snapshot is older


def test_the_oracle_race_breaks_only_with_the_early_commit_timestamp():
    def run(client_class, order):
        s = oracle_race_stepper(client_class)
        writer, reader = s.runnable
        for who in order:
            s.step(writer if who == "writer" else reader)
        s.run()
        return s.runners[1].result, s.cluster.check_history().names()
    assert run(EarlyCommitTimestamp, ["reader"]) == (10, ["stale read"])
    assert run(EarlyCommitTimestamp, ["writer", "reader"])[1] == []
    assert run(None, ["reader"]) == (10, [])
    assert run(None, ["writer", "reader"])[1] == []


def test_an_observer_run_racing_a_write_leaves_the_write_notified():
    for writer_first in (True, False):
        s = observer_race_stepper()
        observer, writer = s.runnable
        first = writer if writer_first else observer
        while first in s.runnable:
            s.step(first)
        s.run()
        assert s.cluster.begin().get("page", "copy") == 1          # the run's snapshot: 1
        assert len(list(s.cluster.bigtable.notifications())) == 1    # the write still notified
        assert s.cluster.run_observers() == 1
        assert s.cluster.begin().get("page", "copy") == 2
