"""Transactions on a timestamp axis (the paper's Figure 3), drawn with matplotlib, or as
an SVG drawing where matplotlib is missing (the browser site).

As in the paper's Figure 3, a transaction's start timestamp (where it reads
its snapshot) is an open square and its commit timestamp (where its writes
become visible) a closed circle.
"""
from __future__ import annotations

import html
from typing import NamedTuple, Optional

from ..model import TxStatus
from .svg import pyplot, show, svg_open

START_MARKER, COMMIT_MARKER = "s", "o"     # open square, closed circle (Figure 3)


class TimelineRow(NamedTuple):
    """What the timeline draws for one transaction."""
    label: str                  # the name shown ("T1", or the client name)
    start_ts: int
    commit_ts: Optional[int]    # None: no commit mark (aborted, read-only, open, crashed)
    text: str                   # "T1: committed at 3", "T3: read-only, no commit timestamp"


def timeline_rows(records, labels: Optional[dict] = None) -> list:
    """One :class:`TimelineRow` per record, in order.

    ``records``: :class:`~percolator_ref.checking.checker.TxnRecord` s. ``labels``: an
    optional ``{client: name}`` (e.g. ``{"T5": "T3"}``) for the names shown.
    A committed transaction that wrote nothing took no commit timestamp
    (API.md), so it is labelled read-only and gets no commit mark.
    """
    if labels is not None and not isinstance(labels, dict):
        raise TypeError(f"labels must be a dict {{client: name}} or None, got {labels!r}")
    rows = []
    for r in records:
        name = (labels or {}).get(r.client, r.client)
        if r.status == TxStatus.COMMITTED and r.commit_ts is None:
            text = f"{name}: read-only, no commit timestamp"
        elif r.status == TxStatus.COMMITTED:
            text = f"{name}: committed at {r.commit_ts}"
        else:
            text = f"{name}: {r.status}"
        commit = r.commit_ts if r.status == TxStatus.COMMITTED else None
        rows.append(TimelineRow(name, r.start_ts, commit, text))
    return rows


def plot_timeline(records, ax=None, title: str = "Transactions in timestamp order",
                  labels: Optional[dict] = None):
    """Draw each transaction as a bar from ``start_ts`` to ``commit_ts`` (Figure 3's marks).

    ``records``: :class:`~percolator_ref.checking.checker.TxnRecord` s (``cluster.history.records``,
    or a filtered list). Open square: the start (snapshot); closed circle: the
    commit. ``labels``: see :func:`timeline_rows`. Returns the matplotlib Axes.

    Where matplotlib is not installed (the browser site) it shows the same marks as a
    :class:`TimelineDrawing` (SVG), as the inline backend shows a figure, and returns it.
    """
    rows = timeline_rows(records, labels)
    if not rows:
        raise ValueError("records must hold at least one transaction record")
    plt = pyplot()
    if plt is None:
        return show(TimelineDrawing(rows, title))
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.6 + 0.6 * len(rows)))
    for y, row in enumerate(reversed(rows)):
        end = row.commit_ts if row.commit_ts is not None else row.start_ts
        ax.plot([row.start_ts, end], [y, y], lw=6, color="#7aa6d8", solid_capstyle="butt")
        ax.plot([row.start_ts], [y], START_MARKER, mfc="white", mec="#1f4e79", ms=9)
        if row.commit_ts is not None:
            ax.plot([row.commit_ts], [y], COMMIT_MARKER, color="#c0392b", ms=9)
        ax.text(end + 0.25, y, row.text, va="center", fontsize=9)
    ax.set_yticks([])
    ax.set_xlabel("timestamp (open square = start: snapshot read, closed circle = commit)")
    ax.set_title(title)
    ax.set_xlim(min(r.start_ts for r in rows) - 1,
                max((r.commit_ts or r.start_ts) for r in rows) + 4)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    return ax


def commit_marks(drawn) -> list:
    """The timestamps of the closed circles (commits) that :func:`plot_timeline` drew, in
    the order drawn: from its matplotlib Axes, or from its :class:`TimelineDrawing`."""
    if isinstance(drawn, TimelineDrawing):
        return list(drawn.commit_marks)
    if not hasattr(drawn, "lines"):
        raise TypeError(f"drawn must be what plot_timeline returned, got {type(drawn).__name__}")
    return [line.get_xdata()[0] for line in drawn.lines if line.get_marker() == COMMIT_MARKER]


class TimelineDrawing:
    """:func:`plot_timeline`'s marks as SVG, for where matplotlib is missing.

    ``rows``: the :class:`TimelineRow` s drawn, top to bottom; ``commit_marks``: the
    timestamps of the closed circles, as ``ax.lines`` with ``COMMIT_MARKER`` would give."""

    X0, UNIT, ROW_H, TOP = 20, 40, 34, 30

    def __init__(self, rows: list, title: str):
        self.rows, self.title = list(rows), title
        self.low = min(r.start_ts for r in self.rows) - 1
        self.high = max((r.commit_ts or r.start_ts) for r in self.rows) + 4
        self.commit_marks = [r.commit_ts for r in self.rows if r.commit_ts is not None]

    def x(self, ts) -> float:
        return self.X0 + (ts - self.low) * self.UNIT

    def _repr_svg_(self) -> str:
        width = self.x(self.high) + 20
        height = self.TOP + self.ROW_H * len(self.rows) + 40
        out = svg_open(width, height, self.title)
        for i, row in enumerate(self.rows):
            y = self.TOP + self.ROW_H * i + self.ROW_H / 2
            end = row.commit_ts if row.commit_ts is not None else row.start_ts
            out.append(f'<line x1="{self.x(row.start_ts):.0f}" y1="{y:.0f}" x2="{self.x(end):.0f}" '
                       f'y2="{y:.0f}" stroke="#7aa6d8" stroke-width="6"/>')
            out.append(f'<rect class="start" x="{self.x(row.start_ts) - 5:.0f}" y="{y - 5:.0f}" '
                       'width="10" height="10" fill="white" stroke="#1f4e79" stroke-width="2"/>')
            if row.commit_ts is not None:
                out.append(f'<circle class="commit" cx="{self.x(row.commit_ts):.0f}" cy="{y:.0f}" '
                           'r="6" fill="#c0392b"/>')
            out.append(f'<text x="{self.x(end) + 10:.0f}" y="{y + 4:.0f}">'
                       f'{html.escape(row.text)}</text>')
        axis = self.TOP + self.ROW_H * len(self.rows) + 8
        out.append(f'<line x1="{self.X0}" y1="{axis}" x2="{self.x(self.high):.0f}" y2="{axis}" '
                   'stroke="black"/>')
        for ts in range(self.low, self.high + 1):
            out.append(f'<text x="{self.x(ts):.0f}" y="{axis + 14}" text-anchor="middle">{ts}</text>')
        out.append(f'<text x="{self.X0}" y="{axis + 30}">timestamp (open square = start: snapshot '
                   'read, closed circle = commit)</text></svg>')
        return "".join(out)

    def __repr__(self) -> str:
        return "\n".join([self.title] + [row.text for row in self.rows])
