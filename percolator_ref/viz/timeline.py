"""Transactions on a timestamp axis (the paper's Figure 3), drawn with matplotlib."""
from __future__ import annotations


def plot_timeline(records, ax=None, title: str = "Transactions in timestamp order"):
    """Draw each transaction record as a bar from ``start_ts`` to ``commit_ts``.

    ``records``: :class:`~percolator_ref.checker.TxnRecord` s (``cluster.history.records``).
    Reads are marked at ``start_ts`` (the snapshot), commits at ``commit_ts``.
    Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt
    records = list(records)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.6 + 0.6 * len(records)))
    for y, r in enumerate(reversed(records)):
        end = r.commit_ts if r.commit_ts is not None else r.start_ts
        ax.plot([r.start_ts, end], [y, y], lw=6, color="#7aa6d8", solid_capstyle="butt")
        ax.plot([r.start_ts], [y], "o", color="#1f4e79")
        if r.commit_ts is not None:
            ax.plot([r.commit_ts], [y], "s", color="#c0392b")
        ax.text(end + 0.15, y, f"{r.client}: {r.status}", va="center", fontsize=9)
    ax.set_yticks([])
    ax.set_xlabel("timestamp (o = start: snapshot read, square = commit)")
    ax.set_title(title)
    lo = min(r.start_ts for r in records) - 1
    hi = max((r.commit_ts or r.start_ts) for r in records) + 3
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.7, len(records) - 0.3)
    return ax
