"""Exercise 5: the timestamp oracle (section 2.3), checked by the trusted world.

The student writes ``Oracle(state_path, first_timestamp=1, range_size=1000)``
with ``get_timestamp()``. The paper's oracle hands out strictly increasing
timestamps; it allocates a range of timestamps by writing the highest
allocated timestamp to stable storage and then serves that range from
memory; after a restart its timestamps jump forward to the highest allocated
timestamp, never backwards. Here the "highest allocated timestamp" is kept
as the *mark*: one integer in the file ``state_path``, the first timestamp
NOT covered by the ranges allocated so far (``None``: memory only).

The student's oracle runs in the sandbox as a client of the grader's
:class:`OracleWorld`, and its stable storage is the world's :class:`~.disk.Disk`:
``state_path`` names a file of that disk, and every file call the oracle makes
on it (open, write, replace, ...) is a message the world applies and records
(:mod:`..client.vdisk`). So the world knows, at the moment each timestamp is served
(the oracle's answer to a call), which mark is on its disk; a crash is a
client the world stops answering at one of its disk calls; a restart is a new
oracle object (a fresh client) on the same disk. The last check crashes the
oracle at every disk call of a run with restarts, and in the middle of every
write (a torn write: the file then holds the first half of the characters written,
or only the first of them), and restarts it there. ``first_timestamp`` and ``range_size`` come from
the per-run secret; which crash points run does not.
"""
from __future__ import annotations

from percolator_ref.trace import Change, RowTransactionEvent

from ..channel import DISK_MUTATIONS, DISK_ROOT
from ..client.ex05_oracle import exercise
from ..framework import Fail, require, said
from .disk import Disk
from .interactive import Counterexample
from .trusted import TrustedWorld


STATE = DISK_ROOT + "/oracle.state"
NAME = "oracle.state"


def _sizes(rng) -> dict:
    return {"t0": rng.randrange(10, 10 ** 6), "first": rng.randrange(10, 10 ** 6),
            "size": rng.randrange(20, 120)}


# -- the world (the grader's own record) ------------------------------------------------------

class OracleWorld(TrustedWorld):
    """A world whose disk holds the oracle's state; ``crash_at``: the disk call that kills
    (before it applies; ``torn``: part-way through it, a write of which only a prefix lands:
    :data:`TORN` names how much)."""

    def __init__(self, trial, crash_at=None, torn=None):
        super().__init__(trial.hub, trial.p["t0"], trial.deadline)
        trial.worlds.append(self)
        self.disk, self.crash_at, self.torn = Disk(), crash_at, torn
        self.torn_write = None                  # (file, what the torn write was writing)
        self.served: list = []                  # [(ts, mark on the disk when it was served)]
        self.rounds = 0

    def disk_call(self, c, msg):
        before = dict(self.disk.files)
        if msg["fn"] in DISK_MUTATIONS and self.disk.mutations + 1 == self.crash_at:
            self.crash_at = None                    # one crash per run
            if self.torn:
                self.disk.torn(msg["path"], msg["data"], TORN[self.torn])
                self.torn_write = (self.disk.name(msg["path"]), msg["data"])
                self.note(c, "disk", self.disk_events(c, before),
                          value=f"torn put {msg['path'][:200]}")
            self.crash_client(c)
            return None
        reply = self.disk.apply(msg["fn"], msg["path"], msg["to"], msg["data"], msg["mode"])
        if msg["fn"] in DISK_MUTATIONS:
            self.note(c, "disk", self.disk_events(c, before),
                      value=f"{msg['fn']} {msg['path'][:200]}" + (
                          f" -> {str(msg['to'])[:200]}" if msg["to"] else ""))
        return reply

    def disk_events(self, c, before: dict) -> tuple:
        """What a disk call changed, as events of the table ``disk``: a row per file, its
        text in the column ``content`` (the replay's cells are the disk's files)."""
        after = self.disk.files
        return tuple(RowTransactionEvent(0, c.label, "disk", name, "disk", (), (
            Change("content", 0, before.get(name), after.get(name)),))
            for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name))

    def start(self, p, first=None, label=None):
        """A (re)started oracle: a fresh client constructing ``Oracle`` on the disk."""
        self.rounds += 1
        return self.client("oracle", STATE, p["first"] if first is None else first, p["size"],
                           label=label or f"oracle{self.rounds}")

    def serve(self, c, msg):
        if msg["op"] != "disk":
            return super().serve(c, msg)
        reply = self.disk_call(c, msg)
        if not c.crashed:
            self.reply(c, reply)
        return None

    def timestamp(self, c):
        """One get_timestamp call: the outcome, recorded with the mark on the disk then."""
        before = self.disk.mutations
        out = self.call(c, "get_timestamp")
        if not c.crashed and isinstance(out, dict) and "value" in out:
            self.served.append((out["value"], mark(self.disk.files.get(NAME))))
            self.note(c, "served", value=repr(out["value"])[:200])
        self.last_writes = self.disk.mutations - before
        return out

    def timestamps(self, c, n: int) -> list:
        return [_value(self.timestamp(c)) for _ in range(n)]


def mark(text):
    """The integer in the state file's text, or None."""
    if not isinstance(text, str) or not text.strip().lstrip("-").isdigit():
        return None
    return int(text.strip())


def _value(out):
    require(isinstance(out, dict) and "value" in out,
            f"get_timestamp() must return a timestamp; it {said(out)}")
    require(type(out["value"]) is int, f"get_timestamp() must return an int timestamp; it "
                                       f"{said(out)}")
    return out["value"]


def _started(w, c):
    require(not c.crashed and c.answer is not None and "raised" not in c.answer,
            f"Oracle(state_path, first_timestamp=..., range_size=...) {said(c.answer)}")
    return c


def _consecutive(served: list, first: int, what: str) -> None:
    for i, ts in enumerate(served):
        require(ts == first + i,
                f"{what}: call {i + 1} must return {first + i} (strictly increasing, consecutive "
                f"from first_timestamp={first} while the oracle lives), it returned {ts}")


def _persisted_first(w) -> None:
    for ts, m in w.served:
        holds = "no mark" if m is None else f"the mark {m}"
        require(m is not None and m > ts,
                f"when the oracle served {ts}, the disk held {holds}: a crash then would let a "
                f"restarted oracle hand out {ts} again. The oracle must write the END of a range "
                f"to stable storage BEFORE it serves any timestamp of that range")


# -- 1. a living oracle --------------------------------------------------------------

@exercise.check("consecutive timestamps from first_timestamp, across range ends", params=_sizes)
def _living(trial, p):
    w = OracleWorld(trial)
    served = w.timestamps(_started(w, w.start(p)), 2 * p["size"] + 3)
    _consecutive(served, p["first"], f"with range_size={p['size']}")


@exercise.check("without a state_path the mark lives in memory",
                params=lambda rng: {"t0": rng.randrange(10, 10 ** 6),
                                    "first": rng.randrange(10, 10 ** 6), "size": rng.randrange(2, 6)})
def _memory(trial, p):
    w = OracleWorld(trial)
    c = _started(w, w.client("oracle", None, p["first"], p["size"], label="oracle"))
    served = w.timestamps(c, 3 * p["size"] + 1)
    _consecutive(served, p["first"], "with state_path=None")
    require(w.disk.mutations == 0 and not w.disk.strays,
            f"with state_path=None there is no stable storage: the oracle must not write any "
            f"file; it wrote {w.disk.strays[:3] or sorted(w.disk.files)}")


# -- 2. persisting the mark -------------------------------------------------------------

@exercise.check("the mark is persisted before a timestamp of its range is served", params=_sizes)
def _persist_first(trial, p):
    w = OracleWorld(trial)
    w.timestamps(_started(w, w.start(p)), 2 * p["size"] + 2)
    _persisted_first(w)


@exercise.check("the mark is the first timestamp not covered by the allocated range",
                params=_sizes)
def _mark_value(trial, p):
    w = OracleWorld(trial)
    c = _started(w, w.start(p))
    first, size = p["first"], p["size"]
    for start in (first, first + size):
        w.timestamps(c, 1 if start == first else size)
        ts, _ = w.served[-1]
        require(ts == start, f"the call that opens the range [{start}, {start + size}) must "
                             f"return {start}, it returned {ts!r}")
        text = w.disk.files.get(NAME)
        holds = "there is no state file" if text is None else f"it holds {text!r}"
        require(mark(text) == start + size,
                f"serving {start} allocated the range [{start}, {start + size}) "
                f"(range_size={size}): the state file must then hold {start + size}, the first "
                f"timestamp not covered by the range (the highest allocated, exclusive); {holds}")


@exercise.check("one write of the mark per range, the range served from memory", params=_sizes)
def _one_write(trial, p):
    w = OracleWorld(trial)
    c = _started(w, w.start(p))
    at_start, size, first = w.disk.mutations, p["size"], p["first"]
    for i in range(3 * size):
        ts = _value(w.timestamp(c))
        start = first + i - i % size
        require(ts == first + i, f"call {i + 1} must return {first + i}, it returned {ts}")
        if i % size == 0:
            require(w.last_writes > 0 or (i == 0 and at_start > 0),
                    f"the range [{start}, {start + size}) was served without writing its end "
                    f"({start + size}) to stable storage first: each range is allocated by "
                    "persisting the highest allocated timestamp")
        else:
            require(w.last_writes == 0,
                    f"serving {ts} wrote to stable storage, but it lies inside the range "
                    f"[{start}, {start + size}) already allocated: a range is persisted once "
                    "and then served from memory")


# -- 3. restarts --------------------------------------------------------------------

@exercise.check("a restart jumps forward to the mark, never back",
                params=lambda rng: dict(_sizes(rng), counts=[rng.randrange(1, 6), 1,
                                                             rng.randrange(2, 9), 3]))
def _restarts(trial, p):
    w, last = OracleWorld(trial), None
    for j, count in enumerate(p["counts"]):
        run = w.timestamps(_started(w, w.start(p)), count)       # a restart
        if last is not None:
            require(run[0] > last,
                    f"restart {j}: the previous oracle had served {last}, the restarted one "
                    f"served {run[0]}: timestamps must never go backwards across a restart "
                    "(read the persisted mark when starting)")
        expected = p["first"] + j * p["size"]
        require(run[0] == expected,
                f"restart {j}: the ranges allocated so far end at {expected} (the persisted "
                f"mark), so the restarted oracle must jump forward to exactly {expected}; it "
                f"served {run[0]}")
        _consecutive(run, expected, f"after restart {j}")
        last = run[-1]


@exercise.check("a restart right after a range is used up", params=_sizes)
def _exhausted(trial, p):
    w = OracleWorld(trial)
    served = w.timestamps(_started(w, w.start(p)), p["size"])
    end = p["first"] + p["size"]
    require(served[-1] == end - 1,
            f"the first range [{p['first']}, {end}) must be served in full before the restart; "
            f"its last timestamp was {served[-1]}")
    after = _value(w.timestamp(_started(w, w.start(p))))
    require(after == end,
            f"the oracle served its whole range up to {end - 1} and restarted: it must jump "
            f"forward to {end} (the mark), it served {after}"
            + (": the same timestamp twice" if after == end - 1 else ""))


@exercise.check("first_timestamp above the persisted mark wins",
                params=lambda rng: dict(_sizes(rng), jump=rng.randrange(1000, 5000)))
def _first_above(trial, p):
    w = OracleWorld(trial)
    w.timestamps(_started(w, w.start(p)), 2)
    m, later = p["first"] + p["size"], p["first"] + p["size"] + p["jump"]
    after = _value(w.timestamp(_started(w, w.start(p, first=later))))
    require(after == later,
            f"restarted with first_timestamp={later} above the persisted mark {m}, the oracle "
            f"must start at max(first_timestamp, mark) = {later}; it served {after}")
    _persisted_first(w)          # its first range is allocated from `later`, not from the mark


# -- 4. a crash at every disk call ------------------------------------------------------------

# How much of a torn write lands (the contract: "only the first part of what was written", any
# prefix): half of it, and its first character alone (a state file padded or written with a
# suffix keeps its whole mark in the first half). Enumerated, in this order, never drawn.
TORN = {"half-way": lambda n: n // 2, "one character": lambda n: min(1, n)}
TORN_AT = {"half-way": "half-way through", "one character": "one character into"}


def _script(w, p) -> None:
    """Serve past a range end, restart and serve, restart twice in a row, serve."""
    size = p["size"]
    for count in (size + 2, 2, 0, 1):
        c = w.start(p)
        if c.crashed:
            return
        _started(w, c)
        for _ in range(count):
            out = w.timestamp(c)
            if c.crashed:
                return
            _value(out)


def _after_crash(w, p, k: int, torn=None) -> None:
    """The oracle crashed at disk call ``k`` (``torn``: part-way through that write, a key of
    :data:`TORN`): a restarted oracle must serve above all served."""
    served = [ts for ts, _ in w.served]
    text = w.disk.files.get(NAME)
    where = f"at its disk call {k}"
    if torn and w.torn_write:
        name, data = w.torn_write
        where = (f"{TORN_AT[torn]} writing {str(data)[:24]!r} to {str(name)[:40]} (disk call {k}"
                 f"; {str(w.disk.files.get(name))[:24]!r} landed)")
    c = w.start(p, label="restarted")
    require(not c.crashed and c.answer is not None and "raised" not in c.answer,
            f"the oracle crashed {where}; the state file then held {text!r}; the restarted "
            f"Oracle(...) {said(c.answer)}")
    after = _value(w.timestamp(c))
    top = max(served, default=None)
    require(top is None or after > top,
            f"the oracle crashed {where}, after serving up to {top}; the state file then held "
            f"{text!r}, and the restarted oracle served {after}: the same timestamp twice. "
            f"Every state a crash leaves, a half-written file too, must hold a mark above "
            f"everything served (write a temporary file, then os.replace it)")


@exercise.check("every crash point of a run with restarts: the restarted oracle never serves a "
                "timestamp twice",
                params=lambda rng: {"t0": rng.randrange(10, 10 ** 6),
                                    "first": rng.randrange(10, 10 ** 6), "size": rng.randrange(3, 7)},
                limit=60.0)
def _crashes(trial, p):
    w = OracleWorld(trial)
    _as_counterexample(w, 0, lambda: _uncrashed(w, p))
    kinds = list(w.disk.kinds)
    trial.runs += 1
    for k, kind in enumerate(kinds, 1):           # before each disk call; half-way through a write
        for torn in (None, *TORN) if kind == "put" else (None,):
            trial.runs += 1
            w = OracleWorld(trial, crash_at=k, torn=torn)
            _as_counterexample(w, k, lambda: (_script(w, p), _after_crash(w, p, k, torn)), torn)


def _uncrashed(w, p) -> None:
    _script(w, p)
    served = [ts for ts, _ in w.served]
    require(served and all(a < b for a, b in zip(served, served[1:])),
            f"without a crash, a run with restarts must serve strictly increasing timestamps; "
            f"the oracle served {served[:12]}")
    _persisted_first(w)


def _as_counterexample(w, k: int, run, torn=None) -> None:
    """Run one crash point (0: none); a failure is reported with the run's steps."""
    try:
        run()
    except Counterexample:
        raise
    except Fail as exc:                 # crash points run in order: the first failing is shortest
        where = (("crash", f"disk call {k}" + (f", torn {torn}" if torn else "")) if k
                 else ("go", "no crash"))
        raise Counterexample(str(exc), w.log, (where,), k + 1) from None
