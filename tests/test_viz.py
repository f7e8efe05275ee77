"""Cell tables, the deterministic stepper and its widget (no browser)."""
import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.viz import (CellTable, Stepper, Table, figure4_setup, figure4_stepper,
                                transfer, two_transfers_stepper)


@pytest.fixture
def stepper():
    s = figure4_stepper()
    yield s
    s.close()


def cell(frame, row, column):
    return frame.table.cell_text("default", row, column)


# -- CellTable -------------------------------------------------------------------

def test_cell_table_lists_versions_newest_first_as_ts_colon_value():
    cluster = Cluster(first_timestamp=5, clock=ManualClock())
    figure4_setup(cluster)
    table = CellTable.from_cluster(cluster)
    assert table.columns == ["bal:data", "bal:lock", "bal:write"]
    assert table.cell_text("default", "Bob", "bal:data") == "5: 10"
    assert table.cell_text("default", "Bob", "bal:write") == "6: data @ 5"
    assert table.cell_text("default", "Bob", "bal:lock") == ""


def test_cell_table_html_and_text_are_deterministic_and_mark_the_last_step():
    cluster = Cluster(first_timestamp=5, clock=ManualClock())
    figure4_setup(cluster)
    t = cluster.begin()
    t.set("Bob", "bal", 3)
    with cluster.tracer.record() as events:
        t.commit()
    table = CellTable.from_cluster(cluster, events)
    again = CellTable.from_cluster(cluster, events)
    assert table._repr_html_() == again._repr_html_()
    assert "<b>8: data @ 7</b>" in table._repr_html_()
    assert "<s" in table._repr_html_() and "7: I am primary" in table._repr_html_()
    assert "*8: data @ 7*" in repr(table)
    assert "~7: I am primary~" in repr(table)
    assert "0x" not in repr(table)


def test_cell_table_shows_notify_and_ack_columns_when_present():
    cluster = Cluster(first_timestamp=1, clock=ManualClock())
    t = cluster.begin()
    t.set("doc", "body", "hi")
    t.notify("doc", "body")
    t.commit()
    cluster.bigtable.write("default", "doc", "body:ack_O", 1, 3)
    table = CellTable.from_cluster(cluster)
    assert table.columns == ["body:data", "body:lock", "body:write", "body:notify", "body:ack_O"]


def observed_write_and_run():
    """A write to an observed cell, then the observer's run recorded as the step."""
    cluster = Cluster(first_timestamp=1, clock=ManualClock())

    @cluster.observe("default", "body")
    def copy(txn, row, column):
        txn.set(row, "copy", txn.get(row, column))
    t = cluster.begin()
    t.set("doc", "body", "hi")
    t.set("other", "body", "untouched by the run")
    t.commit()
    from percolator_ref.observers import process_notification
    with cluster.tracer.record() as events:
        process_notification(cluster, ("default", "doc", "body"))
    return cluster, events


def test_touched_cell_table_shows_only_the_columns_and_rows_the_step_changed():
    cluster, events = observed_write_and_run()
    full = CellTable.from_cluster(cluster, events)
    touched = CellTable.from_cluster(cluster, events, columns="touched")
    assert touched.columns == ["body:notify", "body:ack_copy:data", "body:ack_copy:lock",
                               "body:ack_copy:write", "copy:data", "copy:lock", "copy:write"]
    assert touched.rows == [("default", "doc")]                 # "other" was not touched
    assert set(touched.hidden_columns) == {"body:data", "body:lock", "body:write"}
    assert set(full.columns) == set(touched.columns) | set(touched.hidden_columns)
    assert "~2: True~" in repr(touched)                         # the notify it cleared
    assert "3 other columns hidden; .all_columns() shows them" in repr(touched)
    assert "body:data" not in repr(touched) and "body:data" in repr(full)
    assert "3 other columns hidden" in touched._repr_html_()


def test_all_columns_gives_back_the_full_figure4_table():
    cluster, events = observed_write_and_run()
    touched = CellTable.from_cluster(cluster, events, title="run", columns="touched")
    full = CellTable.from_cluster(cluster, events, title="run")
    assert repr(touched.all_columns()) == repr(full)
    assert touched.all_columns()._repr_html_() == full._repr_html_()
    assert "hidden" not in repr(full)


def test_cell_table_columns_argument_is_checked():
    with pytest.raises(ValueError, match="columns"):
        CellTable({}, columns="some")


def test_cell_table_rejects_a_non_dict_dump():
    with pytest.raises(TypeError, match="dump"):
        CellTable([("Bob", 1)])


def test_table_renders_rows_and_rejects_ragged_rows():
    t = Table(["anomaly", "outcome"], [("G0", "prevented"), {"anomaly": "G2-item",
                                                               "outcome": "allowed"}])
    assert "G2-item  allowed" in repr(t)
    assert "<td" in t._repr_html_() and t.column("outcome") == ["prevented", "allowed"]
    with pytest.raises(ValueError, match="rows"):
        Table(["a", "b"], [(1,)])


# -- Stepper: Figure 4 --------------------------------------------------------------

def test_figure4_frames_are_one_row_transaction_each_in_protocol_order(stepper):
    stepper.run()
    steps = [(f.actor, f.events[0].step, f.events[0].row) for f in stepper.frames[1:]]
    assert steps == [("T7", "get", "Bob"), ("T7", "get", "Joe"),
                     ("T7", "prewrite-primary", "Bob"), ("T7", "prewrite-secondary", "Joe"),
                     ("T7", "commit-primary", "Bob"), ("T7", "commit-secondary", "Joe")]
    assert all(len(f.events) == 1 for f in stepper.frames[1:])


def test_figure4_frames_show_the_papers_cells(stepper):
    stepper.run()
    f = stepper.frames
    assert cell(f[3], "Bob", "bal:lock") == "7: I am primary"
    assert cell(f[3], "Bob", "bal:data") == "7: 3\n5: 10"
    assert cell(f[4], "Joe", "bal:lock") == "7: primary @ Bob.bal"
    assert cell(f[5], "Bob", "bal:write") == "8: data @ 7\n6: data @ 5"
    assert cell(f[5], "Bob", "bal:lock") == "" and cell(f[5], "Joe", "bal:lock") != ""
    assert cell(f[6], "Joe", "bal:write") == "8: data @ 7\n6: data @ 5"
    assert "no lock" in f[4].note and "primary Bob.bal" in f[4].note
    assert "commit point" in f[5].note


def test_back_shows_the_stored_frame_exactly_and_step_forward_reuses_it(stepper):
    for _ in range(4):
        stepper.step()
    shown = repr(stepper.frame)
    stepper.back()
    assert stepper.cursor == 3
    stepper.step()
    assert repr(stepper.frame) == shown and len(stepper.frames) == 5


def test_reset_replays_identically(stepper):
    stepper.run()
    first = stepper.transcript()
    stepper.reset()
    assert len(stepper.frames) == 1
    stepper.run()
    assert stepper.transcript() == first


def test_bad_choice_names_the_argument(stepper):
    with pytest.raises(ValueError, match="who"):
        stepper.step("T99")
    with pytest.raises(TypeError, match="who"):
        stepper.step(7)
    with pytest.raises(ValueError, match="index"):
        stepper.goto(5)


def test_scripts_must_be_callable():
    with pytest.raises(TypeError, match="scripts"):
        Stepper({"x": 3})


# -- crashes -------------------------------------------------------------------------

@pytest.mark.parametrize("before, cleanup, committed", [
    (3, [], False),                                  # crashed before writing anything
    (4, ["cleanup-primary"], False),                 # only the primary locked
    (5, ["cleanup-primary", "roll-back"], False),    # both locked, no commit point
    (6, ["cleanup-primary", "roll-forward"], True),  # primary committed
])
def test_crash_then_the_cleaner_rolls_forward_or_back(stepper, before, cleanup, committed):
    for _ in range(before - 1):
        stepper.step()
    crashed = stepper.crash()
    assert crashed.action == "crash" and "crashed" in crashed.note
    stepper.run()
    steps = [e.step for f in stepper.frames[before:] for e in f.events
             if e.step not in ("scan", "get")]
    assert sorted(set(steps)) == cleanup
    final = stepper.frames[-1]
    assert cell(final, "Bob", "bal:lock") == "" and cell(final, "Joe", "bal:lock") == ""
    assert cell(final, "Joe", "bal:write").startswith("8: data @ 7") == committed
    assert cell(final, "Bob", "bal:write").startswith("8: data @ 7") == committed
    assert stepper.cluster.lockservice.status("T7") == "crashed"


def test_crash_from_an_earlier_frame_replays_then_branches(stepper):
    stepper.run()
    stepper.goto(5)
    stepper.crash()
    assert len(stepper.frames) == 7 and stepper.frames[6].action == "crash"
    stepper.run()
    assert "roll-forward" in [e.step for f in stepper.frames for e in f.events]


# -- two transactions -------------------------------------------------------------------

def test_two_transfers_the_waiting_reader_backs_off_on_the_manual_clock():
    s = two_transfers_stepper()
    try:
        s.step("T7"), s.step("T7"), s.step("T7")        # T7 locks Bob
        s.step("T8")                                    # T8 reads Joe
        waiting = s.step("T8")                          # T8 meets T7's lock on Bob
        assert "lock by T7" in waiting.note and "backs off" in waiting.note
        assert waiting.clock > 0
        s.run()                                         # default choice lets T7 go first
        assert "T7: committed" in s.frame.status and "T8: aborted" in s.frame.status
    finally:
        s.close()


def test_a_commit_wait_is_named_as_one_not_as_a_backoff():
    from percolator_ref.variants.truetime import SpannerTimestamps, truetime_source
    s = Stepper({"t": transfer}, setup=figure4_setup,
                make_cluster=lambda: Cluster(clock=ManualClock(), variants=[SpannerTimestamps()]))
    try:
        s.run()
        waited_us = truetime_source(s.cluster).waits.commit[-1]       # [0] is the setup's
        before_commit = next(f for f in s.frames if "commit wait" in f.note)
        after = s.frames[before_commit.index + 1]
        assert [e.step for e in after.events] == ["commit-primary"]     # the wait came first
        assert "backs off" not in " ".join(f.note for f in s.frames)
        assert f"waits {waited_us / 1e6:g} s on the clock" in before_commit.note
        assert f"commit timestamp {s.cluster.history.records[-1].commit_ts}" in before_commit.note
        assert "clock advanced" not in before_commit.note                # nothing unexplained
    finally:
        s.close()


def test_a_clock_advance_that_no_wait_reports_is_stated_without_a_reason():
    def dawdle(cluster):
        t = cluster.begin()
        bob = t.get("Bob", "bal")
        cluster.clock.advance(0.5)                  # not a backoff: the script just took time
        t.set("Bob", "bal", bob + 1)
        return t.commit()
    s = Stepper({"dawdle": dawdle}, setup=figure4_setup)
    try:
        moved = s.step()
        assert "backs off" not in moved.note and "waits" not in moved.note
        assert moved.note.endswith("The clock advanced 0.5 s during T7's move (now 0.5 s).")
    finally:
        s.close()


def test_the_tracer_reports_waits_only_to_their_subscribers():
    cluster = Cluster(first_timestamp=5, clock=ManualClock())
    seen = []
    def heard(client, seconds, verb, purpose):
        seen.append((client, seconds))
    cluster.tracer.wait_subscribers.append(heard)
    with cluster.tracer.record() as events:
        cluster.tracer.waited("T7", 0.25, "backs off", "before trying again")
    cluster.tracer.wait_subscribers.remove(heard)
    cluster.tracer.waited("T7", 1.0, "backs off", "before trying again")
    assert seen == [("T7", 0.25)] and events == []       # not a row transaction event


def test_a_live_lock_holder_that_never_moves_is_judged_dead_after_the_ttl():
    def make():
        return Cluster(first_timestamp=5, clock=ManualClock(), lock_ttl=1.0)
    s = Stepper({"a": transfer, "b": transfer}, setup=figure4_setup, make_cluster=make)
    try:
        for _ in range(3):
            s.step("T7")
        for _ in range(40):
            if "T8" not in s.runnable:
                break
            s.step("T8")
        steps = [e.step for f in s.frames for e in f.events if e.client == "T8"]
        assert "cleanup-primary" in steps          # T7 went quiet past the TTL
        assert s.cluster.clock.now() > 1.0
    finally:
        s.close()


# -- the widget ------------------------------------------------------------------------------

def test_widget_buttons_step_back_reset_and_crash():
    pytest.importorskip("ipywidgets")
    s = figure4_stepper()
    w = s.widget()
    try:
        labels = [b.description for b in (w.step_button, w.back_button, w.reset_button,
                                          w.crash_button)]
        assert labels == ["Step", "Back", "Reset", "Crash client"]
        for _ in range(3):
            w.step_button.click()
        assert "I am primary" in w.table.value and w.slider.value == 3
        w.step_button.click(), w.step_button.click()
        assert "data @ 7" in w.table.value
        w.back_button.click()
        assert w.slider.value == 4 and "data @ 7" not in w.table.value
        w.slider.value = 1
        assert s.cursor == 1
        w.reset_button.click()
        assert w.slider.max == 0 and "I am primary" not in w.table.value
        w.click("Step"), w.click("Step"), w.click("Step"), w.click("Step")
        w.click("Crash client")
        assert "crashed" in w.note.value and w.choice.options == ("T9",)
        for _ in range(20):
            if w.step_button.disabled:
                break
            w.click("Step")
        assert "roll-back" in [e.step for f in s.frames for e in f.events]
        assert repr(w) == (f"Cell-table stepper at {s.frame.title}: run this cell for its "
                           "buttons (Step, Back, Reset).")
    finally:
        s.close()


def test_widget_choice_picks_who_moves():
    pytest.importorskip("ipywidgets")
    s = two_transfers_stepper()
    w = s.widget()
    try:
        assert w.choice.options == ("T7", "T8")
        w.choice.value = "T8"
        w.click("Step")
        assert s.frame.actor == "T8"
    finally:
        s.close()


# -- branching: back, then another choice -------------------------------------------------

def test_stepping_another_transaction_from_an_earlier_frame_forks_the_history():
    s = two_transfers_stepper()
    for _ in range(3):
        s.step("T7")                                    # T7 gets Bob, gets Joe, locks Bob
    old = list(s.frames)
    s.back()
    branch = s.step("T8")                               # at frame 2, T8 moves instead
    assert [repr(f) for f in s.frames[:3]] == [repr(f) for f in old[:3]]
    assert len(s.frames) == 4 and branch.index == 3 and branch.actor == "T8"
    assert branch.title == "frame 3: T8 get Joe"
    assert cell(branch, "Bob", "bal:lock") == ""       # the new branch: T7 never locked Bob
    assert cell(old[3], "Bob", "bal:lock") != ""
    assert s.abandoned == [(2, (old[3],))]
    fresh = two_transfers_stepper()                     # the branch is what that schedule gives
    for who in ["T7", "T7", "T8"]:
        fresh.step(who)
    assert fresh.transcript() == s.transcript()
    s.run()
    assert "T7: committed" in s.frame.status or "T8: committed" in s.frame.status
    s.reset()
    assert s.abandoned == [] and len(s.frames) == 1


def test_a_branch_that_cannot_move_there_is_refused_before_forking():
    s = two_transfers_stepper()
    s.run()                                             # T7 commits, T8 aborts
    s.goto(0)
    frames = list(s.frames)
    with pytest.raises(ValueError, match="who='nobody'"):
        s.step("nobody")
    assert s.frames == frames and s.abandoned == [] and s.cursor == 0
    s.goto(7)                                           # T7 has committed: only T8 moves
    assert s.frame.runnable == ("T8",)
    for who in ("T7", "bob_to_joe"):
        with pytest.raises(ValueError, match="cannot move at frame 7"):
            s.crash(who)
    assert s.frames == frames and s.abandoned == []


def test_the_stepper_starts_no_thread(monkeypatch):
    import threading

    def refuse(self):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(threading.Thread, "start", refuse)
    s = two_transfers_stepper()
    s.step("T7"), s.step("T7"), s.step("T7")
    s.crash("T7")                                       # the cleaner starts, without a thread
    s.run()
    assert "T7: client crashed" in s.frame.status
    s.goto(2)
    s.step("T8")                                        # a fork replays, without a thread
    s.run()
    assert "T7: committed" in s.frame.status or "T8: committed" in s.frame.status
    s.reset()
    assert len(s.frames) == 1


def test_widget_back_then_another_choice_shows_the_new_branch():
    s = two_transfers_stepper()
    w = s.widget()
    for _ in range(3):
        w.click("Step")
    assert "I am primary" in w.table.value and "T7 prewrite-primary Bob" in w.note.value
    w.click("Back")
    assert w.choice.options == ("T7", "T8")
    w.choice.value = "T8"
    w.click("Step")
    assert "frame 3: T8 get Joe" in w.note.value and "I am primary" not in w.table.value
    assert w.slider.max == 3 and s.abandoned[0][0] == 2
    assert "a new branch from frame 2" in w.status.value
