"""A snapshot-isolation checker over recorded transaction histories.

Every transaction of a cluster (unless ``Cluster(record_history=False)``)
records its ``start_ts``, its outcome and ``commit_ts``, each read as
``(cell, version read, value)`` where the version is the commit timestamp of
the write record read (None: absent), and its writes. :func:`check_history`
checks the rules of snapshot isolation and names what breaks them:

- ``G1a aborted read``: a read returned a version whose writer did not commit;
- ``G1b intermediate read``: the value read is not the value its writer committed
  (compared exactly by :func:`same_value`: a NaN read back is not an anomaly);
- ``future read``: a read returned a version committed after the reader's start;
- ``stale read``: a read missed the newest version committed before its
  start (the root of read skew, G-single);
- ``lost update (P4)`` / ``G0 concurrent writers``: two committed writers of
  one cell whose [start_ts, commit_ts] intervals overlap (SI's
  rule that concurrent writers of a cell cannot both commit, broken);
- ``timestamp order``: a commit_ts not above its start_ts; a start_ts given
  to two transactions, or equal to another's commit_ts (is that write in the
  snapshot or not?); a commit_ts shared by two committed writers of one cell.
  Two committed transactions that write disjoint cells may share a commit_ts:
  every snapshot holds both or neither, so snapshot isolation is kept. The
  oracle never hands out such a tie, a computed commit timestamp can (TiKV's
  async commit takes ``max_ts + 1``; "It is possible two transactions have the
  same ``commit_ts`` ... This is fine as long as the two transactions don't
  meet": ``design/async-commit/globally-non-unique-timestamps.md`` in
  ``tikv/sig-transaction``);
- ``external order``: a transaction that began, in real time, after another
  one had committed (its client told so) read a cell that one wrote and
  missed the write, because its ``start_ts`` is below the writer's
  ``commit_ts``. Snapshot isolation alone allows it; the oracle's timestamps
  never produce it (they follow real time), timestamps from skewed clocks do
  unless the commit waits (Spanner's commit wait, notebook 10). Real time is
  the cluster clock: ``began_at`` is read before the start timestamp is
  asked for, ``ended_at`` when the commit is acknowledged; only records with
  both are checked.

Write skew (G2-item) is allowed by snapshot isolation and is not reported.
"""
from __future__ import annotations

import bisect

import threading
from dataclasses import dataclass, field
from typing import Optional

from ..model import Cell, TxStatus, WriteKind, write_col


@dataclass
class TxnRecord:
    """What one transaction did, as the checker needs it."""
    client: str
    start_ts: int
    commit_ts: Optional[int] = None
    status: TxStatus = TxStatus.OPEN
    reads: list = field(default_factory=list)     # [(cell, version, value)]
    writes: list = field(default_factory=list)    # [(cell, kind_name, value)]
    began_at: Optional[float] = None   # cluster clock before start_ts was asked for
    ended_at: Optional[float] = None   # cluster clock when its commit was acknowledged

    @property
    def committed(self) -> bool:
        return self.status == TxStatus.COMMITTED


class History:
    """The records of a cluster's transactions, in begin order. Thread-safe."""

    def __init__(self):
        self.records: list[TxnRecord] = []
        self._lock = threading.Lock()

    def begin(self, txn, began_at: Optional[float] = None) -> TxnRecord:
        """Record a new transaction; ``began_at``: real time before its start_ts was taken."""
        record = TxnRecord(txn.client, txn.start_ts, began_at=began_at)
        with self._lock:
            self.records.append(record)
        return record

    def finish(self, txn) -> None:
        record = txn.record
        record.status, record.commit_ts = txn.status, txn.commit_ts
        record.writes = [(m.cell, m.kind.name, m.value) for m in txn.writes.values()]
        if record.committed:             # acknowledged now (a crashed client never was)
            record.ended_at = txn.cluster.clock.now()

    def resolve_crashed(self, bigtable) -> None:
        """Settle each crashed transaction by its primary: committed iff it has a write record."""
        for record in self.records:
            if record.status not in (TxStatus.CRASHED, TxStatus.UNKNOWN):
                continue
            record.commit_ts = _primary_commit_ts(bigtable, record)
            record.status = TxStatus.COMMITTED if record.commit_ts is not None else TxStatus.ABORTED

    def clear(self) -> None:
        with self._lock:
            self.records.clear()

    def __len__(self):
        return len(self.records)


def _primary_commit_ts(bigtable, record: TxnRecord) -> Optional[int]:
    if not record.writes:
        return None
    primary: Cell = record.writes[0][0]
    for commit_ts, write in bigtable.versions(primary.table, primary.row, write_col(primary.column)):
        if write.start_ts == record.start_ts:
            return None if write.kind is WriteKind.ROLLBACK else commit_ts
    return None


@dataclass(frozen=True)
class Anomaly:
    name: str
    description: str
    clients: tuple


@dataclass
class CheckReport:
    """The checker's verdict: ``ok`` and the anomalies found, by name."""
    anomalies: list
    transactions: int
    committed: int
    reads: int

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def names(self) -> list:
        return sorted({a.name for a in self.anomalies})

    def __repr__(self):
        head = (f"snapshot-isolation check: {self.transactions} transactions, "
                f"{self.committed} committed, {self.reads} reads checked: ")
        if self.ok:
            return head + "OK, no anomaly"
        lines = [head + f"{len(self.anomalies)} anomalies ({', '.join(self.names())})"]
        lines += [f"  {a.name}: {a.description}" for a in self.anomalies[:20]]
        return "\n".join(lines)


def check_history(records) -> CheckReport:
    """Check a list of :class:`TxnRecord` (crashed ones resolved first) for SI anomalies."""
    records = list(records)
    committed = [r for r in records if r.committed]
    writers = _committed_writers(committed)
    by_start = {r.start_ts: r for r in records}
    anomalies = _check_timestamps(records)
    anomalies += _check_writers(writers)
    anomalies += check_external_order(records, writers)
    reads = 0
    index = {cell: CellVersions(versions) for cell, versions in writers.items()}
    empty = CellVersions([])
    for reader in records:
        for cell, version, value in reader.reads:
            reads += 1
            found = _check_read(reader, cell, version, value, index.get(cell, empty), by_start)
            if found:
                anomalies.append(found)
    return CheckReport(anomalies, len(records), len(committed), reads)


class CellVersions:
    """A cell's committed versions sorted by commit_ts, searchable in O(log n)."""

    def __init__(self, versions: list):
        self.versions = versions
        self.commit_ts = [v[0] for v in versions]
        self.by_commit_ts = {v[0]: v for v in versions}

    def newest_before(self, ts: int):
        """The newest version committed strictly before ``ts``, or None."""
        i = bisect.bisect_left(self.commit_ts, ts)
        return self.versions[i - 1] if i else None


def _committed_writers(committed) -> dict:
    """cell -> [(commit_ts, record, kind, value)] sorted by commit_ts."""
    writers: dict = {}
    for r in committed:
        for cell, kind, value in r.writes:
            writers.setdefault(cell, []).append((r.commit_ts, r, kind, value))
    for versions in writers.values():
        versions.sort(key=lambda v: v[0])
    return writers


def _check_timestamps(records) -> list:
    """``timestamp order`` anomalies: commit_ts <= start_ts, and timestamp clashes."""
    anomalies, seen = [], {}          # timestamp -> [(record, "start" or "commit")]
    for r in records:
        stamps = [(r.start_ts, "start")]
        if r.committed and r.commit_ts is not None:
            stamps.append((r.commit_ts, "commit"))
            if r.commit_ts <= r.start_ts:
                anomalies.append(Anomaly("timestamp order", f"{r.client} commit_ts {r.commit_ts} "
                                         f"<= start_ts {r.start_ts}", (r.client,)))
        for ts, role in stamps:
            for other, other_role in seen.get(ts, []):
                if other is not r:
                    anomalies += _timestamp_clash(ts, (other, other_role), (r, role))
            seen.setdefault(ts, []).append((r, role))
    return anomalies


def _timestamp_clash(ts: int, first: tuple, second: tuple) -> list:
    """Two transactions given ``ts``: an anomaly unless both committed at ``ts`` writing
    disjoint cells (a tie that no snapshot can tell apart)."""
    (r1, role1), (r2, role2) = first, second
    if role1 == role2 == "commit":
        shared = {c for c, _, _ in r1.writes} & {c for c, _, _ in r2.writes}
        if not shared:
            return []
        return [Anomaly("timestamp order", f"commit_ts {ts} given to both {r1.client} and "
                        f"{r2.client}, which both write {', '.join(sorted(map(str, shared)))}",
                        (r1.client, r2.client))]
    return [Anomaly("timestamp order", f"timestamp {ts} given to both {r1.client} and "
                    f"{r2.client}", (r1.client, r2.client))]


def _check_writers(writers: dict) -> list:
    """Snapshot isolation: committed writers of a cell never overlap in time."""
    anomalies = []
    for cell, versions in writers.items():
        for (c1, r1, _, _), (c2, r2, _, _) in zip(versions, versions[1:]):
            if r2.start_ts < c1:          # r2 started before r1 committed, yet both committed
                read_it = any(rc == cell for rc, _, _ in r2.reads)
                name = "lost update (P4)" if read_it else "G0 concurrent writers"
                anomalies.append(Anomaly(name, f"{r1.client} [{r1.start_ts},{c1}] and "
                                         f"{r2.client} [{r2.start_ts},{c2}] both committed "
                                         f"writes to {cell}", (r1.client, r2.client)))
    return anomalies


class FinishedWriters:
    """A cell's committed writers by the real time their commit was acknowledged."""

    def __init__(self, versions: list):
        timed = sorted((v[1].ended_at, v[0], v[1]) for v in versions if v[1].ended_at is not None)
        self.ended_at = [t for t, _, _ in timed]
        self.newest = []                 # newest commit among the first i+1 to finish
        for _, commit_ts, record in timed:
            if not self.newest or commit_ts > self.newest[-1][0]:
                self.newest.append((commit_ts, record))
            else:
                self.newest.append(self.newest[-1])

    def newest_finished_before(self, t: float):
        """``(commit_ts, record)`` of the newest commit acknowledged strictly before ``t``."""
        i = bisect.bisect_left(self.ended_at, t)
        return self.newest[i - 1] if i else None


def check_external_order(records, writers: dict) -> list:
    """``external order`` anomalies: a read that missed a commit acknowledged before the
    reader began (real time), its commit_ts being above the reader's start_ts."""
    finished = {cell: FinishedWriters(versions) for cell, versions in writers.items()}
    anomalies = []
    for reader in records:
        if reader.began_at is None:
            continue
        for cell in dict.fromkeys(c for c, _, _ in reader.reads):
            found = finished[cell].newest_finished_before(reader.began_at) \
                if cell in finished else None
            if found is not None and found[0] > reader.start_ts:
                writer = found[1]
                anomalies.append(Anomaly("external order", (
                    f"{reader.client} began at {reader.began_at:g} s, after {writer.client}'s "
                    f"commit of {cell} was acknowledged at {writer.ended_at:g} s, yet its "
                    f"start_ts {reader.start_ts} is below that commit_ts {found[0]}: it missed "
                    f"the write"), (reader.client, writer.client)))
    return anomalies


def _check_read(reader, cell, version, value, versions, by_start) -> Optional[Anomaly]:
    expected = versions.newest_before(reader.start_ts)
    if version is None:
        if expected is not None and expected[2] != "DELETE":
            return Anomaly("stale read", f"{reader.client} (start {reader.start_ts}) read {cell} "
                           f"as absent, but {expected[1].client} committed it at {expected[0]}",
                           (reader.client, expected[1].client))
        return None
    match = versions.by_commit_ts.get(version)
    if match is None:
        return _unknown_version(reader, cell, version, by_start)
    if version > reader.start_ts:
        return Anomaly("future read", f"{reader.client} (start {reader.start_ts}) read {cell} "
                       f"@ {version}, committed after its start", (reader.client, match[1].client))
    if expected is not None and expected[0] != version:
        return Anomaly("stale read", f"{reader.client} (start {reader.start_ts}) read {cell} "
                       f"@ {version}, but the newest before its start is @ {expected[0]}",
                       (reader.client, expected[1].client))
    if not same_value(match[3], value) and match[2] != "DELETE":
        return Anomaly("G1b intermediate read", f"{reader.client} read {value!r} from {cell} "
                       f"@ {version}; {match[1].client} committed {match[3]!r}",
                       (reader.client, match[1].client))
    return None


_KINDS = (bool, int, float, str, bytes)        # bool first: a bool is also an int


def _kind(value) -> type:
    """The value type a store keeps for ``value`` (a subclass counts as its base type)."""
    return next((k for k in _KINDS if isinstance(value, k)), type(value))


def same_value(committed, read) -> bool:
    """True iff ``read`` is exactly the value committed: same kind, same value.

    Stores keep a value's type (``1``, ``1.0`` and ``True`` stay distinct), so
    a change of type is a wrong read. Floats compare by ``float.hex``: a NaN
    read back equals the NaN committed (``nan != nan`` in Python), and
    ``-0.0`` differs from ``0.0``.
    """
    if _kind(committed) is not _kind(read):
        return False
    if isinstance(committed, float):
        return float(committed).hex() == float(read).hex()
    return committed == read


def _unknown_version(reader, cell, version, by_start) -> Anomaly:
    writer = next((r for r in by_start.values() if r.commit_ts == version), None)
    if writer is not None and not writer.committed:
        return Anomaly("G1a aborted read", f"{reader.client} read {cell} @ {version} written by "
                       f"{writer.client}, which {writer.status}", (reader.client, writer.client))
    return Anomaly("G1a aborted read", f"{reader.client} read {cell} @ {version}, which no "
                   f"committed transaction wrote", (reader.client,))
