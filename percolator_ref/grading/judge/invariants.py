"""What every schedule must keep, judged on the world's own record.

Histories for the snapshot-isolation checker (the world's transaction records
plus what the student's readers answered), the clients' answers held against
the store, and the protocol's invariants over the world's cells. Each function takes the world ``w``
(a :class:`~percolator_ref.grading.judge.trusted.TrustedWorld`, not imported here: it
imports this module).
"""
from __future__ import annotations

from typing import Optional

from percolator_ref.checking.checker import TxnRecord, check_history, same_value
from percolator_ref.model import (Cell, Lock, TxStatus, Write, WriteKind, data_col, split_column,
                                  write_col)

from ..framework import require
from .participants import Client
from .protocol_world import TABLE, kind_of, said


def history_with(w, readers: dict) -> list:
    """The world's transaction records plus each student reader's answered reads.

    ``readers``: ``{client: [(cell, value), ...]}``; a value's version is the
    commit_ts of the committed write of that value (-1 if none wrote it).
    """
    for record in w.cluster.history.records:
        if record.status == TxStatus.OPEN:       # its client crashed mid-commit
            record.status = TxStatus.CRASHED
    w.cluster.history.resolve_crashed(w.cluster.bigtable)
    records = list(w.cluster.history.records)
    for c, reads in readers.items():
        require(c.timestamps, f"{c.label} never took a start timestamp from the oracle")
        record = TxnRecord(c.label, c.timestamps[0], status=TxStatus.COMMITTED)
        record.reads = [(cell, version_of(records, cell, value), value) for cell, value in reads]
        for cell, version, value in record.reads:
            require(version != -1, f"{c.label} (start_ts {c.timestamps[0]}) read {value!r} from "
                                   f"{cell}: no transaction committed that value there (data of "
                                   f"a transaction that had not committed)")
        records.append(record)
    return records


def answered_reads(clients: dict, labels, cells, whose: str) -> dict:
    """``{client: [(cell, value), ...]}``: what each reader of ``labels`` answered for its Get
    of ``cells`` (``[(row, column), ...]``); Fail unless each answered one value per cell.
    ``whose``: what the feedback calls the code under test (e.g. "your cleanup")."""
    readers = {}
    for label in labels:
        result = clients[label].answer
        values = result.get("value") if isinstance(result, dict) else None
        require(isinstance(values, list) and len(values) == len(cells),
                f"reader {label} ({whose} plugged into Get) {said(result)}")
        readers[clients[label]] = list(zip([Cell(TABLE, *c) for c in cells], values))
    return readers


def writer_record(w, c: Client, values) -> Optional[TxnRecord]:
    """A student writer's record, from the world's own cells: it committed iff its primary
    has a write record pointing at its start_ts (``values``: ``[[row, column, value]]``)."""
    if not c.timestamps:
        return None
    start = c.timestamps[0]
    row, column, _ = values[0]
    found = [ts for ts, v in w.cluster.bigtable.versions(TABLE, row, write_col(column))
             if isinstance(v, Write) and v.start_ts == start]
    record = TxnRecord(c.label, start, found[0] if found else None,
                       TxStatus.COMMITTED if found else TxStatus.ABORTED)
    record.writes = [(Cell(TABLE, r, col), kind_of(v).name, v) for r, col, v in values]
    return record


def answered_truly(c: Client, record: Optional[TxnRecord]) -> None:
    """A writer that finished must answer commit() with what the store says it did."""
    if c.crashed or record is None:
        return
    require(c.answer == {"value": record.committed},
            f"{c.label} (start_ts {record.start_ts}) "
            + ("committed" if record.committed else "did not commit")
            + f" in the store, but its commit() answered {c.answer!r}")


def version_of(records, cell, value) -> Optional[int]:
    if value is None:
        return None
    for r in records:
        if r.committed and any(c == cell and same_value(v, value) for c, _, v in r.writes):
            return r.commit_ts
    return -1


def judge_history(records) -> None:
    report = check_history(records)
    require(report.ok, "; ".join(f"{a.name}: {a.description}" for a in report.anomalies[:2]))


def protocol_invariants(w, records=()) -> None:
    """No lock left behind, no write record pointing at erased data, no half-visible
    transaction, no commit after rollback (on the settled store); ``records``: the
    student's writers, besides the world's history."""
    no_dangling_write_records(w)
    dump = w.cluster.bigtable.dump(TABLE).get(TABLE, {})
    for row, columns in dump.items():
        for physical, versions in columns.items():
            column, kind = split_column(physical)
            require(kind != "lock", f"a lock was left behind on {row}.{column} at "
                                    f"{versions[0][0]} after every client finished and a "
                                    f"reader cleaned up")
    for record in list(w.cluster.history.records) + list(records):
        _all_or_nothing(w, record)


def no_dangling_write_records(w) -> None:
    """Every write record of a put points at data that is still there."""
    for row, columns in w.cluster.bigtable.dump(TABLE).get(TABLE, {}).items():
        for physical, versions in columns.items():
            column, kind = split_column(physical)
            for commit_ts, write in versions if kind == "write" else ():
                _points_at_data(columns, row, column, commit_ts, write)


def _points_at_data(columns, row, column, commit_ts, write) -> None:
    if not isinstance(write, Write) or write.kind is not WriteKind.PUT:
        return
    data = dict(columns.get(data_col(column), []))
    require(write.start_ts in data, f"the write record of {row}.{column} at {commit_ts} points at "
                                    f"data at {write.start_ts}, which was erased")


def _all_or_nothing(w, record) -> None:
    if not record.writes:
        return
    visible = []
    for cell, _, _ in record.writes:
        found = w.cluster.bigtable.versions(cell.table, cell.row, write_col(cell.column))
        visible.append(any(isinstance(v, Write) and v.start_ts == record.start_ts
                           for _, v in found))
    if record.committed:
        require(all(visible), f"{record.client} committed at {record.commit_ts} but only part of "
                              f"its writes have write records (a half-visible transaction)")
    else:
        require(not any(visible), f"{record.client} did not commit (rolled back), yet a write "
                                  f"record points at its start_ts {record.start_ts}")


def is_lock(value) -> bool:
    return isinstance(value, Lock)
