"""Transactions on a timestamp axis (the paper's Figure 3), drawn with matplotlib.

As in the paper's Figure 3, a transaction's start timestamp (where it reads
its snapshot) is an open square and its commit timestamp (where its writes
become visible) a closed circle.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from ..model import TxStatus

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
    """
    import matplotlib.pyplot as plt
    rows = timeline_rows(records, labels)
    if not rows:
        raise ValueError("records must hold at least one transaction record")
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
