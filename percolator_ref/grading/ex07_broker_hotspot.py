"""Exercise 7 (challenge): a broker hotspot and a side table, as scenarios + verdicts.

Every trade adds to its broker's running volume, and a few brokers take many
trades, so the broker row is a write-write hotspot: concurrent trades of one
broker conflict and all but one abort. The fix graded here is the kit's own
exercise: trades append one row each to a *side table*, and an aggregation
folds the side rows into the broker row. The paper's notes (section 2.4)
support only the idea behind it: an observer that often conflicts on a
hotspot can be split into two observers joined by a notification, so the
conflicts move off the hot path; the side table and its aggregation are not
in the notes.

The student writes ``record_trade(txn, broker, trade_id, amount)``,
``aggregate(cluster, broker) -> int`` (how many side rows it folded; 0 if
none or if it lost a conflict) and ``broker_volume(txn, broker) -> int``
(folded + pending, in ``txn``'s snapshot), handed over as ``answer =
SimpleNamespace(...)``. Layout: table ``brokers``, row ``<broker>``, column
``volume``; side table ``broker_updates``, rows ``<broker>/<trade_id>``,
column ``amount``.

No reference implementation of these functions exists in the package (the
old battery's lived in this module and is gone), so nothing is hidden; a
graded function that only delegates is rejected statically. Brokers, trade
ids, amounts and timestamps come from the per-run secret; one broker's name
is a prefix of another's (``B4`` and ``B47``).
"""
from __future__ import annotations

from percolator_ref import ClientCrash
from percolator_ref.interceptors import attach
from percolator_ref.step import Step

from .framework import Exercise, outcome, require
from .framework import observed as _get, said as _said
from .worlds import new_cluster

exercise = Exercise(
    7, "TPC-E broker hotspot: a side table aggregated periodically", answer="answer",
    graded={"record_trade": (), "aggregate": (), "broker_volume": ()})

BROKERS, SIDE = "brokers", "broker_updates"
READS = (Step.SCAN, Step.GET)


def _params(rng) -> dict:
    digit = rng.randrange(1, 10)
    broker, other = f"B{digit}", f"B{digit}{rng.randrange(0, 10)}"      # a prefix of the other
    ids = [f"t{n:04d}" for n in rng.sample(range(1, 10 ** 4), 12)]
    return {"t0": rng.randrange(10, 10 ** 6), "broker": broker, "other": other, "ids": ids,
            "amounts": [rng.randrange(1, 500) for _ in range(12)],
            "folded": rng.randrange(1000, 10 ** 5), "k": rng.randrange(3, 6)}


# -- the market (sandbox side) ----------------------------------------------------------

class Market:
    """A cluster with brokers and a side table; watches every row transaction on ``brokers``."""

    def __init__(self, p):
        self.c, self.p = new_cluster(p["t0"]), p
        self.touched, self.watching, self.during = [], False, None
        attach(self.c.bigtable, self)

    def before(self, rt) -> None:
        if self.watching and rt.table == BROKERS:
            self.touched.append(f"{rt.step} {rt.table}/{rt.row}")

    def after(self, rt) -> None:
        if self.during is not None and self.during[0](rt):
            action, self.during = self.during[1], None
            action(rt)

    def seed(self, broker, folded, trades) -> None:
        """Commit ``brokers/<broker>.volume = folded`` (unless None) and side rows ``trades``."""
        t = self.c.begin()
        if folded is not None:
            t.set(broker, "volume", folded, table=BROKERS)
        for trade_id, amount in trades:
            t.set(f"{broker}/{trade_id}", "amount", amount, table=SIDE)
        t.commit()

    def trades(self, answer, broker, trades) -> list:
        """The student's trades, all concurrent: each begins before any commits."""
        txns = [self.c.begin() for _ in trades]
        recorded = [outcome(answer.record_trade, t, broker, i, a) for t, (i, a) in zip(txns, trades)]
        return [r if "raised" in r else outcome(t.commit) for t, r in zip(txns, recorded)]

    def state(self, answer, broker) -> dict:
        """The committed volume, the side rows, and the student's broker_volume, from a new snapshot."""
        t = self.c.begin()
        rows = t.scan(SIDE, start_row=f"{broker}/", end_row=f"{broker}0")
        return {"volume": t.get(broker, "volume", table=BROKERS),
                "side": sorted([row, v] for row, column, v in rows if column == "amount"),
                "broker_volume": outcome(answer.broker_volume, self.c.begin(), broker)}


def _pending(p, first: int, n: int) -> list:
    return [[p["ids"][i], p["amounts"][i]] for i in range(first, first + n)]


def _reads_side(rt) -> bool:
    return rt.table == SIDE and rt.step in READS


# -- verdict helpers (grader side) ------------------------------------------------------



def _total(trades) -> int:
    return sum(amount for _, amount in trades)


def _exact(state, broker, folded, pending, when: str) -> None:
    """The committed state: volume ``folded``, side rows ``pending``, broker_volume the sum."""
    volume, side, seen = _get(state, "volume", "side", "broker_volume")
    rows = sorted([f"{broker}/{i}", a] for i, a in pending)
    total, left = folded + _total(pending), len(side) if isinstance(side, list) else side
    require(seen == {"value": total},
            f"{when}: broker_volume({broker!r}) must be {total} ({folded} folded + "
            f"{_total(pending)} pending); it {_said(seen)}, with volume {volume} and {left} side "
            f"rows")
    require(volume == folded and side == rows,
            f"{when}: {BROKERS}/{broker}.volume must be {folded} with {len(rows)} side rows left; "
            f"found {volume!r} and {left}")


# -- 1. trades ----------------------------------------------------------------------------

@exercise.scenario("concurrent trades of one broker all commit, without touching its row",
                   params=_params)
def _trades(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], [])
    m.watching = True
    commits = m.trades(answer, p["broker"], _pending(p, 0, p["k"]))
    m.watching = False
    return {"commits": commits, "touched": m.touched[:5], "state": m.state(answer, p["broker"])}


@exercise.verdict("concurrent trades of one broker all commit, without touching its row")
def _trades_ok(obs, p):
    commits, touched, state = _get(obs, "commits", "touched", "state")
    broker, k = p["broker"], p["k"]
    require(touched == [],
            f"a trade must neither write nor read {BROKERS}/{broker}: that row is the hotspot "
            f"(writing it makes concurrent trades conflict; reading it makes every trade wait on "
            f"an aggregation's lock). Your trades ran: {touched[:3]}")
    require(commits == [{"value": True}] * k,
            f"{k} concurrent trades of {broker} write different side rows, so nothing conflicts "
            f"and every commit must succeed; the commits gave {[_said(c) for c in commits]}")
    _exact(state, broker, p["folded"], _pending(p, 0, k),
           f"after {k} trades, each a side row {SIDE}/{broker}/<trade_id>.amount")


# -- 2. broker_volume ----------------------------------------------------------------------

@exercise.scenario("broker_volume counts folded and pending trades in the snapshot", params=_params)
def _volume(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    m.seed(p["other"], None, _pending(p, 6, 2))
    txn = m.c.begin()
    m.seed(p["broker"], None, _pending(p, 9, 1))           # a trade after txn began
    return {"old": outcome(answer.broker_volume, txn, p["broker"]),
            "new": outcome(answer.broker_volume, m.c.begin(), p["broker"]),
            "fresh": outcome(answer.broker_volume, m.c.begin(), "B0")}


@exercise.verdict("broker_volume counts folded and pending trades in the snapshot")
def _volume_ok(obs, p):
    old, new, fresh = _get(obs, "old", "new", "fresh")
    broker, pending, late = p["broker"], _pending(p, 0, p["k"]), _pending(p, 9, 1)
    total = p["folded"] + _total(pending)
    require(old == {"value": total},
            f"{broker} has volume {p['folded']} folded and {len(pending)} pending side rows worth "
            f"{_total(pending)} in the transaction's snapshot: broker_volume must return {total} "
            f"(a trade of {late[0][1]} committed after the snapshot does not count); it {_said(old)}")
    require(new == {"value": total + late[0][1]},
            f"a newer snapshot also sees the trade of {late[0][1]}: broker_volume must return "
            f"{total + late[0][1]}; it {_said(new)}")
    require(fresh == {"value": 0},
            f"broker B0 has no volume and no side rows: broker_volume must return 0 (a missing "
            f"volume counts as 0); it {_said(fresh)}")


# -- 3. aggregate -------------------------------------------------------------------------

@exercise.scenario("aggregate folds the broker's side rows into its volume and deletes them",
                   params=_params)
def _fold(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    m.seed("B0", None, _pending(p, 6, 2))                  # a broker never folded before
    return {"folded": outcome(answer.aggregate, m.c, p["broker"]),
            "state": m.state(answer, p["broker"]),
            "first": outcome(answer.aggregate, m.c, "B0"), "new": m.state(answer, "B0")}


@exercise.verdict("aggregate folds the broker's side rows into its volume and deletes them")
def _fold_ok(obs, p):
    folded, state, first, new = _get(obs, "folded", "state", "first", "new")
    broker, pending = p["broker"], _pending(p, 0, p["k"])
    require(folded == {"value": len(pending)},
            f"{broker} has {len(pending)} side rows: aggregate must fold them and return "
            f"{len(pending)}, how many it folded; it {_said(folded)}")
    _exact(state, broker, p["folded"] + _total(pending), [],
           f"aggregate({broker!r}) folds its {len(pending)} side rows into the volume and "
           f"deletes them")
    _exact(new, "B0", _total(_pending(p, 6, 2)), [],
           "after aggregating B0, which had no volume yet (a missing volume counts as 0)")
    require(first == {"value": 2}, f"aggregate('B0') folded 2 side rows: it must return 2; "
                                   f"it {_said(first)}")


# -- 4. again -------------------------------------------------------------------------------

@exercise.scenario("aggregating again counts no trade twice", params=_params)
def _again(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    returns = [outcome(answer.aggregate, m.c, p["broker"]), outcome(answer.aggregate, m.c, p["broker"])]
    between = m.state(answer, p["broker"])
    commits = m.trades(answer, p["broker"], _pending(p, 6, 2))
    returns.append(outcome(answer.aggregate, m.c, p["broker"]))
    return {"returns": returns, "between": between, "commits": commits,
            "state": m.state(answer, p["broker"])}


@exercise.verdict("aggregating again counts no trade twice")
def _again_ok(obs, p):
    returns, between, state = _get(obs, "returns", "between", "state")
    broker, first, more = p["broker"], _pending(p, 0, p["k"]), _pending(p, 6, 2)
    require(isinstance(returns, list) and len(returns) == 3, "malformed observations (returns)")
    _exact(between, broker, p["folded"] + _total(first), [],
           f"after aggregating {broker} twice with nothing new in between")
    require(returns[1] == {"value": 0},
            f"the second aggregate({broker!r}) found no side row left: it must fold nothing and "
            f"return 0; it {_said(returns[1])}")
    _exact(state, broker, p["folded"] + _total(first) + _total(more), [],
           f"after 2 more trades (worth {_total(more)}) and a third aggregate")


# -- 5. a trade during an aggregation ---------------------------------------------------

@exercise.scenario("a trade committed during an aggregation is kept for the next one",
                   params=_params)
def _during(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    late = []
    m.during = (_reads_side, lambda rt: late.extend(m.trades(answer, p["broker"], _pending(p, 9, 1))))
    folded = outcome(answer.aggregate, m.c, p["broker"])
    after = m.state(answer, p["broker"])
    again = outcome(answer.aggregate, m.c, p["broker"])
    return {"late": late, "folded": folded, "after": after, "again": again,
            "state": m.state(answer, p["broker"])}


@exercise.verdict("a trade committed during an aggregation is kept for the next one")
def _during_ok(obs, p):
    late, folded, after, state = _get(obs, "late", "folded", "after", "state")
    broker, pending, trade = p["broker"], _pending(p, 0, p["k"]), _pending(p, 9, 1)
    require(late == [{"value": True}],
            f"aggregate({broker!r}) never read the side table {SIDE} (or the trade made while it "
            f"ran did not commit: {[_said(x) for x in late]})")
    require(folded == {"value": len(pending)},
            f"aggregate's snapshot held {len(pending)} side rows of {broker} (a trade committed "
            f"after it began is not in it): it must return {len(pending)}; it {_said(folded)}")
    _exact(after, broker, p["folded"] + _total(pending), trade,
           f"a trade of {trade[0][1]} committed during aggregate, after its snapshot: that side "
           f"row is not the aggregation's to fold or delete, it waits for the next one")
    _exact(state, broker, p["folded"] + _total(pending) + trade[0][1], [],
           f"the next aggregate must fold the trade of {trade[0][1]}")


# -- 6. atomic --------------------------------------------------------------------------------

class CrashAfterCommitPoint:
    """Interceptor: the first client to pass a commit point while armed dies right after it."""

    def __init__(self, cluster):
        self.cluster, self.armed, self.client = cluster, False, None

    def after(self, rt) -> None:
        if self.armed and rt.step == Step.COMMIT_PRIMARY:
            self.armed, self.client = False, rt.client
            self.cluster.lockservice.crash(rt.client)
            raise ClientCrash("commit-primary", 0)


@exercise.scenario("the fold and the deletes commit together", params=_params)
def _atomic(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    crash = CrashAfterCommitPoint(m.c)
    attach(m.c.bigtable, crash)
    crash.armed = True
    run = outcome(answer.aggregate, m.c, p["broker"])
    crash.armed = False
    return {"run": run, "crashed": crash.client is not None, "state": m.state(answer, p["broker"])}


@exercise.verdict("the fold and the deletes commit together")
def _atomic_ok(obs, p):
    run, crashed, state = _get(obs, "run", "crashed", "state")
    broker, pending = p["broker"], _pending(p, 0, p["k"])
    require(crashed is True, f"aggregate({broker!r}) never reached a commit point; it {_said(run)}")
    volume, side, seen = _get(state, "volume", "side", "broker_volume")
    total = p["folded"] + _total(pending)
    require(seen == {"value": total} and (volume, side) == (total, []),
            f"aggregate's client died right after its first commit point (a crash the protocol "
            f"must survive): the fold and the deletes must be ONE transaction, so readers roll the "
            f"rest forward. Found volume {volume}, {len(side) if isinstance(side, list) else side} "
            f"side rows left, broker_volume {seen.get('value') if isinstance(seen, dict) else seen} "
            f"(must be {total})")


# -- 7. other brokers ----------------------------------------------------------------------------

@exercise.scenario("aggregating one broker leaves the others alone", params=_params)
def _others(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    m.seed(p["other"], 7, _pending(p, 6, 3))
    run = outcome(answer.aggregate, m.c, p["broker"])
    return {"run": run, "mine": m.state(answer, p["broker"]), "other": m.state(answer, p["other"])}


@exercise.verdict("aggregating one broker leaves the others alone")
def _others_ok(obs, p):
    run, mine, other = _get(obs, "run", "mine", "other")
    broker, theirs = p["broker"], p["other"]
    _exact(other, theirs, 7, _pending(p, 6, 3),
           f"aggregate({broker!r}) may fold only the rows '{broker}/...': {theirs}'s rows "
           f"('{theirs}/...') are not {broker}'s, though the name starts with {broker!r}")
    _exact(mine, broker, p["folded"] + _total(_pending(p, 0, p["k"])), [],
           f"after aggregate({broker!r}), with {theirs} next to it")


# -- 8. two aggregations ------------------------------------------------------------------------

@exercise.scenario("two aggregations at once fold each trade once", params=_params)
def _two(answer, p, ctx):
    m = Market(p)
    m.seed(p["broker"], p["folded"], _pending(p, 0, p["k"]))
    seen = {}

    def meanwhile(rt):
        seen["trade"] = m.trades(answer, p["broker"], _pending(p, 9, 1))
        seen["b"] = outcome(answer.aggregate, m.c, p["broker"])
    m.during = (_reads_side, meanwhile)
    run_a = outcome(answer.aggregate, m.c, p["broker"])
    return {"a": run_a, "b": seen.get("b"), "trade": seen.get("trade"),
            "state": m.state(answer, p["broker"])}


@exercise.verdict("two aggregations at once fold each trade once")
def _two_ok(obs, p):
    run_a, run_b, trade, state = _get(obs, "a", "b", "trade", "state")
    broker, pending, late = p["broker"], _pending(p, 0, p["k"]), _pending(p, 9, 1)
    require(trade == [{"value": True}],
            f"aggregate({broker!r}) never read the side table {SIDE}; it {_said(run_a)}")
    require(run_b == {"value": len(pending) + 1},
            f"aggregation B ran while A was reading; it saw {len(pending) + 1} side rows (one a "
            f"new trade of {late[0][1]}), must fold them all and return {len(pending) + 1}; B "
            f"{_said(run_b)}")
    _exact(state, broker, p["folded"] + _total(pending) + late[0][1], [],
           f"aggregations A and B overlapped and B committed first: A, which read an older "
           f"snapshot, must conflict on {BROKERS}/{broker} and fold nothing")
    require(run_a == {"value": 0},
            f"aggregation A lost the conflict on {BROKERS}/{broker} to B: it folded nothing and "
            f"must return 0; it {_said(run_a)}")
