"""Every combination of variants the kit accepts is run under crashes, faults and late
messages; every other is refused with its reason (issue 29).

``percolator_ref.workloads.variant_audit`` (its module doc says what a schedule
is and how it is judged). Here, to keep the suite's cost modest: every accepted
combination in memory (store faults at the first occurrence of each step, a
short bank), and three on Redis. The full sweep (``depth`` 2, every
combination on both stores) is ``python -m percolator_ref.workloads.variant_audit
--redis URL`` (README, "Protocol variants").
"""
from __future__ import annotations

import itertools

import pytest

from percolator_ref import Cluster, ManualClock
from percolator_ref.variants import KIT_ORDER, REFUSED, accepted_combinations
from percolator_ref.variants.one_pc import OnePC, OnePCTransaction
from percolator_ref.workloads.variant_audit import (KIT, audit_combination, bank_with_faults,
                                                    kit_variants, label, memory_maker,
                                                    redis_maker)

ACCEPTED = accepted_combinations()


def audited(make, tiny, combination, depth=1, rounds=15):
    figures = audit_combination(make, combination, depth)
    figures.add(bank_with_faults(tiny, combination, rounds))
    return figures


def assert_clean(figures):
    assert figures.ok, figures.problems
    assert (figures.anomalies, figures.lost, figures.partial, figures.g1a) == (0, 0, 0, 0)
    # the schedules did what they say: crashes, faults, late requests, dying readers
    assert figures.crashes and figures.faults and figures.late_duplicates
    assert figures.reader_deaths and figures.schedules >= 30


@pytest.mark.parametrize("combination", ACCEPTED, ids=label)
def test_every_accepted_combination_keeps_every_guarantee_in_memory(combination):
    assert_clean(audited(memory_maker(), memory_maker(0.05), combination))


@pytest.mark.parametrize("combination", [
    ("one-pc", "rollback-records"),
    ("async-commit",),
    ("pessimistic-locks", "one-pc", "lock-ttl", "rollback-records"),
], ids=label)
def test_accepted_combinations_keep_every_guarantee_on_redis(redis_url, combination):
    figures = audit_combination(redis_maker(redis_url), combination, depth=1, shapes=("row",)
                                if "one-pc" in combination else ("rows",))
    figures.add(bank_with_faults(redis_maker(redis_url, 0.05), combination, rounds=8))
    assert_clean(figures)


def test_every_other_combination_is_refused_with_its_reason():
    accepted = set(ACCEPTED)
    refused = 0
    for size in range(2, len(KIT_ORDER) + 1):
        for combination in itertools.combinations(KIT_ORDER, size):
            if combination in accepted:
                Cluster(clock=ManualClock(), variants=kit_variants(combination))
                continue
            refused += 1
            pair = next(p for p in REFUSED if p <= set(combination))
            with pytest.raises(ValueError, match=r"^variants: .* does not compose with .*: "
                                                 + REFUSED[pair][:30]):
                Cluster(clock=ManualClock(), variants=kit_variants(combination))
    assert refused == 2 ** len(KIT_ORDER) - len(ACCEPTED) and refused > 0


def test_the_kit_composes_its_variants_in_one_order_whatever_the_order_given():
    for combination in ACCEPTED:
        given = kit_variants(combination)[::-1]
        cluster = Cluster(clock=ManualClock(), variants=given)
        assert tuple(v.family for v in cluster.variants) == combination
    assert set(KIT) == set(KIT_ORDER)


class UnprotectedOnePC(OnePC):
    """BROKEN on purpose: one-phase commit that leaves no rollback record when refused or
    resolved rolled back (the code before issue 29's item 5)."""

    name = "one-pc-unprotected"
    Transaction = type("OnePCTransaction", (OnePCTransaction,),
                       {"mark_refused": lambda self, mutations: None})
    Cleanup = None


def test_the_audit_finds_a_late_duplicate_committing_an_aborted_one_phase_commit():
    figures = audit_combination(memory_maker(), ("one-pc",), depth=1, shapes=("row",),
                                factory=lambda combination: [UnprotectedOnePC()])
    assert figures.g1a > 0 and not figures.ok
