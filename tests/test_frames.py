"""percolator_ref.viz.frames: the evidence tables (pandas) that notebooks 01-03 show.

Each frame is checked against the source it tabulates: the history records,
the tracer's own counts, the Hermitage results and a crash-by-crash replay.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.viz import frames
from percolator_ref.viz import figure4_setup, figure4_stepper, two_transfers_stepper
from percolator_ref.workloads import hermitage
from test_code_shape import CORE

ROOT = Path(__file__).resolve().parents[1]


def figure4_cluster(make_cluster):
    cluster = make_cluster(first_timestamp=5)
    figure4_setup(cluster)                     # start 5, commit 6
    return cluster


def transfer(cluster, src="Bob", dst="Joe", amount=7):
    t = cluster.begin()
    a, b = t.get(src, "bal"), t.get(dst, "bal")
    t.set(src, "bal", a - amount)
    t.set(dst, "bal", b + amount)
    return t


# -- history_frame -----------------------------------------------------------------------

def test_history_frame_has_one_row_per_record_with_its_reads_and_writes(make_cluster):
    cluster = figure4_cluster(make_cluster)
    t7, t8 = transfer(cluster), transfer(cluster, "Joe", "Bob", 1)
    assert t7.commit() is True and t8.commit() is False
    frame = frames.history_frame(cluster.history)
    assert list(frame.columns) == frames.HISTORY_COLUMNS
    assert list(frame.client) == ["T5", "T7", "T8"]
    assert list(frame.status) == ["committed", "committed", "aborted"]
    assert list(frame.start_ts) == [5, 7, 8]
    assert frame.commit_ts.tolist()[:2] == [6, 9] and pd.isna(frame.commit_ts[2])
    assert frame.reads[1] == ("Bob.bal=10 @6", "Joe.bal=2 @6")
    assert frame.writes[1] == ("Bob.bal=3", "Joe.bal=9")
    assert frame.writes[2] == ("Joe.bal=1", "Bob.bal=11")        # primary first


def test_history_frame_takes_a_cluster_or_records_and_marks_deletes_and_absent_reads():
    cluster = Cluster(first_timestamp=1, clock=ManualClock())
    t = cluster.begin()
    assert t.get("x", "c") is None
    t.delete("y", "c")
    assert t.commit()
    by_cluster = frames.history_frame(cluster)
    by_records = frames.history_frame(cluster.history.records)
    pd.testing.assert_frame_equal(by_cluster, by_records)
    assert by_cluster.reads[0] == ("x.c=(absent)",)
    assert by_cluster.writes[0] == ("y.c=(deleted)",)


@pytest.mark.parametrize("bad", [42, [1, 2], "T1"])
def test_history_frame_refuses_what_is_not_a_history(bad):
    with pytest.raises(TypeError, match="history_or_records"):
        frames.history_frame(bad)


# -- trace_frame ---------------------------------------------------------------------------

def test_trace_frame_groupby_step_matches_the_tracers_counts(make_cluster):
    cluster = figure4_cluster(make_cluster)
    cluster.tracer.reset_counts()
    with cluster.tracer.record() as events:
        t7, t8 = transfer(cluster), transfer(cluster, "Joe", "Bob", 1)
        assert t7.commit() and not t8.commit()
        crashed = transfer(cluster)
        with pytest.raises(Exception):
            crashed.commit(crash_after="prewrite")
        cluster.clock.advance(60)
        reader = cluster.begin()
        assert (reader.get("Bob", "bal"), reader.get("Joe", "bal")) == (3, 9)
    frame = frames.trace_frame(events)
    assert list(frame.columns) == frames.TRACE_COLUMNS
    by_step = frame.groupby("step").size().to_dict()
    assert by_step == dict(cluster.tracer.counts.by_step)
    assert len(frame) == cluster.tracer.counts.row_transactions
    assert {"roll-back", "cleanup-primary", "commit-primary"} <= set(by_step)
    assert list(frame.seq) == sorted(frame.seq)


def test_trace_frame_rows_carry_the_events_changes_and_notes():
    cluster = Cluster(first_timestamp=5, clock=ManualClock())
    figure4_setup(cluster)
    with cluster.tracer.record() as events:
        assert transfer(cluster).commit()
    frame = frames.trace_frame(events)
    commit = frame[frame.step == "commit-primary"].iloc[0]
    assert (commit.client, commit.row) == ("T7", "Bob")
    assert set(commit.changes) == {"write bal:write@8", "erase bal:lock@7"}
    assert "commit point" in commit.note
    assert list(frame.step) == ["get", "get", "prewrite-primary", "prewrite-secondary",
                                "commit-primary", "commit-secondary"]


def test_trace_frame_of_stepper_frames_is_the_trace_of_their_events():
    walk = figure4_stepper()
    walk.run()
    from_frames = frames.trace_frame(walk.frames)
    from_events = frames.trace_frame([e for f in walk.frames for e in f.events])
    pd.testing.assert_frame_equal(from_frames, from_events)
    assert len(from_frames) == 6


@pytest.mark.parametrize("bad", [3, [object()], ["get"]])
def test_trace_frame_refuses_what_is_not_events(bad):
    with pytest.raises(TypeError, match="events"):
        frames.trace_frame(bad)


def test_stepper_frame_has_one_row_per_frame_with_crashes_named():
    s = figure4_stepper()
    for _ in range(3):
        s.step()
    s.crash()
    s.run()
    frame = frames.stepper_frame(s.frames)
    assert list(frame.columns) == frames.STEPPER_COLUMNS
    assert len(frame) == len(s.frames)
    assert list(frame.frame) == list(range(len(s.frames)))
    assert frame.step[4] == "crash" and frame.who[4] == "T7"
    assert "cleanup-primary" in set(frame.step)
    with pytest.raises(TypeError, match="frames"):
        frames.stepper_frame([1, 2])


# -- Hermitage ----------------------------------------------------------------------------

def test_hermitage_frame_has_each_scenario_side_by_side_with_its_verdict():
    results = hermitage.run_all()
    frame = frames.hermitage_frame(results)
    assert list(frame.columns) == frames.HERMITAGE_COLUMNS
    assert list(frame.name) == [r.name for r in results] and len(frame) == 15
    assert (frame.SI == frame.observed).all() and frame.checker_ok.all()
    assert set(frame.name[frame.SI == "allowed"]) == {"G2-item", "G2", "G2-two-edges"}
    assert set(frame.name[frame.T3 != ""]) == {"OTV", "G2-two-edges"}
    assert not frame.reason.str.contains("[{}]").any()          # every template filled in
    p4 = frame.set_index("name").loc["P4"]
    assert p4.committed == "T1 yes, T2 no"
    assert "3. get 1 -> 10" in p4.T1 and "4. get 1 -> 10" in p4.T2
    assert "commit -> aborted: prewrite test/1.value: write record @ 5 >= start 4" in p4.T2
    assert p4.reason.startswith("both write row 1: T2's prewrite meets T1's write record @5, "
                                "newer than its start 4")


def test_schedule_frame_puts_each_move_in_its_transactions_column():
    result = hermitage.g2_two_edges()
    frame = frames.schedule_frame(result)
    assert list(frame.columns) == ["T1", "T2", "T3"]
    assert list(frame.index) == list(range(1, len(result.schedule) + 1))
    assert ((frame != "").sum(axis=1) == 1).all()                # one mover per step
    assert frame.loc[6, "T3"] == "begin -> start 6"
    assert frame.loc[7, "T3"] == "where true -> 1=10, 2=25"
    assert frame.loc[10, "T1"] == "commit -> committed @ 7"
    with pytest.raises(TypeError, match="result"):
        frames.schedule_frame("G0")


def test_hermitage_schedules_name_a_cleanup_and_a_crash():
    frame = frames.schedule_frame(hermitage.g1a())
    assert "commit, client dies after prewrite -> crashed, locks left" in list(frame.T1)
    assert "where true -> 1=10, 2=20 (rolled back T1's locks)" in list(frame.T2)


# -- crash_frame ----------------------------------------------------------------------------

def test_crash_frame_rolls_back_before_the_commit_point_and_forward_after(make_cluster):
    def fresh():
        return figure4_cluster(make_cluster)
    frame = frames.crash_frame(fresh, {("Bob", "bal"): 3, ("Joe", "bal"): 9})
    assert list(frame.columns) == frames.CRASH_COLUMNS + ["Bob.bal", "Joe.bal"]
    assert list(frame.crash_after) == [1, 2, 3, 4, 5, "prewrite-primary", "prewrite",
                                       "commit-primary"]
    by_point = frame.set_index("crash_after")
    assert list(by_point.client) == ["crashed"] * 4 + ["committed"] + ["crashed"] * 3
    assert list(by_point.locks_left) == [1, 2, 1, 0, 0, 1, 2, 1]
    assert list(by_point.reader_sees) == ["as before"] * 2 + ["its writes"] * 3 + \
        ["as before"] * 2 + ["its writes"]
    assert by_point.loc[2, "reader_cleanup"] == "cleanup-primary, roll-back"
    assert by_point.loc[3, "reader_cleanup"] == "cleanup-primary, roll-forward"
    assert by_point.loc[4, "reader_cleanup"] == "-"
    assert by_point.commit_ts.isna().tolist() == [True, True, False, False, False,
                                                  True, True, False]
    assert ((frame["Bob.bal"] + frame["Joe.bal"]) == 12).all()


def test_crash_frame_takes_chosen_points_and_tables():
    def fresh():
        return Cluster(first_timestamp=1, clock=ManualClock())
    frame = frames.crash_frame(fresh, {("a", "v", "t"): 1, ("b", "v"): 2}, points=[1, 3])
    assert list(frame.columns)[-2:] == ["t/a.v", "b.v"]
    assert list(frame.reader_sees) == ["as before", "its writes"]
    assert frame["t/a.v"].isna()[0] and frame["t/a.v"][1] == 1


@pytest.mark.parametrize("make, writes, match", [
    (None, {("a", "v"): 1}, "make_cluster"),
    (Cluster, {}, "writes"),
    (Cluster, {"a": 1}, "writes keys"),
])
def test_crash_frame_refuses_bad_arguments(make, writes, match):
    with pytest.raises((TypeError, ValueError), match=match):
        frames.crash_frame(make, writes)


# -- the core stays free of pandas ---------------------------------------------------------

def test_importing_the_protocol_does_not_import_pandas():
    code = ("import sys, percolator_ref, percolator_ref.transaction, percolator_ref.viz; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def pandas_importers(paths) -> list:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "pandas" for n in names):
                found.append(path.name)
    return found


def test_no_core_protocol_module_imports_pandas_but_the_viz_tables_do():
    """pandas is imported in one place, viz.tables.installed_pandas (where pandas is
    missing, as on the browser site, tables fall back to plain rows); frames reaches it
    through that function, and no protocol module imports it."""
    package = ROOT / "percolator_ref"
    protocol = CORE + ["cluster.py", "faults.py", "interceptors.py", "trace.py", "checking/checker.py",
                       "services/clock.py", "errors.py"]
    assert pandas_importers(package / name for name in protocol) == []
    everywhere = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                        if pandas_importers([p]))
    assert "viz/tables.py" in everywhere
    assert "viz/frames.py" not in everywhere
    assert "installed_pandas" in (package / "viz" / "frames.py").read_text()


def test_two_transfers_trace_counts_match_after_a_conflict():
    duel = two_transfers_stepper()
    duel.run()
    frame = frames.trace_frame(duel.frames)
    counts = frame.groupby(["client", "step"]).size()
    assert counts[("T7", "commit-primary")] == 1
    assert ("T8", "commit-primary") not in counts.index
