"""Exercise 8 (write skew): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.

The parts a wrong answer gets right are written once (``CORRECT_*``: read both
balances, refuse an overdraft of the total, withdraw, write what was read to
materialise the conflict); most entries spell out only the part they get wrong
(:func:`_answer`); the few whose whole shape is the misconception are written out.
"""
import textwrap

CORRECT_READ = '''\
other = "savings" if account == "checking" else "checking"
mine = txn.get(customer, account) or 0
theirs = txn.get(customer, other) or 0
'''

CORRECT_CHECK = '''\
if mine + theirs < amount:
    return False
'''

CORRECT_WITHDRAW = '''\
txn.set(customer, account, mine - amount)
'''

CORRECT_CONFLICT = '''\
txn.set(customer, other, theirs)
'''


def _answer(read=CORRECT_READ, check=CORRECT_CHECK, withdraw=CORRECT_WITHDRAW,
            conflict=CORRECT_CONFLICT, before="") -> str:
    """A whole answer cell: ``withdraw`` with the student's parts (``before``: module code)."""
    body = "".join(textwrap.dedent(part) for part in (read, check, withdraw, conflict))
    return ("\n" + before + "def withdraw(txn, customer, account, amount):\n"
            + textwrap.indent(body + "return True\n", " " * 4))


WRONG = {
    "checks the total but writes only its own account (write skew)": '''
def withdraw(txn, customer, account, amount):
    checking = txn.get(customer, "checking") or 0
    savings = txn.get(customer, "savings") or 0
    if checking + savings < amount:
        return False
    balance = checking if account == "checking" else savings
    txn.set(customer, account, balance - amount)
    return True
''',

    "reads a guard cell to 'lock' the customer, but never writes it": _answer(read='''\
txn.get(customer, "guard")                 # reading it makes the two withdrawals conflict
other = "savings" if account == "checking" else "checking"
mine = txn.get(customer, account) or 0
theirs = txn.get(customer, other) or 0
''', conflict=""),
    "materialises the conflict in a guard cell of the account it withdraws from": _answer(
        conflict='''\
txn.set(customer, account + "_guard", txn.start_ts)      # lock my account
'''),
    "materialises the conflict in one bank-wide cell": _answer(conflict='''\
txn.set("bank", "last_withdrawal", txn.start_ts)       # every withdrawal writes this
'''),
    "only lets an account pay for itself": '''
def withdraw(txn, customer, account, amount):
    mine = txn.get(customer, account) or 0
    if mine < amount:
        return False
    other = "savings" if account == "checking" else "checking"
    txn.set(customer, account, mine - amount)
    txn.set(customer, other, txn.get(customer, other) or 0)
    return True
''',

    "writes the guard cell before checking the total": _answer(read='''\
txn.set(customer, "guard", txn.start_ts)        # materialise the conflict first, always
''' + CORRECT_READ, conflict=""),
    "writes the new balances, then checks them": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    txn.set(customer, account, mine - amount)
    txn.set(customer, other, theirs)
    if (mine - amount) + theirs < 0:
        return False                                # the caller will not commit it
    return True
''',

    "refuses when the total would drop to exactly 0": _answer(check='''\
if mine + theirs <= amount:
    return False
'''),
    "assumes both balances exist": _answer(read='''\
other = "savings" if account == "checking" else "checking"
mine, theirs = txn.get(customer, account), txn.get(customer, other)
'''),
    "takes the shortfall from the other account (overdraft protection)": _answer(
        withdraw='''\
take = min(mine, amount) if mine > 0 else 0
txn.set(customer, account, mine - take)
txn.set(customer, other, theirs - (amount - take))
''', conflict=""),
}


# More misconceptions that show only in an interleaving: each withdraw keeps the total >= 0
# whenever the withdrawals run one after the other.
WRONG.update({
    "writes the guard cell only the first time (once it exists, it is there)": _answer(
        conflict='''\
if txn.get(customer, "guard") is None:     # create the guard cell that serialises us
    txn.set(customer, "guard", txn.start_ts)
'''),
    "names the guard cell after the amount (two equal withdrawals conflict)": _answer(
        conflict='''\
txn.set(customer, f"guard_{amount}", txn.start_ts)    # the same withdrawal twice: one aborts
'''),
    "materialises the conflict only when the total left would be small": _answer(
        conflict='''\
if mine + theirs - amount < 100:            # plenty left: no other withdrawal can hurt
    txn.set(customer, other, theirs)
'''),
    "remembers which customers already have a guard cell and writes it only once": _answer(
        before='''\
GUARDED = set()          # customers whose guard cell exists already


''', conflict='''\
if customer not in GUARDED:
    txn.set(customer, "guard", txn.start_ts)      # now withdrawals of it conflict
    GUARDED.add(customer)
'''),
})

INTERLEAVING = {
    # misconceptions that only an interleaving of withdrawals shows: every check of withdrawals
    # run one at a time (or in a fixed order) passes them
    "checks the total but writes only its own account (write skew)",
    "reads a guard cell to 'lock' the customer, but never writes it",
    "materialises the conflict in a guard cell of the account it withdraws from",
    "writes the guard cell only the first time (once it exists, it is there)",
    "names the guard cell after the amount (two equal withdrawals conflict)",
    "materialises the conflict only when the total left would be small",
    "remembers which customers already have a guard cell and writes it only once",
}


# A pair in which only one withdrawal takes more than its own account holds: only the
# interleaving family's second value class shows these.
WRONG.update({
    "writes the guard cell only when its own account goes negative": _answer(conflict='''\
if mine - amount < 0:          # dipping into the other account: serialise with the others
    txn.set(customer, "guard", txn.start_ts)
'''),
    "needs no conflict when its own account covers the withdrawal": '''
def withdraw(txn, customer, account, amount):
    mine = txn.get(customer, account) or 0
    if mine >= amount:                  # my own money: nothing to coordinate
        txn.set(customer, account, mine - amount)
        return True
    other = "savings" if account == "checking" else "checking"
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, "overdraft", txn.start_ts)      # overdrafts of one customer conflict
    return True
''',
})
INTERLEAVING |= {"writes the guard cell only when its own account goes negative",
                 "needs no conflict when its own account covers the withdrawal"}
