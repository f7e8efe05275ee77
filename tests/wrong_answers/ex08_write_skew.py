"""Exercise 8 (write skew): plausible wrong answer cells, as students write them.

Each value is the whole answer cell. tests/test_grading_catalogue.py grades
every one through the sandbox: each must fail at least one check.
"""

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
    "reads a guard cell to 'lock' the customer, but never writes it": '''
def withdraw(txn, customer, account, amount):
    txn.get(customer, "guard")                 # reading it makes the two withdrawals conflict
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    return True
''',
    "materialises the conflict in a guard cell of the account it withdraws from": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, account + "_guard", txn.start_ts)      # lock my account
    return True
''',
    "materialises the conflict in one bank-wide cell": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set("bank", "last_withdrawal", txn.start_ts)       # every withdrawal writes this
    return True
''',
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
    "writes the guard cell before checking the total": '''
def withdraw(txn, customer, account, amount):
    txn.set(customer, "guard", txn.start_ts)        # materialise the conflict first, always
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    return True
''',
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
    "refuses when the total would drop to exactly 0": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs <= amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, other, theirs)
    return True
''',
    "assumes both balances exist": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine, theirs = txn.get(customer, account), txn.get(customer, other)
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, other, theirs)
    return True
''',
    "takes the shortfall from the other account (overdraft protection)": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    take = min(mine, amount) if mine > 0 else 0
    txn.set(customer, account, mine - take)
    txn.set(customer, other, theirs - (amount - take))
    return True
''',
}


# More misconceptions that show only in an interleaving: each withdraw keeps the total >= 0
# whenever the withdrawals run one after the other.
WRONG.update({
    "writes the guard cell only the first time (once it exists, it is there)": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    if txn.get(customer, "guard") is None:     # create the guard cell that serialises us
        txn.set(customer, "guard", txn.start_ts)
    return True
''',
    "names the guard cell after the amount (two equal withdrawals conflict)": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    txn.set(customer, f"guard_{amount}", txn.start_ts)    # the same withdrawal twice: one aborts
    return True
''',
    "materialises the conflict only when the total left would be small": '''
def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    if mine + theirs - amount < 100:            # plenty left: no other withdrawal can hurt
        txn.set(customer, other, theirs)
    return True
''',
    "remembers which customers already have a guard cell and writes it only once": '''
GUARDED = set()          # customers whose guard cell exists already


def withdraw(txn, customer, account, amount):
    other = "savings" if account == "checking" else "checking"
    mine = txn.get(customer, account) or 0
    theirs = txn.get(customer, other) or 0
    if mine + theirs < amount:
        return False
    txn.set(customer, account, mine - amount)
    if customer not in GUARDED:
        txn.set(customer, "guard", txn.start_ts)      # now withdrawals of it conflict
        GUARDED.add(customer)
    return True
''',
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
