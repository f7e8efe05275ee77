"""Exercise 10: async commit (TiKV), resolving a lock whose primary lists the secondaries.

With async commit a transaction counts as committed once every prewrite has
succeeded ("we know that commit will not fail": ``design/async-commit/README.md``
in ``tikv/sig-transaction``). Its primary lock lists every secondary, each lock
carries a ``min_commit_ts``, and the commit timestamp is the largest of them
(``initial-design.md``). A reader that meets such a lock of a dead client
cannot decide at the primary alone: it checks every secondary (TiKV's
``CheckSecondaryLocks``, ``src/storage/txn/commands/check_secondary_locks.rs``):
all locked -> committed at the largest ``min_commit_ts``; one committed -> committed
at its commit_ts; one missing -> it writes a rollback record there, so that the
prewrite, if it is only late, is refused, and the transaction is rolled back.

The student subclasses :class:`~percolator_ref.cleanup.Cleanup` as
``AsyncResolve`` and writes ``resolve_primary(primary, start_ts, holder)``. The
variant's steps (:class:`~percolator_ref.variants.async_commit.AsyncCleanup`) and
the paper's ``Cleanup.resolve_primary`` are hidden in the sandbox. The grader's
:class:`AsyncWorld` runs :class:`~percolator_ref.variants.async_commit.AsyncCommit`:
its store keeps ``max_ts`` (raised by every read it serves, before it
serves it, as TiKV's concurrency manager is), its timestamps are even, and its
reference writer is an async-commit transaction. The last checks explore every
small interleaving of a reader (the student's resolve) with a three-cell
async-commit transfer, its crash included, and of two readers racing.
"""
from __future__ import annotations

from percolator_ref import rows
from percolator_ref.model import Cell, Write, WriteKind, data_col, lock_col, write_col
from percolator_ref.step import Step
from percolator_ref.variants.async_commit import AsyncCommit, MaxTs, max_ts_of
from percolator_ref.variants.locks import TiKVLock

from ..client.ex10_async_commit import SHARED, exercise
from ..framework import require
from .ex09_rollback_records import commit_of, settled_invariants, writer_answered
from .invariants import answered_reads, history_with, judge_history
from .participants import Participant
from .protocol_world import TABLE, amounts, returned, said, timeline
from .trusted import TrustedWorld


BALANCES = ("b0", "j0", "a0", "b1", "j1", "a1", "x2")
ROWS = ("Bob", "Joe", "Ann")                   # the transfer's cells, Bob.bal the primary
READS = frozenset({Step.GET.value, Step.SCAN.value})
PREWRITES = frozenset({Step.PREWRITE_PRIMARY.value, Step.PREWRITE_SECONDARY.value})


def _p(*stamps):
    """Even timestamps (an async-commit cluster's start_ts are even), balances, and the
    min_commit_ts of the three locks (odd, as the store computes them)."""
    def params(rng):
        found = timeline(rng, *stamps)
        p = {name: 2 * ts if name != "t0" else ts for name, ts in found.items()}
        p["mct"] = [p["s_w"] + 1, p["s_w"] + 3, p["s_w"] + 5]    # Bob, Joe, Ann: Ann's largest
        p["s_r"] = p["s_w"] + 8                 # above every min_commit_ts
        return dict(p, **amounts(rng, *BALANCES))
    return params


class AsyncWorld(TrustedWorld):
    """A trusted world running TiKV's async commit; its store's max_ts is raised by every
    read it serves, before it hands the row out."""

    def __init__(self, trial, ttl: float = 10.0, register: bool = True):
        super().__init__(trial.hub, trial.p["t0"], trial.deadline, ttl, [AsyncCommit()])
        self.max_ts: MaxTs = max_ts_of(self.cluster)
        SHARED[id(self)] = self.max_ts
        if register:
            trial.worlds.append(self)

    def serve_row(self, c, msg: dict) -> None:
        if msg["step"] in READS and c.timestamps:
            self.touch(("max_ts",), "w")
            self.max_ts.update(c.timestamps[0])
        if c.host == "trusted" and msg["step"] in PREWRITES:    # the async writer's read it
            self.touch(("max_ts",), "r")
        return super().serve_row(c, msg)

    def plain(self) -> bool:
        """Its one piece of state besides the cluster's, max_ts, is in the footprints (raised
        by a read, read by the trusted writer's prewrites): the explorer's sleep sets apply."""
        return type(self) is AsyncWorld and tuple(self.cluster.bigtable.interceptors) == self.guards

    def fingerprint(self):
        """None: never merged. Merging states of this world by the plain fingerprint (max_ts
        added) was found to depend on the secret (the same entry ran other schedules under
        secrets 0 and 5-9), which the schedules must not; sleep sets alone do not."""
        return None

    def async_locked(self, values: dict, start: int, client: str, min_commit: list) -> None:
        """``values`` prewritten with async commit at ``start`` by ``client``: the first cell
        the primary, listing the others; lock i carries ``min_commit[i]``; a value None is a
        delete (a lock of kind DELETE, no data)."""
        self.stamp(start)
        cells = [Cell(TABLE, row, column) for row, column in values]
        for i, ((row, column), value) in enumerate(values.items()):
            kind = WriteKind.DELETE if value is None else WriteKind.PUT
            lock = TiKVLock(start, cells[0], i == 0, client, kind,
                            min_commit_ts=min_commit[i], secondaries=tuple(cells[1:]) if i == 0 else ())
            with self.row(row) as rt:
                if value is not None:
                    rt.write(data_col(column), start, value)
                rt.write(lock_col(column), start, lock)
        self.cluster.lockservice.register(client)

    def settled_at(self, row: str, start: int, commit_ts) -> None:
        """``row``.bal of the transaction at ``start`` committed at ``commit_ts`` (None: rolled
        back, with a rollback record)."""
        with self.row(row) as rt:
            if commit_ts is None:
                rows.apply(rt, rows.rollback_writes("bal", start)
                           + [(write_col("bal"), start, Write(start, WriteKind.ROLLBACK))])
            else:
                rows.apply(rt, rows.commit_writes("bal", Write(start), commit_ts, False))


# -- what the checks build and read -----------------------------------------------------------

def _crashed(trial, p, rows_locked=ROWS, deleted=()):
    """Bob, Joe, Ann committed at (s0, c0); W prewrote a transfer of ``rows_locked`` with
    async commit at s_w (Bob primary, listing Joe and Ann; the rows ``deleted`` deleted) and
    died."""
    w = AsyncWorld(trial)
    w.committed({(row, "bal"): p[f"{row[0].lower()}0"] for row in ROWS}, p["s0"], p["c0"])
    values = {(row, "bal"): None if row in deleted else p[f"{row[0].lower()}1"] for row in ROWS}
    w.async_locked({k: v for k, v in values.items() if k[0] in rows_locked}, p["s_w"], "W",
                   p["mct"])
    if rows_locked != ROWS:                    # the primary lists every cell all the same
        _list_all(w, p)
    w.crash("W")
    return w


def _list_all(w, p) -> None:
    with w.row("Bob") as rt:
        lock = rt.read(lock_col("bal"), p["s_w"], p["s_w"])[1]
        secondaries = tuple(Cell(TABLE, row, "bal") for row in ROWS[1:])
        rt.write(lock_col("bal"), p["s_w"], TiKVLock(
            lock.start_ts, lock.primary, True, lock.client, lock.kind,
            min_commit_ts=lock.min_commit_ts, secondaries=secondaries))


def _read(w, start: int, row: str) -> dict:
    w.reach(start)
    result = w.client("reader", [[row, "bal"]]).answer
    got = result.get("value") if isinstance(result, dict) else None
    return {"value": got[0]} if isinstance(got, list) and len(got) == 1 else result


def _commit_ts_of(w, row: str, start: int):
    return commit_of(w, Cell(TABLE, row, "bal"), start)


def _locks_of(w, start: int) -> list:
    return [row for row in ROWS if any(ts == start for ts, _ in w.cluster.bigtable.versions(
        TABLE, row, lock_col("bal")))]


# -- 1. every lock prewritten: committed --------------------------------------------------

@exercise.check("every lock prewritten: a reader of a secondary commits the transaction at the "
                "largest min_commit_ts", params=_p("s0", "c0", "s_w"))
def _committed(trial, p):
    w = _crashed(trial, p)
    got = _read(w, p["s_r"], "Joe")
    _committed_ok(w, got, p, "Joe")


def _committed_ok(w, got, p, row: str, deleted: bool = False) -> None:
    want = max(p["mct"])
    rule = (f"W (start_ts {p['s_w']}) prewrote every cell with async commit: its primary lists "
            f"Joe.bal and Ann.bal and every lock is there, so W is committed, at the largest "
            f"min_commit_ts of its locks: {want} (they are {', '.join(map(str, p['mct']))} on "
            f"Bob, Joe, Ann)")
    found = _commit_ts_of(w, "Bob", p["s_w"])
    require(found == want, f"{rule}; the primary Bob.bal "
            + (f"was committed at {found}" if found is not None else "was not committed"))
    require(_commit_ts_of(w, row, p["s_w"]) == want,
            f"{rule}: resolve_primary returns {want} and {row}.bal is rolled forward at it; "
            f"{row}.bal's commit: {_commit_ts_of(w, row, p['s_w'])}")
    if deleted:
        record = next((v for ts, v in w.cluster.bigtable.versions(TABLE, row, write_col("bal"))
                       if ts == want), None)
        require(isinstance(record, Write) and record.kind is WriteKind.DELETE,
                f"{rule}. W deletes {row}.bal (its lock is of kind DELETE, lock.kind): its commit "
                f"record is a delete too; yours at {want}: {record}")
    value = None if deleted else p[f"{row[0].lower()}1"]
    require(returned(got, value), f"{rule}; the reader (start_ts {p['s_w'] + 8}) then reads "
                                  f"{value}; it {said(got)}")


WRITTEN, DELETED = ("every cell written", "the primary and a secondary deleted (locks of kind "
                                            "DELETE, no data)")


@exercise.check("every lock prewritten: a reader of the primary commits it at the largest "
                "min_commit_ts", params=_p("s0", "c0", "s_w"), classes=(WRITTEN, DELETED))
def _committed_primary(trial, p):
    p = dict(p, mct=sorted(p["mct"], reverse=True))       # the primary's own is the largest
    for value_class in trial.each_class():
        w = _crashed(trial, p, deleted=("Bob", "Joe") if value_class == DELETED else ())
        kinds = {w.cluster.bigtable.versions(TABLE, row, lock_col("bal"))[0][1].kind
                 for row in ("Bob", "Joe")}
        trial.covered(value_class, {frozenset({WriteKind.PUT}): WRITTEN,
                                    frozenset({WriteKind.DELETE}): DELETED}.get(frozenset(kinds),
                                                                                "other"))
        _committed_ok(w, _read(w, p["s_r"], "Bob"), p, "Bob", value_class == DELETED)


# -- 2. a secondary missing: rolled back ---------------------------------------------------------

NOTHING = "a secondary never prewritten, nothing on it"
SECONDARY_BELOW = "a secondary never prewritten, another transaction's lock on it below start_ts"
SECONDARY_ABOVE = "a secondary never prewritten, another transaction's lock on it above start_ts"
PRIMARY_BELOW = "the primary never prewritten, another transaction's lock on it below start_ts"
PRIMARY_ABOVE = "the primary never prewritten, another transaction's lock on it above start_ts"
OTHERS = {SECONDARY_BELOW: ("Ann", "s_a"), SECONDARY_ABOVE: ("Ann", "s_v"),
          PRIMARY_BELOW: ("Bob", "s_a"), PRIMARY_ABOVE: ("Bob", "s_v")}


def _missing_world(trial, p, value_class):
    """W (dead) prewrote all but one cell with async commit; that cell holds nothing, or X's
    lock (X alive, async too) below or above W's start_ts: W's prewrite there met X's lock.
    The primary missing: TiKV's client sends the prewrites in parallel, and the secondaries'
    landed."""
    if value_class == NOTHING:
        return _crashed(trial, p, rows_locked=("Bob", "Joe"))
    w = AsyncWorld(trial)
    w.committed({(row, "bal"): p[f"{row[0].lower()}0"] for row in ROWS}, p["s0"], p["c0"])
    where, stamp = OTHERS[value_class]
    values = {(row, "bal"): p[f"{row[0].lower()}1"] for row in ROWS}
    for ts in sorted((p[stamp], p["s_w"])):
        if ts == p[stamp]:
            w.async_locked({(where, "bal"): p["x2"]}, ts, "X", [ts + 1])
        elif where == "Ann":
            w.async_locked({k: v for k, v in values.items() if k[0] != "Ann"}, ts, "W", p["mct"])
            _list_all(w, p)
        else:
            _secondaries_locked(w, p, values)
    w.crash("W")
    return w


def _secondaries_locked(w, p, values) -> None:
    """W's async-commit locks on Joe.bal and Ann.bal (primary Bob.bal), not on the primary."""
    w.stamp(p["s_w"])
    for i, ((row, column), value) in enumerate(values.items()):
        if row != "Bob":
            with w.row(row) as rt:
                rt.write(data_col(column), p["s_w"], value)
                rt.write(lock_col(column), p["s_w"], TiKVLock(
                    p["s_w"], Cell(TABLE, "Bob", "bal"), False, "W", WriteKind.PUT,
                    min_commit_ts=p["mct"][i]))
    w.cluster.lockservice.register("W")


def _missing_class(w, p) -> str:
    """Which cell of the transfer holds no lock of W, and what it holds instead (X's lock,
    below or above W's start_ts, or nothing)."""
    missing = [row for row in ROWS if row not in _locks_of(w, p["s_w"])]
    if len(missing) != 1 or missing == ["Joe"]:
        return "other"
    others = [ts for ts, lock in w.cluster.bigtable.versions(TABLE, missing[0], lock_col("bal"))
              if getattr(lock, "client", None) == "X"]
    where = "the primary" if missing == ["Bob"] else "a secondary"
    if not others:
        return f"{where} never prewritten, nothing on it"
    side = "below" if others[0] < p["s_w"] else "above"
    return (f"{where} never prewritten, another transaction's lock on it {side} start_ts"
            if len(others) == 1 else "other")


@exercise.check("a secondary never prewritten: the transaction is rolled back",
                params=_p("s0", "c0", "s_a", "s_w", "s_v"),
                classes=(NOTHING, SECONDARY_BELOW, SECONDARY_ABOVE, PRIMARY_BELOW, PRIMARY_ABOVE))
def _missing(trial, p):
    for value_class in trial.each_class():
        w = _missing_world(trial, p, value_class)
        trial.covered(value_class, _missing_class(w, p))
        got = _read(w, p["s_r"], "Joe")
        _missing_ok(w, got, p, value_class)


def _missing_ok(w, got, p, value_class) -> None:
    where, stamp = OTHERS.get(value_class, ("Ann", None))
    if stamp:
        rule = (f"W (start_ts {p['s_w']}) died before its prewrite of {where}.bal landed; "
                f"{where}.bal holds X's lock at {p[stamp]} (a live transaction's, not W's): not "
                f"every prewrite succeeded, so W is rolled back")
    else:
        rule = (f"W (start_ts {p['s_w']}) died before prewriting Ann.bal, which its primary "
                f"lists: not every prewrite succeeded, so W never committed and is rolled back "
                f"(its prewrite of Ann.bal, if it is only late, must then fail)")
    for row in ("Bob", "Joe"):
        require(_commit_ts_of(w, row, p["s_w"]) is None,
                f"{rule}; {row}.bal was committed at {_commit_ts_of(w, row, p['s_w'])}")
    left = _locks_of(w, p["s_w"])
    require("Joe" not in left and "Bob" not in left, f"{rule}; W's locks are still on {left}")
    if stamp:
        lock, data = (dict(w.cluster.bigtable.versions(TABLE, where, column)).get(p[stamp])
                      for column in (lock_col("bal"), data_col("bal")))
        require(getattr(lock, "client", None) == "X" and data == p["x2"],
                f"{rule}; X's lock and data on {where}.bal at {p[stamp]} are not yours to touch, "
                f"and they are gone or changed")
    if where == "Ann":                          # W's primary was prewritten: both get a record
        for row, what in (("Ann", "where its prewrite never landed, in the row transaction that "
                                  "found it missing"),
                          ("Bob", "its primary, whose lock and data are erased")):
            record = dict(w.cluster.bigtable.versions(TABLE, row, write_col("bal"))).get(p["s_w"])
            require(isinstance(record, Write) and record.kind is WriteKind.ROLLBACK
                    and record.start_ts == p["s_w"],
                    f"{rule}: a rollback record at W's own start_ts {p['s_w']} on {row}.bal, "
                    f"{what} (a later prewrite of W there is refused; at another timestamp it "
                    f"would stand in other transactions' way); {row}.bal's write record at "
                    f"{p['s_w']}: {record}")
    require(returned(got, p["j0"]), f"{rule}; the reader then reads {p['j0']}; it {said(got)}")


# -- 3. already decided ----------------------------------------------------------------------

@exercise.check("a primary already committed (or rolled back) by another reader decides",
                params=_p("s0", "c0", "s_w"))
def _decided(trial, p):
    got = {}
    for outcome in ("committed", "rolled back"):
        w = _crashed(trial, p)
        commit_ts = max(p["mct"]) if outcome == "committed" else None
        w.settled_at("Bob", p["s_w"], commit_ts)        # a reader decided, then died
        got[outcome] = (_read(w, p["s_r"], "Joe"), _commit_ts_of(w, "Joe", p["s_w"]),
                        _locks_of(w, p["s_w"]))
    _decided_ok(got, p)


def _decided_ok(got, p) -> None:
    c = max(p["mct"])
    value, joe, left = got["committed"]
    rule = (f"another reader committed W's primary Bob.bal at {c} and died: resolve_primary "
            f"returns {c} (the primary decides), and Joe.bal is rolled forward at it")
    require(joe == c and "Joe" not in left, f"{rule}; Joe.bal's commit: {joe}, locks left on {left}")
    require(returned(value, p["j1"]), f"{rule}; the reader reads {p['j1']}; it {said(value)}")
    value, joe, left = got["rolled back"]
    rule = (f"another reader rolled W's primary Bob.bal back (a rollback record at {p['s_w']}) "
            f"and died: a rollback record is not a commit; resolve_primary returns None and "
            f"Joe.bal is rolled back")
    require(joe is None and "Joe" not in left, f"{rule}; Joe.bal's commit: {joe}, locks left on "
                                               f"{left}")
    require(returned(value, p["j0"]), f"{rule}; the reader reads {p['j0']}; it {said(value)}")


# -- 4. every small interleaving -------------------------------------------------------------

FAMILY_TTL = 0.004
CELLS = (("Joe", "bal"), ("Bob", "bal"))


def _family_p(rng):
    return dict(timeline(rng), **amounts(rng, *BALANCES))


def _family(p, readers):
    def family(w):
        start = w.oracle.peek()
        w.committed({(row, "bal"): p[f"{row[0].lower()}0"] for row in ROWS}, start, start + 2)
        writer = Participant("W", "async_writer", (
            [[row, "bal", p[f"{row[0].lower()}1"]] for row in ROWS], id(w)), host="trusted",
            crashable=True)
        return [writer] + [Participant(r, "reader", (CELLS,)) for r in readers]
    return family


def _judge(labels):
    def judge(w, clients) -> None:
        readers = answered_reads(clients, labels, CELLS, "your resolve")
        records = history_with(w, readers)
        settled_invariants(w, records)
        writer_answered(w, clients["W"], " (once every prewrite succeeded)")
        judge_history(records)
    return judge


@exercise.check("every interleaving of a reader (your resolve) with an async-commit transfer of "
                "three cells, and the transfer's crash", params=_family_p, limit=60.0)
def _race_reader(trial, p):
    trial.explore(_family(p, ["R"]), _judge(["R"]), ttl=FAMILY_TTL,
                  world=lambda: AsyncWorld(trial, FAMILY_TTL, register=False))


@exercise.check("every interleaving of two readers (your resolve) racing to resolve an "
                "async-commit transfer", params=_family_p, limit=60.0)
def _race_readers(trial, p):
    trial.explore(_family(p, ["R1", "R2"]), _judge(["R1", "R2"]), ttl=FAMILY_TTL, crashes=0,
                  preemptions=1, world=lambda: AsyncWorld(trial, FAMILY_TTL, register=False))
    for preemptions, crashes in ((1, 0), (0, 1)):  # the transfer died with every prewrite landed
        trial.explore(_half_prewritten(p, complete=True),
                      lambda w, clients: _judge_half(w, clients, complete=True), ttl=FAMILY_TTL,
                      preemptions=preemptions, crashes=crashes,
                      world=lambda: AsyncWorld(trial, FAMILY_TTL, register=False))


def _half_prewritten(p, complete: bool = False):
    """W prewrote Bob.bal (its primary, listing Joe.bal and Ann.bal) and Joe.bal with async
    commit, and died before Ann.bal; R1 reads Joe then Bob, R2 Bob then Joe. Either reader may
    die anywhere: a cleaner that wrote Ann.bal's rollback record and died before the primary
    leaves a record on a secondary beside a primary still locked. ``complete``: W prewrote
    Ann.bal too, so it is committed at the largest min_commit_ts (the history says so): a
    reader that claims the primary before deciding leaves the other reader a primary with
    neither lock nor commit."""
    def family(w):
        start = w.oracle.peek()
        w.committed({(row, "bal"): p[f"{row[0].lower()}0"] for row in ROWS}, start, start + 2)
        q = {"s_w": start + 4, "mct": [start + 5, start + 7, start + 9]}
        values = {(row, "bal"): p[f"{row[0].lower()}1"] for row in ROWS[:3 if complete else 2]}
        w.async_locked(values, q["s_w"], "W", q["mct"])
        if complete:
            w.record_committed(values, q["s_w"], max(q["mct"]))
        else:
            _list_all(w, q)
        w.crash("W")
        return [Participant("R1", "reader", (CELLS,), crashable=True),
                Participant("R2", "reader", (CELLS[::-1],), crashable=True)]
    return family


def _judge_half(w, clients, complete: bool = False) -> None:
    readers = {}
    for label, cells in (("R1", CELLS), ("R2", CELLS[::-1])):
        if not clients[label].crashed:
            readers.update(answered_reads(clients, [label], cells, "your resolve"))
    records = history_with(w, readers)
    settled_invariants(w, records)
    if complete:                                # every prewrite landed: committed, at its ts
        transfer = max((r for r in records if r.client.startswith("world@")),
                       key=lambda r: r.start_ts)
        for row in ROWS:
            found = commit_of(w, Cell(TABLE, row, "bal"), transfer.start_ts)
            require(found == transfer.commit_ts,
                    f"W prewrote every cell with async commit and died: it committed, at the "
                    f"largest min_commit_ts {transfer.commit_ts}; {row}.bal's commit: {found}")
        judge_history(records)
        return
    for row in ROWS:
        committed = [v.start_ts for _, v in w.cluster.bigtable.versions(TABLE, row, write_col("bal"))
                     if isinstance(v, Write) and v.kind is not WriteKind.ROLLBACK
                     and v.start_ts not in {r.start_ts for r in records}]
        require(committed == [], f"W never prewrote Ann.bal, which its primary lists: it never "
                                 f"committed, yet {row}.bal has a commit record pointing at "
                                 f"{committed[0] if committed else None}")
    judge_history(records)


@exercise.check("every interleaving of two readers (your resolve) of a transfer that died "
                "half-prewritten, either reader overtaken or crashing half-way", params=_family_p,
                limit=30.0)
def _race_half(trial, p):
    for preemptions, crashes in ((1, 0), (0, 1)):     # overtaken half-way; dead half-way
        trial.explore(_half_prewritten(p), _judge_half, ttl=FAMILY_TTL, preemptions=preemptions,
                      crashes=crashes, world=lambda: AsyncWorld(trial, FAMILY_TTL, register=False))


def _coming_back(p):
    """W's async-commit transfer of Bob.bal (its primary, listing Joe.bal and Ann.bal), Joe.bal
    and Ann.bal, whose holder stalls past its TTL and comes back before Ann.bal's prewrite
    lands; R reads Joe.bal (a secondary already prewritten: rolled back if its resolution
    says so while the holder, alive again, still prewrites), then Bob.bal."""
    def family(w):
        start = w.oracle.peek()
        w.committed({(row, "bal"): p[f"{row[0].lower()}0"] for row in ROWS}, start, start + 2)
        writer = Participant("W", "async_writer", (
            [[row, "bal", p[f"{row[0].lower()}1"]] for row in ROWS], id(w), True),
            host="trusted")
        return [writer, Participant("R", "reader", (CELLS,))]
    return family


def _judge_back(w, clients) -> None:
    readers = answered_reads(clients, ["R"], CELLS, "your resolve")
    records = history_with(w, readers)
    settled_invariants(w, records)
    writer_answered(w, clients["W"], " (once every prewrite succeeded)")
    judge_history(records)


@exercise.check("every interleaving of a reader (your resolve) with an async-commit transfer "
                "whose holder stalls past its TTL and comes back before its last prewrite lands",
                params=_family_p, limit=30.0)
def _race_back(trial, p):
    trial.explore(_coming_back(p), _judge_back, ttl=FAMILY_TTL, crashes=0, preemptions=3,
                  world=lambda: AsyncWorld(trial, FAMILY_TTL, register=False))
