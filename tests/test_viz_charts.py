"""viz.plot_lines: the notebooks' line charts with matplotlib, and as SVG without it (the
browser site, issue 28); bad arguments are refused by name."""
import math
import re
import sys

import pytest

from percolator_ref.viz import Line, plot_lines
from percolator_ref.viz.charts import ChartDrawing

SHARES = [0.01, 0.1, 0.8]
LINES = [Line("incremental", SHARES, [136, 1355, 5650]),
         Line("batch", SHARES, [1176, 1180, 1190], interval=[(1100, 1200), (1150, 1210), (1190, 1190)]),
         Line("tpsE", [0.2, 0.4, 0.6], [5, 0, 4], steps=True)]


@pytest.fixture
def no_matplotlib(monkeypatch):
    """As on the browser site: ``import matplotlib.pyplot`` fails; what is displayed is kept."""
    shown = []
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    monkeypatch.setattr("IPython.display.display", shown.append)
    return shown


def test_with_matplotlib_the_lines_marks_and_axes_are_drawn():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = plot_lines(LINES, title="costs", xlabel="share", ylabel="row transactions", xlog=True,
                    marks={0.1: "batch first wins"}, hline=1000)
    try:
        drawn = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
                 for line in ax.lines if not line.get_label().startswith("_")}
        drawn.update({bars.get_label(): (list(bars.lines[0].get_xdata()), list(bars.lines[0].get_ydata()))
                      for bars in ax.containers})                         # errorbar: its data line
        assert drawn["incremental"] == (SHARES, [136, 1355, 5650])
        assert drawn["batch"] == (SHARES, [1176, 1180, 1190])
        assert drawn["tpsE"] == ([0.2, 0.4, 0.6], [5, 0, 4])
        assert list(drawn["batch first wins"][0]) == [0.1, 0.1]          # the vertical mark
        assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
        assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == (
            "costs", "share", "row transactions")
        assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
            "batch", "batch first wins", "incremental", "tpsE"]
        bars = [c for c in ax.collections if len(c.get_segments()) == 3]     # the 95% intervals
        assert [[tuple(s[:, 1]) for s in c.get_segments()] for c in bars] == [
            [(1100, 1200), (1150, 1210), (1190, 1190)]]
    finally:
        plt.close("all")


def test_without_matplotlib_the_same_lines_are_shown_as_svg(no_matplotlib):
    drawing = plot_lines(LINES, title="costs <per round>", xlabel="share", ylabel="rt",
                         xlog=True, marks={0.1: "batch first wins"}, hline=1000)
    assert no_matplotlib == [drawing] and isinstance(drawing, ChartDrawing)
    svg = drawing._repr_svg_()
    assert "costs &lt;per round&gt;" in svg and "batch first wins" in svg
    polylines = re.findall(r'<polyline class="line"[^>]* points="([^"]*)"', svg)
    points = [[tuple(map(float, p.split(","))) for p in line.split()] for line in polylines]
    assert points[0] == [(round(drawing.x(x), 1), round(drawing.y(y), 1))
                         for x, y in zip(SHARES, [136, 1355, 5650])]
    xs = [x for x, _ in points[0]]
    assert (xs[1] - xs[0]) / (xs[2] - xs[1]) == pytest.approx(1 / math.log10(8), rel=0.01)  # log x
    assert len(points[2]) == 5                    # a staircase: a corner between each two points
    assert svg.count('class="interval"') == 3 and svg.count('class="mark"') == 1
    assert svg.count('class="hline"') == 1 and svg.count('class="point"') == 6
    top, bottom = ChartDrawing.TOP, ChartDrawing.HEIGHT - ChartDrawing.BOTTOM
    assert all(top <= y <= bottom for line in points for _, y in line)
    assert repr(drawing).splitlines()[1] == "incremental: (0.01, 136), (0.1, 1355), (0.8, 5650)"


def test_without_matplotlib_ylim_sets_the_y_axis(no_matplotlib):
    drawing = plot_lines([Line("efficiency", [1, 10], [1.0, 0.66])], ylim=(0, 1.4), hline=1)
    assert drawing.yrange == (0, 1.4)
    assert drawing.y(0) == ChartDrawing.HEIGHT - ChartDrawing.BOTTOM and drawing.y(1.4) == ChartDrawing.TOP
    assert not drawing.xlog and drawing.x(1) < drawing.x(10)


@pytest.mark.parametrize("kwargs, argument", [
    ({"lines": []}, "lines"),
    ({"lines": Line("a", [1], [1])}, "lines"),
    ({"lines": [("a", [1], [1])]}, "lines"),
    ({"lines": [Line("a", [1, 2], [1])]}, "lines"),
    ({"lines": [Line("a", [], [])]}, "lines"),
    ({"lines": [Line("a", [1, "2"], [1, 2])]}, "lines"),
    ({"lines": [Line("a", [1, 2], [1, float("nan")])]}, "lines"),
    ({"lines": [Line("a", [1, 2], [1, 2], interval=[(0, 2)])]}, "lines"),
    ({"lines": [Line("a", [1, 2], [1, 2], interval=[(0, 2), (3, 4)])]}, "lines"),
    ({"xlog": True, "lines": [Line("a", [0, 1], [1, 2])]}, "xlog"),
    ({"ylog": True, "lines": [Line("a", [1, 2], [-1, 2])]}, "ylog"),
    ({"marks": {"x": "text"}}, "marks"),
    ({"hline": "1"}, "hline"),
    ({"ylim": (1, 0)}, "ylim"),
    ({"ylim": 1.4}, "ylim"),
])
@pytest.mark.parametrize("matplotlib_missing", [False, True])
def test_bad_arguments_are_refused_by_name_and_nothing_is_shown(kwargs, argument, matplotlib_missing,
                                                                  monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    if matplotlib_missing:
        monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    else:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        before = plt.get_fignums()                # another test's figures may be open
    kwargs = {"lines": [Line("a", [1, 2], [1, 2])], **kwargs}
    with pytest.raises((TypeError, ValueError), match=rf"^{argument}\b"):
        plot_lines(**kwargs)
    assert shown == []
    if not matplotlib_missing:
        assert plt.get_fignums() == before        # no figure half-drawn by this call


def test_an_axes_can_only_be_given_where_matplotlib_draws(no_matplotlib):
    with pytest.raises(ValueError, match="^ax "):
        plot_lines([Line("a", [1, 2], [1, 2])], ax=object())
    assert no_matplotlib == []
