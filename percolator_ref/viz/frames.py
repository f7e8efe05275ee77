"""Evidence as pandas DataFrames, for notebooks and tools (never imported by the core).

Every table a notebook shows as evidence comes from one of these functions, so
a student can filter, group and plot it with pandas:

- :func:`history_frame`: one row per transaction of a recorded history;
- :func:`trace_frame`: one row per single-row Bigtable transaction (trace
  event), so ``trace_frame(events).groupby("step").size()`` counts row
  transactions by protocol step, as the tracer counts them;
- :func:`stepper_frame`: one row per frame of a :class:`~percolator_ref.viz.Stepper`;
- :func:`hermitage_frame` / :func:`schedule_frame`: the Hermitage scenarios,
  one row each, and one scenario's schedule side by side (T1 | T2 | T3);
- :func:`crash_frame`: crash a transaction at every crash point and tabulate
  what a later reader had to clean up and what it saw.

pandas is imported here only (when a ``*_frame`` function runs): the protocol modules stay
free of it. :func:`history_rows`, :func:`trace_rows`, :func:`stepper_rows`,
:func:`hermitage_rows` and :func:`schedule_rows` give the same rows as plain dicts,
for code that must also run where pandas is missing (the browser site; show them with
:func:`percolator_ref.viz.table`).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from ..checking.checker import History, TxnRecord
from ..errors import ClientCrash
from ..model import DEFAULT_TABLE
from ..step import CRASH_POINTS
from ..trace import RowTransactionEvent
from .tables import installed_pandas

# -- transactions, traces, Hermitage and crashes (notebooks 01-03) -----------------------



def pandas_module():
    """pandas, for the ``*_frame`` functions; a clear error where it is not installed."""
    pandas = installed_pandas()
    if pandas is None:
        raise ModuleNotFoundError("the *_frame functions need pandas, which is not installed "
                                  "here (the browser site): use trace_rows / stepper_rows "
                                  "and percolator_ref.viz.table", name="pandas")
    return pandas


HISTORY_COLUMNS = ["client", "start_ts", "commit_ts", "status", "reads", "writes"]
TRACE_COLUMNS = ["seq", "client", "table", "row", "step", "reads", "changes", "note"]
STEPPER_COLUMNS = ["frame", "who", "step", "note", "clock"]
HERMITAGE_COLUMNS = ["name", "anomaly", "T1", "T2", "T3", "committed", "SI", "observed",
                     "checker_ok", "reason"]
CRASH_COLUMNS = ["crash_after", "client", "commit_ts", "locks_left", "reader_cleanup",
                 "reader_sees"]


def history_records(history_or_records) -> list:
    """The :class:`TxnRecord` s of a History, a Cluster (its history) or an iterable of them."""
    source = history_or_records
    if hasattr(source, "history") and not isinstance(source, History):
        source = source.history              # a Cluster
    if isinstance(source, History):
        source = source.records
    try:
        records = list(source)
    except TypeError:
        raise TypeError("history_or_records must be a History, a Cluster or an iterable of "
                        f"TxnRecord, got {type(history_or_records).__name__}") from None
    bad = next((r for r in records if not isinstance(r, TxnRecord)), None)
    if bad is not None:
        raise TypeError(f"history_or_records must hold TxnRecord s, got {type(bad).__name__}")
    return records


def read_text(cell, version, value) -> str:
    """One read as ``A.bal=100 @2`` (the value and the commit_ts of the version read)."""
    return f"{cell}=(absent)" if version is None else f"{cell}={value} @{version}"


def write_text(cell, kind: str, value) -> str:
    """One buffered write as ``A.bal=95`` (``A.bal=(deleted)`` for a delete)."""
    return f"{cell}=(deleted)" if kind == "DELETE" else f"{cell}={value}"


def history_frame(history_or_records) -> "pandas.DataFrame":
    """One row per transaction: client, start_ts, commit_ts, status, reads, writes.

    ``history_or_records``: ``cluster.history``, a Cluster, or TxnRecords. ``reads``
    and ``writes`` are tuples of ``"cell=value @version"`` / ``"cell=value"``
    strings in the order the transaction made them (the first write is the
    primary). ``commit_ts`` is missing (``<NA>``) for a transaction that did
    not take one; ``status`` is as recorded (``committed``, ``aborted``,
    ``crashed``, ``unknown``, ``open``).
    """
    frame = pandas_module().DataFrame(history_rows(history_or_records), columns=HISTORY_COLUMNS)
    return frame.astype({"start_ts": "int64", "commit_ts": "Int64"})


def history_rows(history_or_records) -> list:
    """:func:`history_frame`'s rows as dicts keyed by its columns (``commit_ts`` None where
    the frame shows ``<NA>``; no pandas needed)."""
    return [dict(zip(HISTORY_COLUMNS, (r.client, r.start_ts, r.commit_ts, r.status,
                                       tuple(read_text(*read) for read in r.reads),
                                       tuple(write_text(*write) for write in r.writes))))
            for r in history_records(history_or_records)]


def change_text(change) -> str:
    """One physical-cell change as ``write bal:lock@7`` or ``erase bal:lock@7``."""
    return f"{'erase' if change.erased else 'write'} {change.column}@{change.ts}"


def trace_events(events) -> list:
    """RowTransactionEvents from ``events``: events, or stepper Frames (their events)."""
    try:
        items = list(events)
    except TypeError:
        raise TypeError("events must be an iterable of RowTransactionEvent (or stepper "
                        f"Frames), got {type(events).__name__}") from None
    flat = []
    for item in items:
        flat.extend(item.events if hasattr(item, "events") else [item])
    bad = next((e for e in flat if not isinstance(e, RowTransactionEvent)), None)
    if bad is not None:
        raise TypeError(f"events must hold RowTransactionEvent s, got {type(bad).__name__}")
    return flat


def trace_frame(events) -> "pandas.DataFrame":
    """One row per row transaction: seq, client, table, row, step, reads, changes, note.

    ``events``: what ``cluster.tracer.record()`` collected, or stepper Frames.
    ``step`` is the plain step name (``"prewrite-primary"``), so
    ``trace_frame(events).groupby("step").size()`` counts row transactions by
    step; ``reads`` is a tuple of the physical columns read, ``changes`` a
    tuple of ``"write bal:lock@7"`` / ``"erase bal:lock@7"``.
    """
    return pandas_module().DataFrame(trace_rows(events), columns=TRACE_COLUMNS
                                     ).astype({"seq": "int64"})


def trace_rows(events) -> list:
    """:func:`trace_frame`'s rows as dicts keyed by its columns (no pandas needed)."""
    return [dict(zip(TRACE_COLUMNS, (e.seq, e.client, e.table, e.row, str(e.step),
                                     tuple(e.reads), tuple(change_text(c) for c in e.changes),
                                     e.note)))
            for e in trace_events(events)]


def stepper_frame(frames) -> "pandas.DataFrame":
    """One row per stepper frame: frame, who moved, its step(s), the note, the clock (s).

    ``frames``: ``stepper.frames`` (or a slice of it). A crash frame has step
    ``"crash"``; the initial frame has no ``who``.
    """
    return pandas_module().DataFrame(stepper_rows(frames), columns=STEPPER_COLUMNS)


def stepper_rows(frames) -> list:
    """:func:`stepper_frame`'s rows as dicts keyed by its columns (no pandas needed)."""
    rows = []
    for f in frames:
        if not hasattr(f, "events") or not hasattr(f, "note"):
            raise TypeError(f"frames must hold stepper Frames, got {type(f).__name__}")
        steps = " ".join(str(e.step) for e in f.events) or f.action
        rows.append(dict(zip(STEPPER_COLUMNS, (f.index, f.actor, steps, f.note, f.clock))))
    return rows


def hermitage_results(results) -> list:
    """A list of HermitageResults from one result, a HermitageTable or an iterable of them."""
    items = [results] if hasattr(results, "schedule") else results
    try:
        items = list(items)
    except TypeError:
        raise TypeError("results must be a HermitageResult or an iterable of them, "
                        f"got {type(results).__name__}") from None
    bad = next((r for r in items if not hasattr(r, "schedule")), None)
    if bad is not None:
        raise TypeError(f"results must hold HermitageResults, got {type(bad).__name__}")
    return items


def moves_text(result, txn: str) -> str:
    """``txn``'s moves in ``result``'s schedule, numbered by their place in it."""
    return "; ".join(f"{i}. {m}" for i, m in enumerate(result.schedule, 1) if m.txn == txn)


def hermitage_frame(results) -> "pandas.DataFrame":
    """One row per Hermitage scenario, its transactions side by side.

    Columns: ``name``, ``anomaly``; ``T1``, ``T2``, ``T3``: each transaction's
    moves numbered by their place in the schedule, with what each read and
    how its commit ended (``""`` for a scenario without T3); ``committed``
    (``"T1 yes, T2 no"``); ``SI``: what snapshot isolation should do
    (``prevented`` / ``allowed``); ``observed``: what this run did;
    ``checker_ok``: the history passed the snapshot-isolation checker;
    ``reason``: one line, with the run's timestamps.
    """
    return pandas_module().DataFrame(hermitage_rows(results), columns=HERMITAGE_COLUMNS)


def hermitage_rows(results) -> list:
    """:func:`hermitage_frame`'s rows as dicts keyed by its columns (no pandas needed)."""
    rows = []
    for r in hermitage_results(results):
        commits = r.details.get("commits", {})
        committed = ", ".join(f"{t} {'yes' if commits.get(t) is True else 'no'}"
                              for t in r.transactions)
        rows.append(dict(zip(HERMITAGE_COLUMNS, (
            r.name, r.anomaly, moves_text(r, "T1"), moves_text(r, "T2"), moves_text(r, "T3"),
            committed, r.expected, r.observed, r.history_ok, r.reason))))
    return rows


def schedule_frame(result) -> "pandas.DataFrame":
    """One Hermitage scenario as a side-by-side schedule: one row per move, in order.

    Columns are the scenario's transactions (``T1``, ``T2`` and maybe ``T3``);
    the mover's column holds ``"get 1 -> 10"`` / ``"commit -> aborted: ..."``,
    the others are empty. The index (``step``) counts moves from 1.
    """
    rows = schedule_rows(result)
    frame = pandas_module().DataFrame([{n: row[n] for n in result.transactions} for row in rows],
                                      index=[row["step"] for row in rows])
    frame.index.name = "step"
    return frame


def schedule_rows(result) -> list:
    """:func:`schedule_frame`'s rows as dicts: ``step`` (from 1), then one key per
    transaction (no pandas needed)."""
    if not hasattr(result, "schedule"):
        raise TypeError(f"result must be a HermitageResult, got {type(result).__name__}")
    return [{"step": i, **{name: str(m) if m.txn == name else "" for name in result.transactions}}
            for i, m in enumerate(result.schedule, 1)]


def crash_points(writes: int) -> list:
    """Every crash point of a commit of ``writes`` cells: each row transaction count (one
    past the end included: the commit completes) and the named points."""
    return list(range(1, 2 * writes + 2)) + list(CRASH_POINTS)


def check_crash_arguments(make_cluster, writes) -> list:
    if not callable(make_cluster):
        raise TypeError(f"make_cluster must be callable (returning a fresh cluster), "
                        f"got {make_cluster!r}")
    if not isinstance(writes, dict) or not writes:
        raise ValueError(f"writes must be a non-empty dict {{(row, column): value}}, "
                         f"got {writes!r}")
    cells = []
    for key in writes:
        if not isinstance(key, tuple) or len(key) not in (2, 3):
            raise ValueError(f"writes keys must be (row, column) or (row, column, table), "
                             f"got {key!r}")
        row, column, table = (key + (DEFAULT_TABLE,))[:3]
        cells.append((row, column, table))
    return cells


def read_cells(cluster, cells) -> tuple:
    """A fresh reader's values of ``cells`` and the trace events its reads caused."""
    reader = cluster.begin()
    with cluster.tracer.record() as events:
        values = [reader.get(row, column, table=table) for row, column, table in cells]
    reader.commit()
    return values, events


def count_locks(cluster) -> int:
    """Lock versions left anywhere in the store."""
    return sum(len(versions) for rows in cluster.bigtable.dump().values()
               for columns in rows.values()
               for column, versions in columns.items() if column.endswith(":lock"))


def crash_run(make_cluster: Callable, cells: list, values: list, point) -> tuple:
    """One crash point: the client's fate, locks left, and what a reader did and saw."""
    cluster = make_cluster()
    before, _ = read_cells(cluster, cells)
    t = cluster.begin()
    for (row, column, table), value in zip(cells, values):
        t.set(row, column, value, table=table)
    try:
        client = "committed" if t.commit(crash_after=point) else "aborted"
    except ClientCrash:
        client = "crashed"
    locks = count_locks(cluster)
    seen, events = read_cells(cluster, cells)
    cleanup = ", ".join(dict.fromkeys(str(e.step) for e in events if e.step != "get")) or "-"
    sees = "its writes" if seen == values else "as before" if seen == before else "mixed"
    return (point, client, t.commit_ts, locks, cleanup, sees, *seen)


def crash_frame(make_cluster: Callable, writes: dict, points: Optional[Iterable] = None
                ) -> "pandas.DataFrame":
    """Crash a transaction writing ``writes`` at each crash point; a reader then resolves it.

    ``make_cluster()``: a fresh cluster holding the initial data (called once
    per point). ``writes``: ``{(row, column): value}`` (or ``(row, column,
    table)`` keys), in commit order: the first is the primary. ``points``:
    ``crash_after`` values (default :func:`crash_points`: every row
    transaction count, one past the end, and the named points).

    Columns: ``crash_after``; ``client``: ``crashed``, or ``committed`` when
    the point lies past the end; ``commit_ts`` (missing before the commit
    timestamp is taken); ``locks_left`` in the store after the crash;
    ``reader_cleanup``: the steps a fresh reader of every written cell ran
    besides its gets; ``reader_sees``: ``its writes``, ``as before`` or
    ``mixed`` (never, if the protocol holds); then one column per written
    cell (``"Bob.bal"``) with the value that reader saw.
    """
    cells = check_crash_arguments(make_cluster, writes)
    points = crash_points(len(cells)) if points is None else list(points)
    values = list(writes.values())
    rows = [crash_run(make_cluster, cells, values, p) for p in points]
    names = [f"{row}.{column}" if table == DEFAULT_TABLE else f"{table}/{row}.{column}"
             for row, column, table in cells]
    frame = pandas_module().DataFrame(rows, columns=CRASH_COLUMNS + names)
    return frame.astype({"commit_ts": "Int64"})
