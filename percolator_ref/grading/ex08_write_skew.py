"""Exercise 8 (challenge): write skew under snapshot isolation, as scenarios + verdicts.

A customer's row holds two balances, ``checking`` and ``savings``; either may
go negative as long as ``checking + savings >= 0``. Snapshot isolation (the
paper's isolation: a transaction aborts only on a write-write conflict)
allows write skew: two withdrawals read both balances in overlapping
snapshots, each writes a *different* balance, both commit, and the total goes
negative. The student writes ``withdraw(txn, customer, account, amount) ->
bool`` that keeps the constraint by *materialising the conflict*: both
withdrawals of one customer write a common cell, so the write-write check
aborts one of them; withdrawals of different customers must not conflict.

There is no reference ``withdraw`` in the package (the old battery's lived
in this module and is gone), so nothing is hidden; a ``withdraw`` that only
delegates is rejected statically. Customers, balances, amounts and
timestamps come from the per-run secret. Every transaction here is a
reference :class:`~percolator_ref.Transaction`; ``withdraw`` only reads and
buffers writes in it.
"""
from __future__ import annotations

import itertools

from .framework import Exercise, outcome, require
from .framework import observed as _get, said as _said
from .worlds import new_cluster

exercise = Exercise(8, "write skew: keep checking + savings >= 0 under snapshot isolation",
                    answer="withdraw", graded={"withdraw": ()})

ACCOUNTS = ("checking", "savings")
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")


def _params(rng) -> dict:
    a, b = rng.sample(NAMES, 2)
    checking, savings = rng.randrange(50, 500), rng.randrange(50, 500)
    total = checking + savings
    return {"t0": rng.randrange(10, 10 ** 6), "customer": f"{a}{rng.randrange(10, 100)}",
            "other": f"{b}{rng.randrange(10, 100)}", "checking": checking, "savings": savings,
            "big": rng.randrange(total // 2 + 1, total),          # one fits, two do not
            "small": rng.randrange(1, min(checking, savings))}


# -- the bank (sandbox side) -----------------------------------------------------------

def _bank(p, **customers):
    """A cluster with ``customer=(checking, savings)`` committed (None: the balance is absent)."""
    c = new_cluster(p["t0"])
    t = c.begin()
    for name, balances in customers.items():
        for account, value in zip(ACCOUNTS, balances):
            if value is not None:
                t.set(p[name], account, value)
    t.commit()
    return c


def _balances(c, customer) -> list:
    t = c.begin()
    return [t.get(customer, account) for account in ACCOUNTS]


def _withdraw_and_commit(c, withdraw, customer, account, amount) -> dict:
    t = c.begin()
    returned = outcome(withdraw, t, customer, account, amount)
    committed = outcome(t.commit) if "value" in returned else {"value": None}
    return {"returned": returned, "committed": committed, "commit_ts": t.commit_ts}


# -- verdict helpers (grader side) -------------------------------------------------------



def _sum(balances) -> int:
    require(isinstance(balances, list) and len(balances) == 2 and
            all(b is None or type(b) is int for b in balances), f"malformed balances {balances!r}")
    return sum(b or 0 for b in balances)


# -- 1. covered withdrawals ---------------------------------------------------------------

@exercise.scenario("a withdrawal the total covers succeeds, down to a total of 0", params=_params)
def _covered(withdraw, p, ctx):
    c = _bank(p, customer=(p["checking"], p["savings"]), other=(p["checking"], None))
    first = _withdraw_and_commit(c, withdraw, p["customer"], "savings", p["savings"] + p["small"])
    after_first = _balances(c, p["customer"])
    rest = p["checking"] - p["small"]                       # the whole remaining total
    last = _withdraw_and_commit(c, withdraw, p["customer"], "checking", rest)
    missing = _withdraw_and_commit(c, withdraw, p["other"], "savings", p["small"])
    return {"first": first, "after_first": after_first, "last": last,
            "after_last": _balances(c, p["customer"]), "missing": missing,
            "other": _balances(c, p["other"])}


@exercise.verdict("a withdrawal the total covers succeeds, down to a total of 0")
def _covered_ok(obs, p):
    first, after, last, after_last, missing, other = _get(
        obs, "first", "after_first", "last", "after_last", "missing", "other")
    who, ch, sv, small = p["customer"], p["checking"], p["savings"], p["small"]
    amount = sv + small
    require(first.get("returned") == {"value": True} and first.get("committed") == {"value": True},
            f"{who} has checking {ch} and savings {sv} (total {ch + sv}): withdrawing {amount} from "
            f"savings leaves savings {-small}, which the total covers, so withdraw must return True "
            f"and the commit succeed; withdraw {_said(first.get('returned'))}")
    require(after == [ch, -small],
            f"after withdrawing {amount} from savings, {who}'s balances must be checking {ch}, "
            f"savings {-small} (only the named account changes); found {after}")
    require(last.get("returned") == {"value": True} and _sum(after_last) == 0,
            f"{who} then withdraws {ch - small} from checking, the whole remaining total: the "
            f"total becomes exactly 0, which is allowed (>= 0); withdraw "
            f"{_said(last.get('returned'))}, balances {after_last}")
    require(missing.get("returned") == {"value": True} and other == [ch, -small],
            f"{p['other']} has checking {ch} and no savings cell (a missing balance is 0): "
            f"withdrawing {small} from savings must succeed, leaving savings {-small}; withdraw "
            f"{_said(missing.get('returned'))}, balances {other}")


# -- 2. refused withdrawals ------------------------------------------------------------------

@exercise.scenario("an uncovered withdrawal is refused and writes nothing", params=_params)
def _refused(withdraw, p, ctx):
    c = _bank(p, customer=(p["checking"], p["savings"]))
    total = p["checking"] + p["savings"]
    refused = _withdraw_and_commit(c, withdraw, p["customer"], "checking", total + p["small"])
    return {"refused": refused, "balances": _balances(c, p["customer"])}


@exercise.verdict("an uncovered withdrawal is refused and writes nothing")
def _refused_ok(obs, p):
    refused, balances = _get(obs, "refused", "balances")
    who, ch, sv = p["customer"], p["checking"], p["savings"]
    amount = ch + sv + p["small"]
    require(refused.get("returned") == {"value": False},
            f"{who} has a total of {ch + sv}: withdrawing {amount} would leave {ch + sv - amount} "
            f"< 0, so withdraw must return False; it {_said(refused.get('returned'))}")
    require(refused.get("commit_ts") is None and balances == [ch, sv],
            f"a refused withdrawal must buffer nothing (check before you write): its transaction "
            f"then commits as read-only, without a commit timestamp. It committed at "
            f"{refused.get('commit_ts')}, balances now {balances} (were [{ch}, {sv}])")


@exercise.scenario("a refused withdrawal does not make a concurrent one fail", params=_params)
def _refused_concurrent(withdraw, p, ctx):
    c = _bank(p, customer=(p["checking"], p["savings"]))
    no, yes = c.begin(), c.begin()
    total = p["checking"] + p["savings"]
    returned = [outcome(withdraw, no, p["customer"], "checking", total + p["small"]),
                outcome(withdraw, yes, p["customer"], "savings", p["small"])]
    commits = [outcome(no.commit), outcome(yes.commit)]
    return {"returned": returned, "commits": commits, "balances": _balances(c, p["customer"])}


@exercise.verdict("a refused withdrawal does not make a concurrent one fail")
def _refused_concurrent_ok(obs, p):
    returned, commits, balances = _get(obs, "returned", "commits", "balances")
    who, small, total = p["customer"], p["small"], p["checking"] + p["savings"]
    require(returned == [{"value": False}, {"value": True}],
            f"of two concurrent withdrawals from {who} (total {total}), {total + small} from "
            f"checking must be refused and {small} from savings accepted; withdraw "
            f"{[_said(r) for r in returned]}")
    require(commits[1] == {"value": True} and balances == [p["checking"], p["savings"] - small],
            f"the refused withdrawal wrote nothing, so nothing conflicts with the accepted one "
            f"({small} from savings), which must commit even though the refused one committed "
            f"first; its commit {_said(commits[1])}, balances {balances}")


# -- 3. sequential ------------------------------------------------------------------------------

@exercise.scenario("sequential withdrawals respect the total", params=_params)
def _sequential(withdraw, p, ctx):
    c = _bank(p, customer=(p["checking"], p["savings"]))
    runs = [_withdraw_and_commit(c, withdraw, p["customer"], account, p["big"])
            for account in ("checking", "savings", "checking")]
    return {"returned": [r["returned"] for r in runs], "balances": _balances(c, p["customer"])}


@exercise.verdict("sequential withdrawals respect the total")
def _sequential_ok(obs, p):
    returned, balances = _get(obs, "returned", "balances")
    total, big = p["checking"] + p["savings"], p["big"]
    require(returned == [{"value": True}, {"value": False}, {"value": False}],
            f"{p['customer']} (total {total}) withdraws {big} from checking, then from savings, "
            f"then from checking, one after the other: only the first fits (then {total - big} "
            f"is left); withdraw {[_said(r) for r in returned]}")
    require(_sum(balances) == total - big, f"the total must end at {total - big}; balances {balances}")


# -- 4. write skew ------------------------------------------------------------------------------

def _orders():
    """Every order of A's and B's (begin, withdraw, commit) steps, each in program order."""
    for slots in itertools.combinations(range(6), 3):
        yield "".join("A" if i in slots else "B" for i in range(6))


def _interleave(withdraw, p, order: str) -> dict:
    c = _bank(p, customer=(p["checking"], p["savings"]))
    account, txns, done = {"A": "checking", "B": "savings"}, {}, {"A": 0, "B": 0}
    returned, committed = {}, {}
    for who in order:
        if done[who] == 0:
            txns[who] = c.begin()
        elif done[who] == 1:
            returned[who] = outcome(withdraw, txns[who], p["customer"], account[who], p["big"])
        else:
            committed[who] = outcome(txns[who].commit)
        done[who] += 1
    return {"order": order, "returned": [returned["A"], returned["B"]],
            "committed": [committed["A"], committed["B"]], "balances": _balances(c, p["customer"])}


@exercise.scenario("every interleaving of two withdrawals keeps the total >= 0", params=_params)
def _skew(withdraw, p, ctx):
    return {"runs": [_interleave(withdraw, p, order) for order in _orders()]}


@exercise.verdict("every interleaving of two withdrawals keeps the total >= 0")
def _skew_ok(obs, p):
    runs, = _get(obs, "runs")
    orders = list(_orders())
    require(isinstance(runs, list) and [r.get("order") if isinstance(r, dict) else None
                                        for r in runs] == orders, "malformed observations (runs)")
    total, big = p["checking"] + p["savings"], p["big"]
    for run in runs:
        returned, committed, balances = _get(run, "returned", "committed", "balances")
        steps = " ".join(f"{w}:{s}" for w, s in zip(run["order"], _step_names(run["order"])))
        both = all(r == {"value": True} and c == {"value": True} for r, c in zip(returned, committed))
        require(_sum(balances) >= 0 or not both,
                f"A withdraws {big} from checking, B {big} from savings (total {total}); in the "
                f"order {steps} both committed and the total is {_sum(balances)}: write skew. "
                f"Make both withdrawals write a common cell, so one of them aborts")
        require(_sum(balances) >= 0,
                f"in the order {steps} the total of {total} ends at {_sum(balances)}: withdraw "
                f"{[_said(r) for r in returned]}, and a refused withdrawal must write nothing")
        wins = sum(r == {"value": True} and c == {"value": True} for r, c in zip(returned, committed))
        require(wins == 1,
                f"in the order {steps} exactly one withdrawal of {big} (total {total}) must succeed "
                f"and commit; withdraw {[_said(r) for r in returned]}, commits "
                f"{[_said(c) for c in committed]}")


def _step_names(order: str) -> list:
    seen, names = {"A": 0, "B": 0}, []
    for who in order:
        names.append(("begin", "withdraw", "commit")[seen[who]])
        seen[who] += 1
    return names


# -- 5. other customers ---------------------------------------------------------------------------

@exercise.scenario("withdrawals of different customers do not conflict", params=_params)
def _independent(withdraw, p, ctx):
    c = _bank(p, customer=(p["checking"], p["savings"]), other=(p["savings"], p["checking"]))
    mine, theirs = c.begin(), c.begin()
    returned = [outcome(withdraw, mine, p["customer"], "checking", p["small"]),
                outcome(withdraw, theirs, p["other"], "savings", p["small"])]
    commits = [outcome(mine.commit), outcome(theirs.commit)]
    return {"returned": returned, "commits": commits}


@exercise.verdict("withdrawals of different customers do not conflict")
def _independent_ok(obs, p):
    returned, commits = _get(obs, "returned", "commits")
    require(returned == [{"value": True}, {"value": True}],
            f"{p['customer']} and {p['other']} each withdraw {p['small']}, well covered: withdraw "
            f"must return True twice; it {[_said(r) for r in returned]}")
    require(commits == [{"value": True}, {"value": True}],
            f"{p['customer']}'s and {p['other']}'s concurrent withdrawals touch different "
            f"customers' rows: the materialised conflict must be per customer, so both commit; "
            f"the commits {[_said(c) for c in commits]}")
