"""Exercise 8 (challenge): write skew under snapshot isolation.

A customer has two accounts, ``checking`` and ``savings``, in the row named
after the customer; the bank allows either to go negative as long as
``checking + savings >= 0``. The student writes ``withdraw(txn, customer,
account, amount) -> bool`` that keeps the constraint under snapshot
isolation by materialising the conflict, without making unrelated customers
conflict.
"""
from __future__ import annotations

import itertools

from percolator_ref import Transaction

from .battery import Battery
from .scenarios import commit, expect, new_cluster, read

battery = Battery(8, "write skew: keep checking + savings >= 0 under snapshot isolation")
ACCOUNTS = ("checking", "savings")


def reference(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine, theirs = txn.get(customer, account) or 0, txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, other, theirs)         # write what we read: the conflict is now a write-write one
    return True


def _bank(c, **customers):
    for name, (checking, savings) in customers.items():
        commit(c, {(name, "checking"): checking, (name, "savings"): savings})


def _total(c, customer):
    return sum(read(c, customer, a) or 0 for a in ACCOUNTS)


@battery.check("a withdrawal covered by the total succeeds")
def _covered(fn):
    c = new_cluster()
    _bank(c, alice=(100, 0))
    t = Transaction(c)
    expect(fn(t, "alice", "savings", 30), True, "withdraw(alice, savings, 30)")
    expect(t.commit(), True, "commit()")
    expect((read(c, "alice", "checking"), read(c, "alice", "savings")), (100, -30), "balances")


@battery.check("an uncovered withdrawal is refused and writes nothing")
def _refused(fn):
    c = new_cluster()
    _bank(c, alice=(100, 0))
    t = Transaction(c)
    expect(fn(t, "alice", "checking", 150), False, "withdraw(alice, checking, 150)")
    expect(list(t.writes), [], "buffered writes after a refusal")


@battery.check("sequential withdrawals respect the total")
def _sequential(fn):
    c = new_cluster()
    _bank(c, alice=(60, 40))
    results = []
    for account in ("checking", "savings", "checking"):
        t = Transaction(c)
        results.append(fn(t, "alice", account, 45))
        t.commit()
    expect(results, [True, True, False], "three withdrawals of 45 from a total of 100")
    expect(_total(c, "alice"), 10, "total")


def _interleavings():
    """Every order of A's and B's (begin, withdraw, commit) steps, each in program order."""
    for slots in itertools.combinations(range(6), 3):
        yield ["A" if i in slots else "B" for i in range(6)]


@battery.check("every interleaving of two withdrawals keeps the total >= 0")
def _skew(fn):
    for order in _interleavings():
        c = new_cluster()
        _bank(c, alice=(100, 50))
        txns, step = {}, {"A": 0, "B": 0}
        account = {"A": "checking", "B": "savings"}
        for who in order:
            if step[who] == 0:
                txns[who] = Transaction(c)
            elif step[who] == 1:
                fn(txns[who], "alice", account[who], 120)
            else:
                txns[who].commit()
            step[who] += 1
        total = _total(c, "alice")
        assert total >= 0, f"order {''.join(order)}: total {total} after two withdrawals of 120"


@battery.check("withdrawals of different customers do not conflict")
def _independent(fn):
    c = new_cluster()
    _bank(c, alice=(100, 0), bob=(100, 0))
    a, b = Transaction(c), Transaction(c)
    fn(a, "alice", "checking", 10)
    fn(b, "bob", "savings", 10)
    expect((a.commit(), b.commit()), (True, True), "commits of alice's and bob's withdrawals")


# -- mutants ------------------------------------------------------------------

def _naive(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine, theirs = txn.get(customer, account) or 0, txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    return True


def _global_guard(txn, customer, account, amount):
    if not _naive(txn, customer, account, amount):
        return False
    txn.set("bank", "guard", txn.start_ts)
    return True


def _own_account_only(txn, customer, account, amount):
    mine = txn.get(customer, account) or 0
    if mine < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, "guard", txn.start_ts)
    return True


def _guard_even_when_refused(txn, customer, account, amount):
    txn.set(customer, "guard", txn.start_ts)
    return _naive(txn, customer, account, amount)


mutants = {
    "withdraw with write skew (no materialised conflict)": _naive,
    "withdraw through one global guard cell": _global_guard,
    "withdraw checking only its own account": _own_account_only,
    "withdraw writing even when it refuses": _guard_even_when_refused,
}
