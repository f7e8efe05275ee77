"""percolator_ref.viz.table: a DataFrame where pandas is installed, a plain Table where not.

The browser site (Pyodide) has no pandas, so the notebooks it runs show their evidence
through ``table`` and compute it from ``trace_rows`` / ``stepper_rows``; in JupyterLab the
same cells still show DataFrames.
"""
import sys

import pandas as pd
import pytest

from percolator_ref.viz import Table, figure4_stepper, show_whole_text, table
from percolator_ref.viz import frames

ROWS = [{"step": "get", "n": 2, "note": "x"}, {"step": "prewrite-primary", "n": 1, "note": "y"}]


@pytest.fixture
def no_pandas(monkeypatch):
    """As on the browser site: ``import pandas`` fails."""
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError):
        import pandas  # noqa: F401


def test_with_pandas_table_is_a_dataframe_with_the_columns_and_index_asked_for():
    frame = table(ROWS, columns=["n", "step"], index="step")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == ["get", "prewrite-primary"] and list(frame.columns) == ["n"]
    assert list(table(ROWS).columns) == ["step", "n", "note"]
    two = table(ROWS, index=["step", "n"])
    assert two.index.names == ["step", "n"] and list(two.columns) == ["note"]
    gaps = table([{"ts": 9, "ok": True}, {"ts": None, "ok": None}])
    assert str(gaps.ts.dtype) == "Int64" and gaps.ts.isna().tolist() == [False, True]
    assert gaps.ok.dtype == object        # not whole numbers: left alone


def test_without_pandas_table_is_the_same_rows_as_a_plain_table(no_pandas):
    shown = table(ROWS, columns=["n", "step"], index="step")
    assert isinstance(shown, Table)
    assert shown.headers == ["step", "n"] and shown.rows == [["get", 2], ["prewrite-primary", 1]]
    assert "<td" in shown._repr_html_() and "prewrite-primary" in repr(shown)
    assert table([(1, "a")], columns=["n", "s"]).rows == [[1, "a"]]
    show_whole_text()                      # nothing to set, and no error


def test_trace_and_stepper_rows_are_the_frames_rows_and_need_no_pandas(monkeypatch):
    walk = figure4_stepper()
    walk.run()
    trace, steps = frames.trace_frame(walk.frames), frames.stepper_frame(walk.frames)
    assert trace.to_dict("records") == frames.trace_rows(walk.frames) and len(trace) == 6
    assert steps[1:].to_dict("records") == frames.stepper_rows(walk.frames)[1:]   # 0: who NaN/None
    monkeypatch.setitem(sys.modules, "pandas", None)
    assert len(frames.trace_rows(walk.frames)) == 6
    with pytest.raises(ModuleNotFoundError, match="need pandas"):
        frames.trace_frame(walk.frames)


@pytest.mark.parametrize("args, match", [
    (([(1, 2)],), "columns must name"),
    ((ROWS, ["step", "n"], "note"), "index must be one of"),
    ((ROWS, ["step", "absent"]), "rows must hold every column"),
])
def test_bad_arguments_name_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        table(*args)


def test_history_hermitage_and_schedule_rows_are_the_frames_rows():
    from percolator_ref import Cluster, ManualClock
    from percolator_ref.workloads import hermitage
    cluster = Cluster(first_timestamp=1, clock=ManualClock())
    t = cluster.begin(); t.set("x", "c", 1); assert t.commit()
    reader = cluster.begin(); assert reader.get("x", "c") == 1; reader.commit()
    rows = frames.history_rows(cluster)
    assert [r["commit_ts"] for r in rows] == [2, None]
    frame = frames.history_frame(cluster)
    assert frame.drop(columns="commit_ts").to_dict("records") == \
        [{k: v for k, v in r.items() if k != "commit_ts"} for r in rows]
    results = hermitage.run_all()
    assert frames.hermitage_frame(results).to_dict("records") == frames.hermitage_rows(results)
    schedule = frames.schedule_frame(results[0])
    assert schedule.reset_index().to_dict("records") == frames.schedule_rows(results[0])
