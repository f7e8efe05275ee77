"""workloads/tikv.py: the measurements notebook 09 shows, checked against what each commit did."""
from __future__ import annotations

from percolator_ref.variants.async_commit import AsyncCommit
from percolator_ref.variants.one_pc import OnePC
from percolator_ref.workloads import tikv


def test_a_one_cell_paper_commit_is_two_row_transactions_and_one_timestamp():
    cost = tikv.commit_cost(list, [("a", "v")])
    # the kit's count (not the paper's): prewrite, commit_ts, commit point; with the start: 4
    assert cost["round trips"] + 1 == 4
    assert (cost["row transactions"], cost["timestamps"]) == (2, 1)


def test_costs_follow_the_variants():
    one_row = [("acct", "Bob"), ("acct", "Joe")]
    table = tikv.cost_table({"paper": list, "1pc": lambda: [OnePC()],
                             "async": lambda: [AsyncCommit()]}, one_row).set_index("configuration")
    assert table.loc["paper", "row transactions"] == 4
    assert table.loc["1pc", "row transactions"] == 1
    assert table.loc["1pc", "locks left by a crash before the decision"] == 0
    assert table.loc["async", "decided after (round trips)"] == 3
    assert list(table.columns) == tikv.COST_COLUMNS[1:]


def test_contention_counts_every_transfer_once():
    found = tikv.contention(list, seed=3)
    assert found["committed"] + found["aborted"] == 6
    assert found["committed"] >= 1 and found["deadlocks"] == 0
    assert found["stepper"].cluster.check_history().ok
