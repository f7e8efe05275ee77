"""viz.timeline: Figure 3's drawing (open square = start, closed circle = commit)."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from percolator_ref import Cluster, ManualClock  # noqa: E402
from percolator_ref.viz.timeline import (COMMIT_MARKER, START_MARKER, commit_marks,  # noqa: E402
                                         plot_timeline, timeline_rows)


def figure3_history():
    """T1 writes a; T2 (started before T1's commit) reads a, writes b; T3 reads both."""
    c = Cluster(first_timestamp=1, clock=ManualClock())
    t1, t2 = c.begin(), c.begin()
    t1.set("r", "a", 1)
    assert t1.commit()
    t2.get("r", "a")
    t2.set("r", "b", 2)
    assert t2.commit()
    t3 = c.begin()
    t3.get("r", "a")
    assert t3.commit()                 # read-only: no commit timestamp
    loser = c.begin()
    loser.set("r", "a", 3)
    c.begin().abandon()
    return c.history.records


def test_every_committed_writer_gets_a_commit_mark_and_a_read_only_one_says_so():
    records = figure3_history()
    rows = timeline_rows(records, labels={"T5": "T3"})
    assert [r.text for r in rows] == ["T1: committed at 3", "T2: committed at 4",
                                      "T3: read-only, no commit timestamp", "T6: open",
                                      "T7: aborted"]
    ax = plot_timeline(records, labels={"T5": "T3"})
    commits = [line for line in ax.lines if line.get_marker() == COMMIT_MARKER]
    starts = [line for line in ax.lines if line.get_marker() == START_MARKER]
    assert sorted(line.get_xdata()[0] for line in commits) == [3, 4] == sorted(commit_marks(ax))
    assert len(starts) == len(records)
    assert all(line.get_markerfacecolor() == "white" for line in starts)   # open squares
    assert [t.get_text() for t in ax.texts][::-1] == [r.text for r in rows]


def test_timeline_refuses_bad_labels_and_an_empty_history():
    with pytest.raises(TypeError, match="labels"):
        timeline_rows(figure3_history(), labels=["T1"])
    with pytest.raises(ValueError, match="records"):
        plot_timeline([])


def test_without_matplotlib_the_same_marks_are_shown_as_svg(monkeypatch):
    """The browser site has no matplotlib: plot_timeline shows an SVG drawing instead."""
    import re
    import sys
    shown = []
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    monkeypatch.setattr("IPython.display.display", shown.append)
    records = figure3_history()
    drawing = plot_timeline(records, labels={"T5": "T3"}, title="Figure 3 <again>")
    assert shown == [drawing] and drawing.commit_marks == [3, 4] == commit_marks(drawing)
    svg = drawing._repr_svg_()
    circles = [int(x) for x in re.findall(r'<circle class="commit" cx="(\d+)"', svg)]
    assert circles == [drawing.x(3), drawing.x(4)]
    assert svg.count('class="start"') == len(records) and "Figure 3 &lt;again&gt;" in svg
    assert all(r.text in svg for r in timeline_rows(records, labels={"T5": "T3"}))
