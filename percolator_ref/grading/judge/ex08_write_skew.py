"""Exercise 8 (challenge): write skew under snapshot isolation, checked by the trusted world.

A customer's row holds two balances, ``checking`` and ``savings``; either may
go negative as long as ``checking + savings >= 0``. Snapshot isolation (the
paper's isolation: a transaction aborts only on a write-write conflict)
allows write skew: two withdrawals read both balances in overlapping
snapshots, each writes a *different* balance, both commit, and the total goes
negative. The student writes ``withdraw(txn, customer, account, amount) ->
bool`` that keeps the constraint under every interleaving, with Percolator's
own conflict rule as the only means; withdrawals of different customers must
not conflict. The exercise leaves the idea to the student (the solution
notebook has it), so the feedback below says which guarantee broke and how,
never the fix.

The student's ``withdraw`` runs in the sandbox, inside a reference
:class:`~percolator_ref.Transaction` on a proxy cluster: every row
transaction and timestamp is a message to the grader's
:class:`~.trusted.TrustedWorld`, which holds the bank. Verdicts read the
world's own record: the balances a reference transaction reads after every
client finished, and which transactions left write records (committed); the
client's answer counts only as what ``withdraw`` returned. The families of
interleavings are enumerated by :meth:`~.interactive.Trial.explore`: every
schedule with at most two preemptions of two withdrawals of two different
amounts (in both value classes, enumerated: each takes more than its own
account holds, or only one does), and of two withdrawals after an earlier one
of the same customer. No family crashes a withdrawal:
``withdraw`` only reads and buffers, and a crash after it is the reference
commit's business (exercises 1-4). Customers, balances, amounts and timestamps come from the secret;
each withdrawal of a family needs the other account's money (it is larger
than either balance) and leaves at least 100 of the total, so the same
schedules decide under every secret.
"""
from __future__ import annotations

from percolator_ref import Transaction

from ..client.ex08_write_skew import exercise
from ..framework import require, said
from .invariants import protocol_invariants
from .participants import Participant, Scope
from .protocol_world import TABLE


FAMILY_TTL = 0.004        # a waiting withdrawal outlives a silent holder within a few backoffs


ACCOUNTS = ("checking", "savings")
SCOPE = Scope(tables=frozenset({TABLE}))     # the bank: the common cell may be any row of it
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")


def _params(rng) -> dict:
    a, b = rng.sample(NAMES, 2)
    checking, savings = rng.randrange(300, 900), rng.randrange(300, 900)
    total, most = checking + savings, max(checking, savings)
    big = rng.randrange(most + 2, total - 100)        # needs both accounts; leaves >= 100
    return {"t0": rng.randrange(10, 10 ** 6), "customer": f"{a}{rng.randrange(10, 100)}",
            "other": f"{b}{rng.randrange(10, 100)}", "checking": checking, "savings": savings,
            "big": big, "small": rng.randrange(1, 50)}


# -- the bank (the world's own record) -----------------------------------------------------

def _bank(trial, p, **customers):
    """A world with ``customer=(checking, savings)`` committed (None: the balance is absent)."""
    w = trial.world()
    _open_accounts(w, p, customers)
    return w


def _open_accounts(w, p, customers) -> None:
    w.scope = SCOPE
    values = {(p[name], account): value for name, balances in customers.items()
              for account, value in zip(ACCOUNTS, balances) if value is not None}
    start = w.oracle.peek()
    w.committed(values, start, start + 1)


def _balances(w, customer) -> list:
    """What a reference transaction reads now (cleaning up what crashed clients left)."""
    reader = Transaction(w.cluster, "auditor")
    try:
        return [reader.get(customer, account) for account in ACCOUNTS]
    finally:
        reader.abandon()


def _total(balances) -> int:
    return sum(b or 0 for b in balances)


def _committed(w, c) -> bool:
    """Did client ``c``'s transaction commit? By the world's log of ``c``'s own steps
    (:meth:`~.participants.Client.committed`), never by a record found somewhere in the store."""
    return c.committed()


def _withdraw_once(w, customer, account, amount):
    c = w.client("withdrawal", customer, account, amount)
    return c, c.answer


def _ok(result) -> bool:
    return result == {"value": True}


# -- 1. covered withdrawals ---------------------------------------------------------------

@exercise.check("a withdrawal the total covers succeeds, down to a total of 0", params=_params)
def _covered(trial, p):
    w = _bank(trial, p, customer=(p["checking"], p["savings"]), other=(p["checking"], None))
    who, ch, sv, small = p["customer"], p["checking"], p["savings"], p["small"]
    amount = sv + small
    c, returned = _withdraw_once(w, who, "savings", amount)
    require(_ok(returned) and _committed(w, c),
            f"{who} has checking {ch} and savings {sv} (total {ch + sv}): withdrawing {amount} from "
            f"savings leaves savings {-small}, which the total covers, so withdraw must return True "
            f"and the transaction commit; withdraw {said(returned)}")
    after = _balances(w, who)
    require(after == [ch, -small],
            f"after withdrawing {amount} from savings, {who}'s balances must be checking {ch}, "
            f"savings {-small} (only the named account changes); the store holds {after}")
    c, returned = _withdraw_once(w, who, "checking", ch - small)
    after = _balances(w, who)
    require(_ok(returned) and _committed(w, c) and _total(after) == 0,
            f"{who} then withdraws {ch - small} from checking, the whole remaining total: the "
            f"total becomes exactly 0, which is allowed (>= 0); withdraw {said(returned)}, "
            f"the store holds {after}")
    c, returned = _withdraw_once(w, p["other"], "savings", small)
    other = _balances(w, p["other"])
    require(_ok(returned) and other == [ch, -small],
            f"{p['other']} has checking {ch} and no savings cell (a missing balance is 0): "
            f"withdrawing {small} from savings must succeed, leaving savings {-small}; withdraw "
            f"{said(returned)}, the store holds {other}")


# -- 2. refused withdrawals ------------------------------------------------------------------

@exercise.check("an uncovered withdrawal is refused and writes nothing", params=_params)
def _refused(trial, p):
    w = _bank(trial, p, customer=(p["checking"], p["savings"]))
    who, ch, sv = p["customer"], p["checking"], p["savings"]
    amount = ch + sv + p["small"]
    c, returned = _withdraw_once(w, who, "checking", amount)
    require(returned == {"value": False},
            f"{who} has a total of {ch + sv}: withdrawing {amount} would leave {ch + sv - amount} "
            f"< 0, so withdraw must return False; it {said(returned)}")
    balances = _balances(w, who)
    require(len(c.timestamps) == 1 and balances == [ch, sv],
            f"a refused withdrawal must buffer nothing (check before you write): its transaction "
            f"then commits as read-only, without taking a commit timestamp. It took "
            f"{len(c.timestamps)} timestamps; balances now {balances} (were [{ch}, {sv}])")


@exercise.check("a refused withdrawal does not make a concurrent one fail", params=_params)
def _refused_concurrent(trial, p):
    w = _bank(trial, p, customer=(p["checking"], p["savings"]))
    who, small, total = p["customer"], p["small"], p["checking"] + p["savings"]
    no, yes = w.client("teller", label="N"), w.client("teller", label="Y")
    returned = [w.call(no, "withdraw", who, "checking", total + small),
                w.call(yes, "withdraw", who, "savings", small)]
    require(returned == [{"value": False}, {"value": True}],
            f"of two concurrent withdrawals from {who} (total {total}), {total + small} from "
            f"checking must be refused and {small} from savings accepted; withdraw "
            f"{[said(r) for r in returned]}")
    w.call(no, "commit")
    w.call(yes, "commit")
    balances = _balances(w, who)
    require(_committed(w, yes) and balances == [p["checking"], p["savings"] - small],
            f"the refused withdrawal wrote nothing, so nothing conflicts with the accepted one "
            f"({small} from savings), which must commit even though the refused one committed "
            f"first; it {'committed' if _committed(w, yes) else 'did not commit'}, balances "
            f"{balances}")


# -- 3. sequential ------------------------------------------------------------------------------

@exercise.check("sequential withdrawals respect the total", params=_params)
def _sequential(trial, p):
    w = _bank(trial, p, customer=(p["checking"], p["savings"]))
    total, big = p["checking"] + p["savings"], p["big"]
    returned = [_withdraw_once(w, p["customer"], account, big)[1]
                for account in ("checking", "savings", "checking")]
    require(returned == [{"value": True}, {"value": False}, {"value": False}],
            f"{p['customer']} (total {total}) withdraws {big} from checking, then from savings, "
            f"then from checking, one after the other: only the first fits (then {total - big} "
            f"is left); withdraw {[said(r) for r in returned]}")
    balances = _balances(w, p["customer"])
    require(_total(balances) == total - big,
            f"the total must end at {total - big}; the store holds {balances}")


# -- 4. every small interleaving ----------------------------------------------------------------

def _pair(p, amounts=None) -> list:
    a, b = amounts or (p["big"], p["big"])
    return [Participant("A", "withdrawal", (p["customer"], "checking", a), crashable=True),
            Participant("B", "withdrawal", (p["customer"], "savings", b), crashable=True)]


def _judge_pair(p, amounts, before: int):
    """Every schedule: the total stays >= 0 and the balances are what the commits wrote."""
    def judge(w, clients):
        balances = _balances(w, p["customer"])
        won = {label: _committed(w, c) for label, c in clients.items()}
        said_ = ", ".join(f"{label} {said(c.answer) if c.answer else 'crashed'}"
                          f"{' and committed' if won[label] else ''}"
                          for label, c in clients.items())
        require(_total(balances) >= 0,
                f"A withdraws {amounts[0]} from checking and B {amounts[1]} from savings of "
                f"{p['customer']} (total {before}): in this schedule the total ends at "
                f"{_total(balances)} ({said_}): write skew. Each checked the total in its own "
                f"snapshot and the commits let both through: the committed total must stay "
                f">= 0 in every interleaving (rule 3)")
        for label, c in clients.items():
            require(c.answer in ({"value": True}, {"value": False}),
                    f"withdraw must return True or False; {label}'s {said(c.answer)}")
            require(c.timestamps, f"{label}'s withdrawal never began a transaction (it took no "
                                  f"start timestamp from the oracle)")
        _alone(w, p, clients, won, amounts, before, said_)
        taken = sum(amount for amount, label in zip(amounts, "AB") if won[label])
        require(_total(balances) == before - taken,
                f"the committed withdrawals took {taken} of {before}, yet the store's total is "
                f"{_total(balances)} ({said_}): a withdrawal that did not commit changed a "
                f"balance, or one that committed lost its write")
        protocol_invariants(w)
    return judge


def _alone(w, p, clients, won, amounts, before, said_) -> None:
    """In a schedule where one withdrawal ran entirely before the other, the first commits and
    the second, which no longer fits, is refused (the world's log orders their steps)."""
    order = [e.client for e in w.log if e.client in clients]
    first = order[0] if order else None
    if not order or order != sorted(order, key=lambda label: label != first):
        return
    second = "B" if first == "A" else "A"
    require(won[first] and clients[second].answer == {"value": False},
            f"in this schedule {first} ran to its end before {second} began: {first}'s "
            f"withdrawal of {amounts['AB'.index(first)]} (total {before}) must commit, and "
            f"{second}'s, which no longer fits, return False ({said_})")


EACH_OVER, ONE_OVER = "each overdraws its own account", "only B overdraws its own account"


def _value_class(balances, amounts) -> str:
    """Which of A (from checking) and B (from savings) take more than their own account holds."""
    over = [amount > balance for amount, balance in zip(amounts, balances)]
    return {(True, True): EACH_OVER, (False, True): ONE_OVER}.get(tuple(over), f"over: {over}")


def _skew_amounts(p, value_class) -> tuple:
    """A's and B's amounts: together more than the total, each alone leaving >= 100."""
    if value_class == EACH_OVER:
        return p["big"], p["big"] - 1                    # two different amounts, each too big
    return p["checking"] - p["small"], p["savings"] + 2 * p["small"]   # A fits in checking


@exercise.check("every interleaving of two withdrawals keeps the total >= 0", params=_params,
                limit=60.0, classes=(EACH_OVER, ONE_OVER))
def _skew(trial, p):
    for value_class in trial.each_class():
        amounts = _skew_amounts(p, value_class)
        trial.covered(value_class, _value_class((p["checking"], p["savings"]), amounts))

        def family(w):
            _open_accounts(w, p, {"customer": (p["checking"], p["savings"])})
            return _pair(p, amounts)
        trial.explore(family, _judge_pair(p, amounts, p["checking"] + p["savings"]),
                      ttl=FAMILY_TTL, crashes=0)


@exercise.check("every interleaving of two withdrawals after an earlier one keeps the total >= 0",
                params=_params, limit=60.0)
def _skew_again(trial, p):
    small, amounts = p["small"], (p["big"] - p["small"], p["big"] - p["small"])

    def family(w):
        _open_accounts(w, p, {"customer": (p["checking"], p["savings"])})
        earlier = w.client("withdrawal", p["customer"], "checking", small, label="E")
        require(_ok(earlier.answer) and _committed(w, earlier),
                f"an earlier withdrawal of {small} from {p['customer']}'s checking must succeed "
                f"and commit; withdraw {said(earlier.answer)}")
        return _pair(p, amounts)
    trial.explore(family, _judge_pair(p, amounts, p["checking"] + p["savings"] - small),
                  ttl=FAMILY_TTL, crashes=0)


# -- 5. other customers ---------------------------------------------------------------------------

@exercise.check("withdrawals of different customers do not conflict", params=_params)
def _independent(trial, p):
    w = _bank(trial, p, customer=(p["checking"], p["savings"]), other=(p["savings"], p["checking"]))
    mine, theirs = w.client("teller", label="M"), w.client("teller", label="T")
    returned = [w.call(mine, "withdraw", p["customer"], "checking", p["small"]),
                w.call(theirs, "withdraw", p["other"], "savings", p["small"])]
    require(returned == [{"value": True}, {"value": True}],
            f"{p['customer']} and {p['other']} each withdraw {p['small']}, well covered: withdraw "
            f"must return True twice; it {[said(r) for r in returned]}")
    w.call(mine, "commit")
    w.call(theirs, "commit")
    require(_committed(w, mine) and _committed(w, theirs),
            f"{p['customer']}'s and {p['other']}'s concurrent withdrawals are of different "
            f"customers, both well covered: both must commit (rule 4); "
            f"committed: {p['customer']} {_committed(w, mine)}, {p['other']} "
            f"{_committed(w, theirs)}")
    balances = [_balances(w, p["customer"]), _balances(w, p["other"])]
    require(balances == [[p["checking"] - p["small"], p["savings"]],
                         [p["savings"], p["checking"] - p["small"]]],
            f"{p['customer']} withdrew {p['small']} from checking and {p['other']} {p['small']} "
            f"from savings, both committing: the store holds {balances[0]} and {balances[1]}")
