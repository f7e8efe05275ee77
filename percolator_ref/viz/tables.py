"""Tables that render the same in a notebook (HTML) and a terminal (text).

:class:`CellTable` draws Bigtable the way the paper's Figure 4 does: one row
per Bigtable row, one column per physical column (``bal:data``,
``bal:lock``, ``bal:write`` and, when present, ``bal:notify`` /
``bal:ack_O``), each cell listing its versions newest first as
``ts: value``. Versions written by the last step are bold; versions the last
step erased are struck through. ``CellTable(..., columns="touched")`` shows
only the columns (and rows) the last step wrote or erased, for tables too
wide to read whole; ``.all_columns()`` gives the full table. It reads only
``Bigtable.dump()`` and the tracer's
:class:`~percolator_ref.trace.RowTransactionEvent` changes: no protocol
logic here.

:class:`Table` is a plain result table (headers and rows) for notebooks.
Both have a deterministic ``_repr_html_`` and a readable ``__repr__`` so
``pytest --nbval`` can compare them.
"""
from __future__ import annotations

import html
from typing import Iterable, Optional

from ..model import DEFAULT_TABLE
from .printable import escape_text

_KIND_ORDER = {"data": 0, "lock": 1, "write": 2, "notify": 3}
_ALWAYS = ("data", "lock", "write")

_TABLE_STYLE = ("border-collapse:collapse;font-family:monospace;font-size:13px;"
                "margin:4px 0")
_CELL_STYLE = "border:1px solid #999;padding:2px 8px;text-align:left;vertical-align:top"
_HEAD_STYLE = _CELL_STYLE + ";background:#eee"


def format_value(value) -> str:
    """How a stored value reads in a table: locks and write records as the paper prints them.

    One line of printable text: a control character or a terminal escape in the value
    (values may come from a student's code, or a counterexample file) reads as ``\\x1b``."""
    if isinstance(value, bytes):
        return repr(value)
    return escape_text(str(value))


def _kind_key(physical: str):
    column, _, kind = physical.partition(":")
    return (column, _KIND_ORDER.get(kind, 4), kind)


def _row_label(table: str, row: str, many_tables: bool) -> str:
    return row if not many_tables and table == DEFAULT_TABLE else f"{table}/{row}"


class CellTable:
    """Figure-4 style view of Bigtable.

    ``dump``: ``{table: {row: {physical_column: [(ts, value), ...]}}}`` as
    :meth:`Bigtable.dump` returns it (newest first). ``events``: the
    :class:`~percolator_ref.trace.RowTransactionEvent` s of the last step
    (their writes are bold, their erasures struck through). ``title``: a
    caption. ``columns``:

    - ``"all"`` (the default): every physical column; each Percolator column
      shows its ``data``, ``lock`` and ``write`` columns even when empty, so
      tables of successive steps line up (Figure 4);
    - ``"touched"``: only the physical columns the events wrote or erased, and
      only the rows they touched; the text says how many columns are hidden,
      and :meth:`all_columns` gives the full table.
    """

    def __init__(self, dump: dict, events: Iterable = (), title: str = "",
                 columns: str = "all"):
        if not isinstance(dump, dict):
            raise TypeError(f"dump must be the dict Bigtable.dump() returns, got {type(dump).__name__}")
        if columns not in ("all", "touched"):
            raise ValueError(f"columns must be 'all' or 'touched', got {columns!r}")
        self.dump = dump
        self.title = title
        self.mode = columns
        self.events = list(events)
        self.written: set = set()     # (table, row, physical column, ts)
        self.erased: dict = {}        # (table, row, physical column) -> [(ts, old value)]
        for event in self.events:
            for change in event.changes:
                key = (event.table, event.row, change.column)
                if change.erased:
                    self.erased.setdefault(key, []).append((change.ts, change.old))
                else:
                    self.written.add(key + (change.ts,))
        self.every_column = self._columns()
        self.columns = self.every_column if columns == "all" else self._touched_columns()
        self.rows = self._rows()

    @classmethod
    def from_cluster(cls, cluster, events: Iterable = (), title: str = "",
                     columns: str = "all") -> "CellTable":
        """The table of ``cluster.bigtable`` now, with ``events`` marking what changed."""
        return cls(cluster.bigtable.dump(), events, title, columns)

    def all_columns(self) -> "CellTable":
        """The same table with every column and row (``columns="all"``)."""
        return CellTable(self.dump, self.events, self.title, "all")

    @property
    def hidden_columns(self) -> list:
        """Physical columns not shown (``columns="touched"``: the ones the step left alone)."""
        return [c for c in self.every_column if c not in self.columns]

    # -- layout --------------------------------------------------------------
    def _touched(self) -> set:
        """``(table, row, physical column)`` the events wrote or erased."""
        return {key[:3] for key in self.written} | set(self.erased)

    def _touched_columns(self) -> list:
        return sorted({column for _, _, column in self._touched()}, key=_kind_key)

    def _columns(self) -> list:
        physical, logical = set(), set()
        for rows in self.dump.values():
            for cells in rows.values():
                physical.update(cells)
        for table, row, column in self.erased:
            physical.add(column)
        for name in physical:
            logical.add(name.partition(":")[0])
        for name in logical:
            physical.update(f"{name}:{kind}" for kind in _ALWAYS)
        return sorted(physical, key=_kind_key)

    def _rows(self) -> list:
        if self.mode == "touched":
            return sorted({(t, r) for t, r, _ in self._touched()})
        keys = {(t, r) for t, rows in self.dump.items() for r in rows}
        keys.update((t, r) for t, r, _ in self.erased)
        return sorted(keys)

    def versions(self, table: str, row: str, column: str) -> list:
        """``[(ts, value), ...]`` newest first in this table's snapshot."""
        return list(self.dump.get(table, {}).get(row, {}).get(column, []))

    def cell_lines(self, table: str, row: str, column: str) -> list:
        """The cell's lines as ``(text, mark)``: mark is "new", "erased" or ""."""
        lines = [(ts, f"{ts}: {format_value(v)}",
                  "new" if (table, row, column, ts) in self.written else "")
                 for ts, v in self.versions(table, row, column)]
        lines += [(ts, f"{ts}: {format_value(old)}", "erased")
                  for ts, old in self.erased.get((table, row, column), [])]
        lines.sort(key=lambda line: -line[0])
        return [(text, mark) for _, text, mark in lines]

    def cell_text(self, table: str, row: str, column: str) -> str:
        """Plain text of one cell (versions newest first, one per line)."""
        return "\n".join(text for text, mark in self.cell_lines(table, row, column)
                         if mark != "erased")

    # -- rendering -------------------------------------------------------------
    def _many_tables(self) -> bool:
        return len({t for t, _ in self.rows}) > 1

    def _repr_html_(self) -> str:
        many = self._many_tables()
        out = [f'<table class="percolator-cells" style="{_TABLE_STYLE}">']
        if self.title:
            out.append(f'<caption style="text-align:left;font-weight:bold">'
                       f'{html.escape(self.title)}</caption>')
        out.append("<thead><tr>" + f'<th style="{_HEAD_STYLE}">row</th>' + "".join(
            f'<th style="{_HEAD_STYLE}">{html.escape(c)}</th>' for c in self.columns)
            + "</tr></thead><tbody>")
        for table, row in self.rows:
            out.append(f'<tr><th style="{_HEAD_STYLE}">'
                       f'{html.escape(_row_label(table, row, many))}</th>')
            for column in self.columns:
                parts = []
                for text, mark in self.cell_lines(table, row, column):
                    text = html.escape(text)
                    if mark == "new":
                        text = f"<b>{text}</b>"
                    elif mark == "erased":
                        text = f'<s style="color:#a00">{text}</s>'
                    parts.append(text)
                out.append(f'<td style="{_CELL_STYLE}">{"<br>".join(parts)}</td>')
            out.append("</tr>")
        out.append("</tbody></table>")
        if self.mode == "touched":
            out.append(f"<div><i>{html.escape(self.hidden_note())}</i></div>")
        return "".join(out)

    def __repr__(self) -> str:
        """The table as text; every name and value escaped (:func:`escape_text`)."""
        many = self._many_tables()
        header = ["row"] + [escape_text(c) for c in self.columns]
        body = []
        for table, row in self.rows:
            cells = [[escape_text(_row_label(table, row, many))]]
            for column in self.columns:
                cells.append([_mark_text(text, mark)
                              for text, mark in self.cell_lines(table, row, column)] or [""])
            height = max(len(c) for c in cells)
            for i in range(height):
                body.append([c[i] if i < len(c) else "" for c in cells])
        text = _text_grid(header, body)
        legend = "(*new* = written by this step, ~erased~ = erased by it)"
        lines = ([escape_text(self.title, newlines=True)] if self.title else []) + [text]
        if self.written or self.erased:
            lines.append(legend)
        if self.mode == "touched":
            lines.append(self.hidden_note())
        return "\n".join(lines)

    def hidden_note(self) -> str:
        """What ``columns="touched"`` left out, and how to see it."""
        if not self.hidden_columns:
            return "(only what this step touched: here, every column of these rows)"
        return (f"(only what this step touched: {len(self.hidden_columns)} other columns "
                f"hidden; .all_columns() shows them)")


def _mark_text(text: str, mark: str) -> str:
    return {"new": f"*{text}*", "erased": f"~{text}~"}.get(mark, text)


def _text_grid(header: list, body: list) -> str:
    widths = [len(h) for h in header]
    for line in body:
        widths = [max(w, len(c)) for w, c in zip(widths, line)]

    def fmt(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule] + [fmt(line) for line in body])


class Table:
    """A small result table: ``Table(["anomaly", "outcome"], rows, title=...)``.

    Cells are shown with ``str``; ``_repr_html_`` and ``__repr__`` are
    deterministic. ``rows`` is a list of sequences (or of dicts keyed by header).
    """

    def __init__(self, headers: list, rows: Iterable, title: str = ""):
        self.headers = [str(h) for h in headers]
        self.rows = []
        for row in rows:
            if isinstance(row, dict):
                row = [row.get(h, "") for h in headers]
            row = list(row)
            if len(row) != len(self.headers):
                raise ValueError(f"rows must have {len(self.headers)} cells, got {row!r}")
            self.rows.append(row)
        self.title = title

    def column(self, header: str) -> list:
        i = self.headers.index(header)
        return [row[i] for row in self.rows]

    def _repr_html_(self) -> str:
        out = [f'<table class="percolator-table" style="{_TABLE_STYLE}">']
        if self.title:
            out.append(f'<caption style="text-align:left;font-weight:bold">'
                       f'{html.escape(self.title)}</caption>')
        out.append("<thead><tr>" + "".join(f'<th style="{_HEAD_STYLE}">{html.escape(h)}</th>'
                                           for h in self.headers) + "</tr></thead><tbody>")
        for row in self.rows:
            out.append("<tr>" + "".join(f'<td style="{_CELL_STYLE}">{html.escape(str(c))}</td>'
                                        for c in row) + "</tr>")
        out.append("</tbody></table>")
        return "".join(out)

    def __repr__(self) -> str:
        grid = _text_grid([escape_text(h) for h in self.headers],
                          [[escape_text(c) for c in row] for row in self.rows])
        title = escape_text(self.title, newlines=True)
        return f"{title}\n{grid}" if title else grid

    def __len__(self):
        return len(self.rows)


def installed_pandas():
    """The ``pandas`` module, or ``None`` where it is not installed (the browser site)."""
    try:
        import pandas
    except ImportError:
        return None
    return pandas


def show_whole_text() -> None:
    """Let pandas show every cell's text whole (``display.max_colwidth`` None).

    Without pandas it does nothing: a plain :class:`Table` never shortens a cell."""
    pandas = installed_pandas()
    if pandas is not None:
        pandas.set_option("display.max_colwidth", None)


def table(rows: Iterable, columns: Optional[list] = None, index=None):
    """Evidence as a table: a pandas DataFrame where pandas is installed (JupyterLab, the
    venv), the same rows as a plain :class:`Table` where it is not (the browser site).

    ``rows``: dicts (their keys are the columns) or sequences (give ``columns``).
    ``columns``: the columns to show, in order (default: the first row's keys).
    ``index``: one of the columns (or a list of them), shown first; the DataFrame is
    indexed by it.
    A DataFrame column of whole numbers with ``None`` among them is ``Int64`` (``<NA>``).
    """
    rows = list(rows)
    if columns is None:
        if rows and not isinstance(rows[0], dict):
            raise ValueError("columns must name the columns of rows that are not dicts")
        columns = list(rows[0]) if rows else []
    columns = list(columns)
    keys = [] if index is None else [index] if isinstance(index, str) else list(index)
    if not set(keys) <= set(columns) or (index is not None and not keys):
        raise ValueError(f"index must be one of the columns {columns} (or a list of them), "
                         f"got {index!r}")
    shown = keys + [c for c in columns if c not in keys]
    if any(isinstance(row, dict) and not set(shown) <= row.keys() for row in rows):
        bad = next(row for row in rows if isinstance(row, dict) and not set(shown) <= row.keys())
        raise ValueError(f"rows must hold every column {shown}, got {bad!r}")
    records = [row if isinstance(row, dict) else dict(zip(columns, row)) for row in rows]
    pandas = installed_pandas()
    if pandas is None:
        return Table(shown, records)
    frame = pandas.DataFrame(records, columns=columns)
    for column in columns:            # whole numbers with gaps: 9 and <NA>, not 9.0 and NaN
        values = [row[column] for row in records if row[column] is not None]
        if len(values) < len(records) and values and all(
                isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[column] = frame[column].astype("Int64")
    return frame.set_index(keys if len(keys) > 1 else keys[0]) if keys else frame
