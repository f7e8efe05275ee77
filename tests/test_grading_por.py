"""Partial-order reduction in the schedule explorer (sleep sets, schedules.py's module doc):
independent messages run in one order, dependent ones in both, and a wrong answer that
needs an order is still caught; the verdicts of two exercises' catalogues are the same
with the reduction and without."""
import itertools

import pytest

from percolator_ref import grading
from percolator_ref.grading.judge.interactive import self_check
from percolator_ref.grading.judge.schedules import MERGED, Merged, explore, independent
from grading_helpers import catalogue, solution_answer


def row(name, mode="w"):
    return (("row", "t", name), mode)


class Toy:
    def __init__(self, label, steps, crashable=False):
        self.label, self.steps, self.crashable = label, list(steps), crashable


def toy_family(plans, crashable=False):
    """``run`` for :func:`explore`: client i takes the steps ``plans[i]`` (each a set of
    (resource, mode)); the world is a dict of row -> the client steps that wrote it, in order.
    Returns the runs' orders and final states."""
    finals, orders = [], []

    def run(chooser, record):
        clients = [Toy(chr(65 + i), plan, crashable) for i, plan in enumerate(plans)]
        left = {c.label: list(c.steps) for c in clients}
        state, order = {}, []
        while True:
            ready = [c for c in clients if left[c.label]]
            if not ready:
                break
            try:
                action, c = chooser.choose(ready)
            except Merged:                    # every option asleep
                return MERGED, []
            if action == "crash":
                left[c.label] = []
                order.append(c.label + "!")
                chooser.executed(frozenset({(("client", c.label), "w")}), False)
                continue
            step = left[c.label].pop(0)
            order.append(c.label + str(len(c.steps) - len(left[c.label])))
            for what, mode in step:
                if mode == "w":
                    state.setdefault(what, []).append(c.label)
            chooser.executed(frozenset(step) | {(("client", c.label), "w")},
                             bool(left[c.label]))
        orders.append(tuple(order))
        finals.append(tuple(sorted((k, tuple(v)) for k, v in state.items())))
        return None, []
    return run, orders, finals


def explored(plans, preemptions=2, crashes=0, crashable=False, reduce=True):
    run, orders, finals = toy_family(plans, crashable)
    outcome = explore(run, preemptions, crashes, reduce=reduce)
    return outcome, orders, set(finals)


def test_independence_is_read_write_conflict_on_rows_tables_and_clients():
    a, b = frozenset({row("x")}), frozenset({row("y")})
    assert independent(a, b)
    assert not independent(a, frozenset({row("x", "r")}))
    assert independent(frozenset({row("x", "r")}), frozenset({row("x", "r")}))
    assert not independent(frozenset({(("table", "t"), "r")}), a)
    assert not independent(frozenset({(("*",), "w")}), frozenset({(("clock",), "r")}))
    assert not independent(None, b)


def test_independent_messages_on_different_rows_run_once():
    one = [[{row("a")}], [{row("b")}]]
    assert explored(one, reduce=False)[0].runs == 2
    assert explored(one)[0].runs == 1                 # both orders are one trace


def test_independent_clients_of_two_steps_run_in_the_two_serial_orders_only():
    """Every order of A1 A2 and B1 B2 (on four rows) is one trace; the reduction keeps the
    serial orders A1 A2 B1 B2 and B1 B2 A1 A2 (both 0 preemptions): pruning B-first would need
    A1 B1 B2 A2, which costs 2 preemptions and falls outside a bound of 0 or 1."""
    plans = [[{row("a1")}, {row("a2")}], [{row("b1")}, {row("b2")}]]
    full, full_orders, full_finals = explored(plans, reduce=False)
    cut, cut_orders, cut_finals = explored(plans)
    assert full.runs == len(set(full_orders)) == 6
    assert sorted(cut_orders) == [("A1", "A2", "B1", "B2"), ("B1", "B2", "A1", "A2")]
    assert cut_finals == full_finals


def test_reads_of_one_row_commute_and_writes_do_not():
    reads = [[{row("x", "r")}], [{row("x", "r")}]]
    assert explored(reads)[0].runs == 1
    writes = [[{row("x")}], [{row("x")}]]
    outcome, orders, finals = explored(writes)
    assert set(orders) == {("A1", "B1"), ("B1", "A1")}   # dependent: both orders
    assert finals == {((("row", "t", "x"), ("A", "B")),), ((("row", "t", "x"), ("B", "A")),)}


@pytest.mark.parametrize("preemptions,crashes", [(0, 0), (1, 0), (2, 0), (1, 1), (2, 1), (3, 1)])
def test_every_final_state_within_the_bounds_is_still_reached(preemptions, crashes):
    """Mixed families: some steps conflict, most do not; the reduced search reaches the same
    final states as the full one under each bound, with no more runs."""
    families = [
        [[{row("x")}, {row("a")}, {row("y", "r")}], [{row("b")}, {row("x")}, {row("y")}]],
        [[{row("a")}, {row("x")}], [{row("x", "r")}, {row("b")}], [{row("c")}, {row("x")}]],
        [[{row("a")}, {row("b")}, {row("x")}], [{row("c")}, {row("x")}]],
    ]
    for plans in families:
        full, _, full_finals = explored(plans, preemptions, crashes, crashable=crashes > 0,
                                        reduce=False)
        cut, _, cut_finals = explored(plans, preemptions, crashes, crashable=crashes > 0)
        assert cut_finals == full_finals, (plans, preemptions, crashes)
        assert cut.runs <= full.runs


def test_a_bug_that_needs_an_order_is_still_caught():
    """Lost update: A and B each read x then write x; a check fails when both read before
    either wrote (it needs A's read, B's read, then the writes). Independent bookkeeping steps
    on other rows sit between them; the reduced search still finds the bad order."""
    plans = [[{row("x", "r")}, {row("a")}, {row("x")}], [{row("x", "r")}, {row("b")}, {row("x")}]]

    def caught(reduce):
        run, orders, _ = toy_family(plans)
        found = []

        def judged(chooser, record):
            before = len(orders)
            out = run(chooser, record)
            if len(orders) > before:
                o = orders[-1]
                if max(o.index("A1"), o.index("B1")) < min(o.index("A3"), o.index("B3")):
                    found.append(o)
                    return "lost update", list(o)
            return out
        outcome = explore(judged, 2, 0, reduce=reduce)
        return outcome, found
    full, full_found = caught(False)
    cut, cut_found = caught(True)
    assert not full.passed and not cut.passed
    assert cut.runs < full.runs
    assert len(cut.steps) == len(full.steps)         # the shortest failure is as short


def family_verdicts(n: int, source: str, reduce: bool, monkeypatch) -> tuple:
    """The self-check of ``source`` on exercise ``n``'s family checks (those that explore
    schedules): ``([(check, passed)], schedules run)``."""
    from percolator_ref.grading.judge import interactive
    spec = grading.exercise(n).exercise
    namespace = {}
    exec(compile(source, "<answer>", "exec"), namespace)
    runs = []
    real = interactive.explore

    def counting(*args, **kwargs):
        outcome = real(*args, **kwargs)
        runs.append(outcome.runs)
        return outcome
    monkeypatch.setenv("PERCOLATOR_POR", "1" if reduce else "0")
    monkeypatch.setattr(interactive, "explore", counting)
    families = {c.name for c in spec.checks if c.name.startswith("every interleaving")}
    report = self_check(spec, namespace[spec.answer], only=families)
    return [(r.name, r.passed) for r in report.results], sum(runs)


def test_exercise_8s_family_verdicts_are_the_same_with_and_without_reduction(monkeypatch):
    """The CI-sized equivalence run (`make por-equivalence` runs every catalogue entry of
    every exercise): the solution and the first entry only an interleaving catches, on
    exercise 8's two families (each answer runs them twice, about 10 s of CPU)."""
    entries = catalogue(8)
    first = sorted(entries.INTERLEAVING)[0]
    answers = {"solution": solution_answer(8), first: entries.WRONG[first]}
    for name, source in answers.items():
        before, runs_before = family_verdicts(8, source, False, monkeypatch)
        after, runs_after = family_verdicts(8, source, True, monkeypatch)
        assert len(before) == 2
        assert before == after, name
        assert 0 < runs_after <= runs_before, name
        assert (name == "solution") == all(passed for _, passed in after), name


def test_random_families_reach_the_same_final_states_within_each_bound():
    """300 random families (2-3 clients, 1-3 steps each, on 3 rows, reads and writes, crashes
    allowed): under every bound the reduced search reaches exactly the full search's final
    states (each final state records, per row, the order its writers wrote it)."""
    import random
    rng = random.Random(27)
    for _ in range(300):
        plans = [[{row(rng.choice("xyz"), rng.choice("rww"))} for _ in range(rng.randint(1, 3))]
                 for _ in range(rng.randint(2, 3))]
        for preemptions, crashes in [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]:
            args = (plans, preemptions, crashes, crashes > 0)
            full, _, full_finals = explored(*args, reduce=False)
            cut, _, cut_finals = explored(*args)
            assert cut_finals == full_finals, (plans, preemptions, crashes)
            assert cut.runs <= full.runs
