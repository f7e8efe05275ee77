"""Exercise 7 (challenge): a broker hotspot and a side table, checked by the trusted world.

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

The student's functions run in the sandbox as clients of the grader's
:class:`~.trusted.TrustedWorld`, which holds both tables: every row
transaction and timestamp is a message, logged by the world. Verdicts read
the world's record (the cells a reference transaction reads, which client
touched which row) and compare the clients' answers with it. The last
checks enumerate every schedule of two aggregations and a trade with at most
one preemption (a switch away from a client that could go on; switching when
a client finishes is free, so "A reads, B folds, the trade commits, A
writes" is in), and every crash point of an aggregation racing a trade: the volume folded
plus the side rows left must always account for each committed trade once.
No reference implementation of these functions exists in the package, so
nothing is hidden; a graded function that only delegates is rejected
statically. Brokers, trade ids, amounts and timestamps come from the secret;
one broker's name is a prefix of another's (``B4`` and ``B47``).
"""
from __future__ import annotations

from percolator_ref import Transaction
from percolator_ref.model import WriteKind, split_column

from ..client.ex07_broker_hotspot import exercise
from ..framework import require, said
from .participants import Participant, Scope


BROKERS, SIDE = "brokers", "broker_updates"
SCOPE = Scope(tables=frozenset({BROKERS, SIDE}))
FAMILY_TTL = 0.004        # a waiting client outlives a silent holder within a few backoffs


def _params(rng) -> dict:
    digit = rng.randrange(1, 10)
    broker, other = f"B{digit}", f"B{digit}{rng.randrange(0, 10)}"      # a prefix of the other
    ids = [f"t{n:04d}" for n in rng.sample(range(1, 10 ** 4), 12)]
    return {"t0": rng.randrange(10, 10 ** 6), "broker": broker, "other": other, "ids": ids,
            "amounts": [rng.randrange(1, 500) for _ in range(12)],
            "folded": rng.randrange(1000, 10 ** 5), "k": rng.randrange(3, 6)}


# -- the market (the world's own record) ------------------------------------------------------

def _seed(w, broker, folded, trades) -> None:
    """Commit ``brokers/<broker>.volume = folded`` (unless None) and side rows ``trades``;
    student clients may write only the two tables."""
    w.scope = SCOPE
    t = Transaction(w.cluster, "market")
    if folded is not None:
        t.set(broker, "volume", folded, table=BROKERS)
    for trade_id, amount in trades:
        t.set(f"{broker}/{trade_id}", "amount", amount, table=SIDE)
    assert t.commit(), "internal: seeding the market conflicted"


def _state(w, broker) -> tuple:
    """``(volume, sorted side rows [[row, amount]])``, read by a reference transaction."""
    t = Transaction(w.cluster, "auditor")
    try:
        rows = t.scan(SIDE, start_row=f"{broker}/", end_row=f"{broker}0")
        return (t.get(broker, "volume", table=BROKERS),
                sorted([row, v] for row, column, v in rows if column == "amount"))
    finally:
        t.abandon()


def _volume(w, broker) -> dict:
    """The student's broker_volume in a new snapshot (an outcome)."""
    viewer = w.client("viewer", label=f"V{len(w.clients)}")
    return w.call(viewer, "volume", broker)


def _pending(p, first: int, n: int) -> list:
    return [[p["ids"][i], p["amounts"][i]] for i in range(first, first + n)]


def _total(trades) -> int:
    return sum(amount for _, amount in trades)


def _exact(w, broker, folded, pending, when: str) -> None:
    """The store holds volume ``folded`` and side rows ``pending``; broker_volume is the sum."""
    volume, side = _state(w, broker)
    rows = sorted([f"{broker}/{i}", a] for i, a in pending)
    total = folded + _total(pending)
    seen = _volume(w, broker)
    require(seen == {"value": total},
            f"{when}: broker_volume({broker!r}) must be {total} ({folded} folded + "
            f"{_total(pending)} pending); it {said(seen)}, with volume {volume} and {len(side)} "
            f"side rows in the store")
    require(volume == folded and side == rows,
            f"{when}: {BROKERS}/{broker}.volume must be {folded} with {len(rows)} side rows left; "
            f"the store holds {volume!r} and {len(side)}")


def _touched(w, c, table: str) -> list:
    """The row transactions client ``c`` ran on ``table`` (from the world's log)."""
    return [e.said() for e in w.log if e.client == c.label and e.table == table]


def _aggregated(w, broker, label="G") -> dict:
    return w.client("aggregate", broker, label=label).answer


# -- 1. trades ----------------------------------------------------------------------------

@exercise.check("concurrent trades of one broker all commit, without touching its row",
                params=_params)
def _trades(trial, p):
    w = trial.world()
    broker, k = p["broker"], p["k"]
    _seed(w, broker, p["folded"], [])
    traders = [w.client("trader", label=f"T{i}") for i in range(k)]
    for c, (trade_id, amount) in zip(traders, _pending(p, 0, k)):
        w.call(c, "record", broker, trade_id, amount)
    commits = [w.call(c, "commit") for c in traders]
    touched = [did for c in traders for did in _touched(w, c, BROKERS)]
    require(touched == [],
            f"a trade must neither write nor read {BROKERS}/{broker}: that row is the hotspot "
            f"(writing it makes concurrent trades conflict; reading it makes every trade wait on "
            f"an aggregation's lock). Your trades ran: {touched[:3]}")
    require(commits == [{"value": True}] * k,
            f"{k} concurrent trades of {broker} write different side rows, so nothing conflicts "
            f"and every commit must succeed; the commits gave {[said(c) for c in commits]}")
    _exact(w, broker, p["folded"], _pending(p, 0, k),
           f"after {k} trades, each a side row {SIDE}/{broker}/<trade_id>.amount")


# -- 2. broker_volume ----------------------------------------------------------------------

@exercise.check("broker_volume counts folded and pending trades in the snapshot", params=_params)
def _volume_check(trial, p):
    w = trial.world()
    broker, pending, late = p["broker"], _pending(p, 0, p["k"]), _pending(p, 9, 1)
    _seed(w, broker, p["folded"], pending)
    _seed(w, p["other"], None, _pending(p, 6, 2))
    old = w.client("viewer", label="V1")
    _seed(w, broker, None, late)                      # a trade after the viewer began
    total = p["folded"] + _total(pending)
    seen = w.call(old, "volume", broker)
    require(seen == {"value": total},
            f"{broker} has volume {p['folded']} folded and {len(pending)} pending side rows worth "
            f"{_total(pending)} in the transaction's snapshot: broker_volume must return {total} "
            f"(a trade of {late[0][1]} committed after the snapshot does not count); it {said(seen)}")
    seen = _volume(w, broker)
    require(seen == {"value": total + late[0][1]},
            f"a newer snapshot also sees the trade of {late[0][1]}: broker_volume must return "
            f"{total + late[0][1]}; it {said(seen)}")
    seen = _volume(w, "B0")
    require(seen == {"value": 0},
            f"broker B0 has no volume and no side rows: broker_volume must return 0 (a missing "
            f"volume counts as 0); it {said(seen)}")


# -- 3. aggregate -------------------------------------------------------------------------

@exercise.check("aggregate folds the broker's side rows into its volume and deletes them",
                params=_params)
def _fold(trial, p):
    w = trial.world()
    broker, pending = p["broker"], _pending(p, 0, p["k"])
    _seed(w, broker, p["folded"], pending)
    _seed(w, "B0", None, _pending(p, 6, 2))            # a broker never folded before
    folded = _aggregated(w, broker)
    require(folded == {"value": len(pending)},
            f"{broker} has {len(pending)} side rows: aggregate must fold them and return "
            f"{len(pending)}, how many it folded; it {said(folded)}")
    _exact(w, broker, p["folded"] + _total(pending), [],
           f"aggregate({broker!r}) folds its {len(pending)} side rows into the volume and "
           f"deletes them")
    first = _aggregated(w, "B0")
    _exact(w, "B0", _total(_pending(p, 6, 2)), [],
           "after aggregating B0, which had no volume yet (a missing volume counts as 0)")
    require(first == {"value": 2}, f"aggregate('B0') folded 2 side rows: it must return 2; "
                                   f"it {said(first)}")


@exercise.check("aggregating again counts no trade twice", params=_params)
def _again(trial, p):
    w = trial.world()
    broker, first, more = p["broker"], _pending(p, 0, p["k"]), _pending(p, 6, 2)
    _seed(w, broker, p["folded"], first)
    _aggregated(w, broker)
    second = _aggregated(w, broker)
    _exact(w, broker, p["folded"] + _total(first), [],
           f"after aggregating {broker} twice with nothing new in between")
    require(second == {"value": 0},
            f"the second aggregate({broker!r}) found no side row left: it must fold nothing and "
            f"return 0; it {said(second)}")
    for i, (trade_id, amount) in enumerate(more):
        w.client("trade", broker, trade_id, amount, label=f"T{i}")
    _aggregated(w, broker)
    _exact(w, broker, p["folded"] + _total(first) + _total(more), [],
           f"after 2 more trades (worth {_total(more)}) and a third aggregate")


@exercise.check("aggregating one broker leaves the others alone", params=_params)
def _others(trial, p):
    w = trial.world()
    broker, theirs = p["broker"], p["other"]
    _seed(w, broker, p["folded"], _pending(p, 0, p["k"]))
    _seed(w, theirs, 7, _pending(p, 6, 3))
    _aggregated(w, broker)
    _exact(w, theirs, 7, _pending(p, 6, 3),
           f"aggregate({broker!r}) may fold only the rows '{broker}/...': {theirs}'s rows "
           f"('{theirs}/...') are not {broker}'s, though the name starts with {broker!r}")
    _exact(w, broker, p["folded"] + _total(_pending(p, 0, p["k"])), [],
           f"after aggregate({broker!r}), with {theirs} next to it")


# -- 4. every small interleaving, every crash point -------------------------------------------

def _committed_trades(w, clients, trades) -> list:
    """The trades whose client's transaction committed, by the world's log of the client's
    own steps (:meth:`~.participants.Client.committed`): a write record somewhere proves nothing."""
    return [t for label, t in trades.items() if label in clients and clients[label].committed()]


def _folded_by(w, c) -> int:
    """How many side rows transactions of client ``c`` deleted and committed, by the world's
    log of ``c``'s own steps: the side rows it locked for a delete in a transaction whose
    commit point it wrote."""
    done = {write.start_ts for _, _, _, write in c.commits}
    return len({row for table, row, _, lock in c.locked if table == SIDE
                and lock.start_ts in done and lock.kind is WriteKind.DELETE})


def _locks_left(w) -> list:
    return [f"{table}/{row}.{split_column(physical)[0]}"
            for table, rows in w.cluster.bigtable.dump().items()
            for row, columns in rows.items() for physical in columns
            if split_column(physical)[1] == "lock"]


def _judge_market(p, seeded: list, trades: dict):
    """Volume folded + side rows left account for every committed trade exactly once."""
    def judge(w, clients):
        broker = p["broker"]
        volume, side = _state(w, broker)
        kept = seeded + _committed_trades(w, clients, trades)
        expected = p["folded"] + _total(kept)
        rows = {f"{broker}/{i}": a for i, a in kept}
        answers = ", ".join(f"{label} {said(c.answer) if c.answer else 'crashed'}"
                            for label, c in clients.items())
        require(all(rows.get(r) == a for r, a in side),
                f"side rows left that no committed trade wrote: {side} ({answers})")
        require((volume or 0) + sum(a for _, a in side) == expected,
                f"{BROKERS}/{broker}.volume is {volume} with {len(side)} side rows worth "
                f"{sum(a for _, a in side)} left, but the committed trades total {expected} "
                f"({p['folded']} folded before, {len(kept)} trades; {answers}): a trade was "
                f"counted twice or lost")
        for label, c in clients.items():
            if label in trades or c.answer is None:
                continue
            n = _folded_by(w, c)
            require(c.answer == {"value": n},
                    f"aggregation {label} of {broker} (volume {p['folded']} folded before) "
                    f"{said(c.answer)}, but the transactions of {label} that committed deleted {n} "
                    f"side rows: aggregate returns how many it folded (0 if it lost its conflict) "
                    f"({answers})")
        left = _locks_left(w)
        require(not left, f"a lock was left behind on {left[:1]} after every client finished "
                          f"and a reader cleaned up")
    return judge


@exercise.check("every interleaving of two aggregations and a trade counts each trade once",
                params=_params, limit=60.0)
def _race(trial, p):
    broker, seeded, late = p["broker"], _pending(p, 0, 2), _pending(p, 9, 1)

    def family(w):
        _seed(w, broker, p["folded"], seeded)
        return [Participant("A", "aggregate", (broker,)), Participant("B", "aggregate", (broker,)),
                Participant("T", "trade", (broker, *late[0]))]
    trial.explore(family, _judge_market(p, seeded, {"T": late[0]}), ttl=FAMILY_TTL,
                  preemptions=1, crashes=0)       # three clients: two preemptions run ~3000


@exercise.check("every crash point of an aggregation loses no trade and counts none twice",
                params=_params, limit=60.0)
def _crash(trial, p):
    broker, seeded, late = p["broker"], _pending(p, 0, 2), _pending(p, 9, 1)

    def family(w):
        _seed(w, broker, p["folded"], seeded)
        return [Participant("A", "aggregate", (broker,), crashable=True),
                Participant("T", "trade", (broker, *late[0]))]
    trial.explore(family, _judge_market(p, seeded, {"T": late[0]}), ttl=FAMILY_TTL,
                  preemptions=1, crashes=1)
