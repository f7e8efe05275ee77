"""Exercise 5: the timestamp oracle (section 2.3), as scenarios + verdicts.

The student writes ``Oracle(state_path, first_timestamp=1, range_size=1000)``
with ``get_timestamp()``. The paper's oracle hands out strictly increasing
timestamps; it allocates a range of timestamps by writing the highest
allocated timestamp to stable storage and then serves that range from
memory; after a restart its timestamps jump forward to the highest allocated
timestamp, never backwards. Here the "highest allocated timestamp" is kept
as the *mark*: one integer in the file ``state_path``, the first timestamp
NOT covered by the ranges allocated so far (``None``: memory only).

Each scenario abandons oracle objects the way a crash would (a new object on
the same path is the restarted oracle). ``first_timestamp`` and
``range_size`` come from the per-run secret.
"""
from __future__ import annotations

from .framework import Exercise, plain, require

exercise = Exercise(
    5, "timestamp oracle: ranges and a persisted high-water mark",
    answer="Oracle", graded={"Oracle": ("__init__", "get_timestamp")},
    hidden=("percolator_ref.services.oracle:TimestampOracle",), forbidden_bases=("TimestampOracle",))


def _sizes(rng) -> dict:
    return {"first": rng.randrange(10, 10 ** 6), "size": rng.randrange(20, 120)}


def _serve(oracle, n: int) -> list:
    return [plain(oracle.get_timestamp()) for _ in range(n)]


def _read(path):
    try:
        with open(path) as f:
            return f.read(200)
    except FileNotFoundError:
        return None


def _mark(text):
    """The integer in the state file's text, or None."""
    if not isinstance(text, str) or not text.strip().lstrip("-").isdigit():
        return None
    return int(text.strip())


def _ints(obs, key: str, n: int, what: str) -> list:
    values = obs.get(key) if isinstance(obs, dict) else None
    require(isinstance(values, list) and len(values) == n, f"malformed observations ({key})")
    for v in values:
        require(type(v) is int, f"{what}, got {v!r}")
    return values


def _timestamps(obs, key: str, n: int) -> list:
    return _ints(obs, key, n, "get_timestamp() must return an int timestamp")


def _consecutive(served: list, first: int, what: str) -> None:
    for i, ts in enumerate(served):
        require(ts == first + i,
                f"{what}: call {i + 1} must return {first + i} (strictly increasing, consecutive "
                f"from first_timestamp={first} while the oracle lives), it returned {ts}")


# -- 1. a living oracle --------------------------------------------------------------

@exercise.scenario("consecutive timestamps from first_timestamp, across range ends", params=_sizes)
def _living(Oracle, p, ctx):
    oracle = Oracle(ctx.path("oracle.state"), first_timestamp=p["first"], range_size=p["size"])
    return {"served": _serve(oracle, 2 * p["size"] + 3)}


@exercise.verdict("consecutive timestamps from first_timestamp, across range ends")
def _living_ok(obs, p):
    served = _timestamps(obs, "served", 2 * p["size"] + 3)
    _consecutive(served, p["first"], f"with range_size={p['size']}")


@exercise.scenario("without a state_path the mark lives in memory",
                   params=lambda rng: {"first": rng.randrange(10, 10 ** 6), "size": rng.randrange(2, 6)})
def _memory(Oracle, p, ctx):
    with ctx.writes() as writes:
        oracle = Oracle(None, first_timestamp=p["first"], range_size=p["size"])
        served = _serve(oracle, 3 * p["size"] + 1)
    return {"served": served, "writes": writes.paths[:5]}


@exercise.verdict("without a state_path the mark lives in memory")
def _memory_ok(obs, p):
    served = _timestamps(obs, "served", 3 * p["size"] + 1)
    _consecutive(served, p["first"], "with state_path=None")
    require(obs.get("writes") == [],
            f"with state_path=None there is no stable storage: the oracle must not write any "
            f"file, it wrote {obs.get('writes')}")


# -- 2. persisting the mark -------------------------------------------------------------

@exercise.scenario("the mark is persisted before a timestamp of its range is served", params=_sizes)
def _persist_first(Oracle, p, ctx):
    path = ctx.path("oracle.state")
    oracle = Oracle(path, first_timestamp=p["first"], range_size=p["size"])
    seen = []
    for _ in range(2 * p["size"] + 2):
        ts = plain(oracle.get_timestamp())
        seen.append([ts, _read(path)])
    return {"seen": seen}


@exercise.verdict("the mark is persisted before a timestamp of its range is served")
def _persist_first_ok(obs, p):
    seen = obs.get("seen") if isinstance(obs, dict) else None
    require(isinstance(seen, list) and len(seen) == 2 * p["size"] + 2, "malformed observations")
    for ts, text in seen:
        require(text is not None,
                f"after serving {ts!r} no mark was on stable storage: a crash now would let a "
                "restarted oracle hand out the same timestamps again")
        mark = _mark(text)
        require(mark is not None, f"the state file must hold one integer (the mark), it holds {text!r}")
        require(type(ts) is int and mark > ts,
                f"after serving {ts!r} the persisted mark was {mark}: a restart would serve {mark} "
                "again. The oracle must write the END of a range to stable storage BEFORE it "
                "serves any timestamp of that range")


@exercise.scenario("the mark is the first timestamp not covered by the allocated range",
                   params=_sizes)
def _mark_value(Oracle, p, ctx):
    path = ctx.path("oracle.state")
    oracle = Oracle(path, first_timestamp=p["first"], range_size=p["size"])
    first = [plain(oracle.get_timestamp()), _read(path)]
    _serve(oracle, p["size"] - 1)
    second = [plain(oracle.get_timestamp()), _read(path)]
    return {"first": first, "second": second}


@exercise.verdict("the mark is the first timestamp not covered by the allocated range")
def _mark_value_ok(obs, p):
    first, size = p["first"], p["size"]
    for key, start in (("first", first), ("second", first + size)):
        pair = obs.get(key) if isinstance(obs, dict) else None
        require(isinstance(pair, list) and len(pair) == 2, "malformed observations")
        ts, text = pair
        require(ts == start, f"the call that opens the range [{start}, {start + size}) must "
                             f"return {start}, it returned {ts!r}")
        holds = "there is no state file" if text is None else f"it holds {text!r}"
        require(_mark(text) == start + size,
                f"serving {start} allocated the range [{start}, {start + size}) "
                f"(range_size={size}): the state file must then hold {start + size}, the first "
                f"timestamp not covered by the range (the highest allocated, exclusive); {holds}")


@exercise.scenario("one write of the mark per range, the range served from memory",
                   params=_sizes)
def _one_write(Oracle, p, ctx):
    per_call, served = [], []
    with ctx.writes() as writes:
        oracle = Oracle(ctx.path("oracle.state"), first_timestamp=p["first"], range_size=p["size"])
        at_start = len(writes.paths)
        for _ in range(3 * p["size"]):
            before = len(writes.paths)
            served.append(plain(oracle.get_timestamp()))
            per_call.append(len(writes.paths) - before)
    return {"at_start": at_start, "writes_per_call": per_call, "served": served}


@exercise.verdict("one write of the mark per range, the range served from memory")
def _one_write_ok(obs, p):
    per_call = _ints(obs, "writes_per_call", 3 * p["size"], "malformed observations")
    at_start = obs.get("at_start")
    require(type(at_start) is int, "malformed observations")
    size, first = p["size"], p["first"]
    _consecutive(_ints(obs, "served", 3 * size, "malformed observations"), first,
                 "while counting the writes")       # ties the counts to this run's timestamps
    for i, count in enumerate(per_call):
        start = first + i - i % size
        if i % size == 0:
            require(count > 0 or (i == 0 and at_start > 0),
                    f"the range [{start}, {start + size}) was served without writing its end "
                    f"({start + size}) to stable storage first: each range is allocated by "
                    "persisting the highest allocated timestamp")
        else:
            require(count == 0,
                    f"serving {first + i} wrote to stable storage, but it lies inside the range "
                    f"[{start}, {start + size}) already allocated: a range is persisted once "
                    "and then served from memory")


# -- 3. restarts --------------------------------------------------------------------

@exercise.scenario("a restart jumps forward to the mark, never back",
                   params=lambda rng: dict(_sizes(rng), counts=[rng.randrange(1, 6), 1,
                                                                rng.randrange(2, 9), 3]))
def _restarts(Oracle, p, ctx):
    path, runs = ctx.path("oracle.state"), []
    for count in p["counts"]:
        oracle = Oracle(path, first_timestamp=p["first"], range_size=p["size"])   # a restart
        runs.append(_serve(oracle, count))
    return {"runs": runs}


@exercise.verdict("a restart jumps forward to the mark, never back")
def _restarts_ok(obs, p):
    runs = obs.get("runs") if isinstance(obs, dict) else None
    require(isinstance(runs, list) and [len(r) if isinstance(r, list) else -1 for r in runs]
            == p["counts"], "malformed observations")
    last = None
    for j, run in enumerate(runs):
        _timestamps({"run": run}, "run", len(run))
        if last is not None:
            require(run[0] > last,
                    f"restart {j}: the previous oracle had served {last}, the restarted one "
                    f"served {run[0]}: timestamps must never go backwards across a restart "
                    "(read the persisted mark when starting)")
        mark = p["first"] + j * p["size"]
        require(run[0] == mark,
                f"restart {j}: the ranges allocated so far end at {mark} (the persisted mark), "
                f"so the restarted oracle must jump forward to exactly {mark}; it served {run[0]}")
        _consecutive(run, mark, f"after restart {j}")
        last = run[-1]


@exercise.scenario("a restart right after a range is used up", params=_sizes)
def _exhausted(Oracle, p, ctx):
    path = ctx.path("oracle.state")
    old = Oracle(path, first_timestamp=p["first"], range_size=p["size"])
    served = _serve(old, p["size"])
    new = Oracle(path, first_timestamp=p["first"], range_size=p["size"])
    return {"last": served[-1], "after": plain(new.get_timestamp())}


@exercise.verdict("a restart right after a range is used up")
def _exhausted_ok(obs, p):
    end = p["first"] + p["size"]
    require(isinstance(obs, dict) and obs.get("last") == end - 1,
            f"the first range [{p['first']}, {end}) must be served in full before the restart; "
            f"its last timestamp was {obs.get('last') if isinstance(obs, dict) else obs!r}")
    require(obs.get("after") == end,
            f"the oracle served its whole range up to {end - 1} and restarted: it must jump "
            f"forward to {end} (the mark), it served {obs.get('after')!r}"
            + (": the same timestamp twice" if obs.get("after") == end - 1 else ""))


@exercise.scenario("first_timestamp above the persisted mark wins",
                   params=lambda rng: dict(_sizes(rng), jump=rng.randrange(1000, 5000)))
def _first_above(Oracle, p, ctx):
    path = ctx.path("oracle.state")
    _serve(Oracle(path, first_timestamp=p["first"], range_size=p["size"]), 2)
    later = p["first"] + p["size"] + p["jump"]
    return {"after": plain(Oracle(path, first_timestamp=later, range_size=p["size"]).get_timestamp())}


@exercise.verdict("first_timestamp above the persisted mark wins")
def _first_above_ok(obs, p):
    mark, later = p["first"] + p["size"], p["first"] + p["size"] + p["jump"]
    require(isinstance(obs, dict) and obs.get("after") == later,
            f"restarted with first_timestamp={later} above the persisted mark {mark}, the oracle "
            f"must start at max(first_timestamp, mark) = {later}; it served "
            f"{obs.get('after') if isinstance(obs, dict) else obs!r}")
