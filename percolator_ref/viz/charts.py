"""Line charts for the notebooks' measurements, drawn with matplotlib, or as an SVG drawing
where matplotlib is missing (the browser site), as :func:`~.timeline.plot_timeline` does.

:func:`plot_lines` draws :class:`Line` s (points joined, or a staircase; optional 95%
intervals as error bars) on linear or logarithmic axes, with marked x positions
(``marks``) and a horizontal reference line (``hline``).
"""
from __future__ import annotations

import html
import math
from numbers import Real
from typing import NamedTuple, Optional

from .svg import pyplot, show, svg_open

MARKERS = ("o", "s", "^", "D")            # matplotlib's circle, square, triangle, diamond
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
MARK_STYLES = (":", "--", "-.")


class Line(NamedTuple):
    """One line of a chart: ``label``, the points ``x`` and ``y``, and optionally
    ``interval``: one ``(low, high)`` per point (drawn as an error bar); ``steps``: draw a
    staircase (each value held until the next x) instead of joining the points."""
    label: str
    x: list
    y: list
    interval: Optional[list] = None
    steps: bool = False


def _number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def check_lines(lines) -> list:
    """``lines`` as a list of :class:`Line` with float points; a ValueError or TypeError
    naming the argument if it is not one."""
    if isinstance(lines, Line) or not isinstance(lines, (list, tuple)) or not lines:
        raise TypeError(f"lines must be a non-empty list of Line, got {lines!r}")
    checked = []
    for line in lines:
        if not isinstance(line, Line):
            raise TypeError(f"lines must hold Line(label, x, y), got {line!r}")
        x, y = list(line.x), list(line.y)
        if not x or len(x) != len(y):
            raise ValueError(f"lines: {line.label!r} needs as many x as y, at least one "
                             f"(got {len(x)} and {len(y)})")
        if not all(_number(v) for v in x + y):
            raise ValueError(f"lines: {line.label!r} has a point that is not a finite number")
        interval = None
        if line.interval is not None:
            interval = [tuple(pair) for pair in line.interval]
            if len(interval) != len(y) or not all(
                    len(p) == 2 and all(_number(v) for v in p) and p[0] <= v <= p[1]
                    for p, v in zip(interval, y)):
                raise ValueError(f"lines: {line.label!r} needs one (low, high) around each y "
                                 f"as its interval, got {line.interval!r}")
        checked.append(Line(str(line.label), [float(v) for v in x], [float(v) for v in y],
                            interval, bool(line.steps)))
    return checked


def plot_lines(lines, title: str = "", xlabel: str = "", ylabel: str = "",
               xlog: bool = False, ylog: bool = False, marks: Optional[dict] = None,
               hline: Optional[float] = None, ylim: Optional[tuple] = None, ax=None,
               size: tuple = (6, 3.5)):
    """Draw ``lines`` (:class:`Line` s) in one chart; returns the matplotlib Axes.

    ``xlog`` / ``ylog``: logarithmic axes (every value on them must be above 0).
    ``marks``: ``{x: text}``, a dotted vertical line at each x, named in the legend.
    ``hline``: a dotted horizontal reference line at that y. ``ylim``: ``(low, high)`` of
    the y axis. ``ax``: the Axes to draw on (default: a new figure of ``size`` inches).

    Where matplotlib is not installed (the browser site) it shows the same lines as a
    :class:`ChartDrawing` (SVG) and returns it.
    """
    lines = check_lines(lines)
    marks = dict(marks or {})
    check_axes(lines, xlog, ylog, marks, hline, ylim)
    plt = pyplot()
    if plt is None:
        if ax is not None:
            raise ValueError("ax must be None where matplotlib is not installed")
        return show(ChartDrawing(lines, title, xlabel, ylabel, xlog, ylog, marks, hline, ylim))
    if ax is None:
        _, ax = plt.subplots(figsize=size)
    draw_lines(ax, lines, marks, hline)
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return ax


def check_axes(lines: list, xlog: bool, ylog: bool, marks: dict, hline, ylim) -> None:
    """A ValueError naming the argument of :func:`plot_lines` that cannot be drawn."""
    if not all(_number(x) for x in marks):
        raise ValueError(f"marks must map x positions (numbers) to text, got {marks!r}")
    if hline is not None and not _number(hline):
        raise ValueError(f"hline must be a number, got {hline!r}")
    if ylim is not None and not (isinstance(ylim, (list, tuple)) and len(ylim) == 2
                                 and all(_number(v) for v in ylim) and ylim[0] < ylim[1]):
        raise ValueError(f"ylim must be (low, high) with low < high, got {ylim!r}")
    for axis, log, values in (("xlog", xlog, [x for l in lines for x in l.x] + list(marks)),
                              ("ylog", ylog, [v for l in lines for v in l.y + [
                                  b for p in (l.interval or []) for b in p]])):
        if log and min(values) <= 0:
            raise ValueError(f"{axis}: a logarithmic axis needs values above 0, got {min(values)}")


def draw_lines(ax, lines: list, marks: dict, hline) -> None:
    """The lines, marks and reference line of :func:`plot_lines` on a matplotlib Axes."""
    for i, line in enumerate(lines):
        style, color = MARKERS[i % len(MARKERS)] + "-", COLORS[i % len(COLORS)]
        if line.steps:
            ax.step(line.x, line.y, where="post", label=line.label, color=color)
        elif line.interval is not None:
            low = [v - lo for v, (lo, _) in zip(line.y, line.interval)]
            high = [hi - v for v, (_, hi) in zip(line.y, line.interval)]
            ax.errorbar(line.x, line.y, yerr=[low, high], fmt=style, capsize=4, label=line.label,
                        color=color)
        else:
            ax.plot(line.x, line.y, style, label=line.label, color=color)
    for k, (x, text) in enumerate(marks.items()):
        ax.axvline(x, color="grey", ls=MARK_STYLES[k % len(MARK_STYLES)], label=text)
    if hline is not None:
        ax.axhline(hline, color="grey", ls=":")


def _ticks(low: float, high: float, log: bool) -> list:
    """About five round tick values from ``low`` to ``high``."""
    if log:
        decades = list(range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1))
        if len(decades) >= 3:
            return [10.0 ** d for d in decades]
        return sorted({float(f"{v:.2g}") for v in (
            10 ** (math.log10(low) + k * (math.log10(high) - math.log10(low)) / 4)
            for k in range(5))})
    if high == low:
        return [low]
    step = 10 ** math.floor(math.log10((high - low) / 4))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if (high - low) / (step * m) <= 5)
    first = math.ceil(low / step) * step
    return [round(first + k * step, 10) for k in range(int((high - first) / step + 1e-9) + 1)]


class ChartDrawing:
    """:func:`plot_lines`'s chart as SVG, for where matplotlib is missing.

    ``lines``: the :class:`Line` s drawn (checked); ``marks``, ``hline`` and the axes as
    :func:`plot_lines` was given them. ``x(value)`` / ``y(value)``: where a value lands."""

    WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 320, 64, 16, 30, 52

    def __init__(self, lines: list, title: str = "", xlabel: str = "", ylabel: str = "",
                 xlog: bool = False, ylog: bool = False, marks: Optional[dict] = None,
                 hline: Optional[float] = None, ylim: Optional[tuple] = None):
        self.lines, self.title, self.xlabel, self.ylabel = lines, title, xlabel, ylabel
        self.xlog, self.ylog, self.marks, self.hline = xlog, ylog, dict(marks or {}), hline
        xs = [x for line in lines for x in line.x] + list(self.marks)
        ys = [v for line in lines for v in line.y + [b for p in (line.interval or []) for b in p]]
        ys += [] if hline is None else [hline]
        self.xrange = self._padded(min(xs), max(xs), xlog)
        self.yrange = tuple(ylim) if ylim is not None else self._padded(min(ys), max(ys), ylog)

    @staticmethod
    def _padded(low: float, high: float, log: bool) -> tuple:
        if log:
            return (low / 1.25, high * 1.25)
        pad = (high - low) * 0.05 or abs(high) * 0.1 or 1.0
        return (low - pad, high + pad)

    @staticmethod
    def _share(value: float, bounds: tuple, log: bool) -> float:
        low, high = bounds
        if log:
            return (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low))
        return (value - low) / (high - low)

    def x(self, value: float) -> float:
        return self.LEFT + self._share(value, self.xrange, self.xlog) * (
            self.WIDTH - self.LEFT - self.RIGHT)

    def y(self, value: float) -> float:
        return self.HEIGHT - self.BOTTOM - self._share(value, self.yrange, self.ylog) * (
            self.HEIGHT - self.TOP - self.BOTTOM)

    def _line_parts(self, i: int, line: Line) -> list:
        color = COLORS[i % len(COLORS)]
        points = list(zip(line.x, line.y))
        if line.steps:
            path = [points[0]] + [q for a, b in zip(points, points[1:]) for q in ((b[0], a[1]), b)]
        else:
            path = points
        out = [f'<polyline class="line" fill="none" stroke="{color}" stroke-width="1.5" points="'
               + " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in path) + '"/>']
        for k, (a, b) in enumerate(points):
            if line.interval is not None:
                lo, hi = line.interval[k]
                out.append(f'<line class="interval" x1="{self.x(a):.1f}" y1="{self.y(lo):.1f}" '
                           f'x2="{self.x(a):.1f}" y2="{self.y(hi):.1f}" stroke="{color}"/>')
            if not line.steps:
                out.append(_marker(MARKERS[i % len(MARKERS)], self.x(a), self.y(b), color))
        return out

    def _axes_parts(self) -> list:
        bottom, right = self.HEIGHT - self.BOTTOM, self.WIDTH - self.RIGHT
        out = [f'<rect x="{self.LEFT}" y="{self.TOP}" width="{right - self.LEFT}" '
               f'height="{bottom - self.TOP}" fill="none" stroke="black"/>']
        for value in _ticks(*self.xrange, self.xlog):
            if self.xrange[0] <= value <= self.xrange[1]:
                out.append(f'<text x="{self.x(value):.1f}" y="{bottom + 14}" '
                           f'text-anchor="middle">{value:g}</text>')
        for value in _ticks(*self.yrange, self.ylog):
            if self.yrange[0] <= value <= self.yrange[1]:
                out.append(f'<text x="{self.LEFT - 4}" y="{self.y(value) + 4:.1f}" '
                           f'text-anchor="end">{value:g}</text>')
        out.append(f'<text x="{(self.LEFT + right) / 2:.0f}" y="{bottom + 32}" '
                   f'text-anchor="middle">{html.escape(self.xlabel)}</text>')
        out.append(f'<text x="14" y="{(self.TOP + bottom) / 2:.0f}" text-anchor="middle" '
                   f'transform="rotate(-90 14 {(self.TOP + bottom) / 2:.0f})">'
                   f'{html.escape(self.ylabel)}</text>')
        return out

    def _repr_svg_(self) -> str:
        bottom, right = self.HEIGHT - self.BOTTOM, self.WIDTH - self.RIGHT
        out = svg_open(self.WIDTH, self.HEIGHT + 18 * (len(self.lines) + len(self.marks)),
                       self.title) + self._axes_parts()
        dashes = {":": "2,3", "--": "6,3", "-.": "6,3,2,3"}
        for k, x in enumerate(self.marks):
            out.append(f'<line class="mark" x1="{self.x(x):.1f}" y1="{self.TOP}" '
                       f'x2="{self.x(x):.1f}" y2="{bottom}" stroke="grey" '
                       f'stroke-dasharray="{dashes[MARK_STYLES[k % len(MARK_STYLES)]]}"/>')
        if self.hline is not None:
            out.append(f'<line class="hline" x1="{self.LEFT}" y1="{self.y(self.hline):.1f}" '
                       f'x2="{right}" y2="{self.y(self.hline):.1f}" stroke="grey" '
                       'stroke-dasharray="2,3"/>')
        for i, line in enumerate(self.lines):
            out += self._line_parts(i, line)
        legend = [(COLORS[i % len(COLORS)], "", line.label) for i, line in enumerate(self.lines)]
        legend += [("grey", dashes[MARK_STYLES[k % len(MARK_STYLES)]], text)
                   for k, text in enumerate(self.marks.values())]
        for k, (color, dash, text) in enumerate(legend):
            y = self.HEIGHT + 18 * k + 4
            out.append(f'<line x1="{self.LEFT}" y1="{y}" x2="{self.LEFT + 24}" y2="{y}" '
                       f'stroke="{color}" stroke-width="1.5"'
                       + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
            out.append(f'<text x="{self.LEFT + 30}" y="{y + 4}">{html.escape(text)}</text>')
        out.append("</svg>")
        return "".join(out)

    def __repr__(self) -> str:
        return "\n".join([self.title] + [
            f"{line.label}: " + ", ".join(f"({a:g}, {b:g})" for a, b in zip(line.x, line.y))
            for line in self.lines])


def _marker(kind: str, x: float, y: float, color: str) -> str:
    if kind == "o":
        return f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}"/>'
    if kind == "s":
        return (f'<rect class="point" x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" '
                f'fill="{color}"/>')
    if kind == "^":
        return (f'<polygon class="point" points="{x:.1f},{y - 5:.1f} {x - 5:.1f},{y + 4:.1f} '
                f'{x + 5:.1f},{y + 4:.1f}" fill="{color}"/>')
    return (f'<polygon class="point" points="{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} '
            f'{x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}" fill="{color}"/>')
