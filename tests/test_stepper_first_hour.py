"""The stepper defects a first hour met (issue 28, item 6), each driven as a student would."""
from __future__ import annotations

import threading

import pytest

from percolator_ref.commands import main
from percolator_ref.viz import figure4_stepper, two_transfers_stepper

pytest.importorskip("ipywidgets")


def click_on_a_new_thread(widget, label: str) -> None:
    """JupyterLab's kernel may deliver a widget's click on a thread other than the one that
    ran the cell (ipykernel 7): click as that thread would, and re-raise what it raised."""
    raised = []

    def click():
        try:
            widget.click(label)
        except BaseException as exc:       # noqa: BLE001 - handed to the test's thread
            raised.append(exc)
    thread = threading.Thread(target=click)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    if raised:
        raise raised[0]


def test_reset_then_step_on_another_thread_steps():
    s = figure4_stepper()
    s.run()
    w = s.widget()
    try:
        w.click("Reset")                             # the cell's thread
        click_on_a_new_thread(w, "Step")             # another one
        assert "frame 1: T7 get Bob" in w.note.value, w.note.value
        assert "different thread" not in w.status.value, w.status.value
        click_on_a_new_thread(w, "Step")             # yet another (its id may be reused)
        assert "frame 2: T7 get Joe" in w.note.value and s.cursor == 2
        click_on_a_new_thread(w, "Crash client")
        assert "T7 crashes" in w.note.value
        w.click("Step")                              # and back on the cell's thread
        assert s.cursor == 4 and "different thread" not in w.status.value
        assert [f.title for f in s.frames[:3]] == ["frame 0: initial state", "frame 1: T7 get Bob",
                                                   "frame 2: T7 get Joe"]
    finally:
        s.close()


def test_notebook_09_after_crashing_the_reader_the_writer_steps_to_a_clean_end():
    from percolator_ref.variants.rollback_records import RollbackRecords
    from percolator_ref.workloads import tikv
    s = tikv.late_prewrite_stepper(lambda: [RollbackRecords()])
    w = s.widget()
    try:
        for who, label in [("T7", "Step"), ("T7", "Step"), ("T8", "Step"), ("T8", "Crash client")]:
            w.choice.value = who
            w.click(label)
        # T8 met T7's lock on Joe and backed off: what it was about to run is a retry
        assert "right after its get of Joe (its retry of that get never runs)" in w.note.value
        for _ in range(10):
            assert not w.step_button.disabled        # T7 always has a next step
            w.click("Step")
            if not s.frame.runnable:
                break
        assert "writer finished: aborted" in w.note.value
        assert "abort-rollback" in [e.step.value for f in s.frames for e in f.events]
        locks = [s.cluster.bigtable.versions("default", row, "bal:lock") for row in ("Bob", "Joe")]
        assert locks == [[], []], "the aborted writer left its locks, and nobody cleans them up"
        assert s.cluster.check_history().ok
    finally:
        s.close()


@pytest.mark.parametrize("after, says, never", [
    (4, "T7 did not commit, and the cleaner rolled it back", "T7 committed"),
    (5, "T7 committed, and the cleaner rolled its secondaries forward", "did not commit"),
    (1, "T7 crashed before writing anything", "committed,")])
def test_demo_crash_ends_with_what_happened(capsys, after, says, never):
    assert main(["demo", "crash", "--after", str(after)]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("Outcome: ") and says in last and never not in last, last
    assert not last.endswith("finished: committed.")


def test_the_status_line_names_no_internal_attribute():
    s = two_transfers_stepper()
    w = s.widget()
    try:
        for _ in range(3):
            w.click("Step")
        w.click("Back")
        w.choice.value = "T8"
        w.click("Step")                              # a new branch
        assert "a new branch from frame 2" in w.status.value
        assert "stepper." not in w.status.value and "abandoned" not in w.status.value
    finally:
        s.close()
