"""The catalogue's CORRECT_* pieces are correct: composed with nothing wrong, they pass.

Each wrong answer in tests/wrong_answers/ spells out only its wrong part and takes
the rest from the module's correct pieces (``_answer()``'s defaults, ``CORRECT_*``).
So that "the rest" is really right, the all-correct composition must pass every
self-check of its exercise (the same checks and schedules as the grader).
"""
import importlib.util

import pytest

from percolator_ref import grading
from grading_helpers import REPO


def catalogue(n: int):
    path = next((REPO / "tests" / "wrong_answers").glob(f"ex{n:02d}_*.py"))
    spec = importlib.util.spec_from_file_location(f"pieces_{n}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_correct(n: int) -> str:
    m = catalogue(n)
    if n == 6:
        return m.cell("from types import SimpleNamespace\n\nfrom percolator_ref import cleanup\n"
                      "from percolator_ref.model import notify_col\n"
                      "from percolator_ref.step import Step\n",
                      m.CORRECT_PENDING_NOTIFICATION, m.CORRECT_RUN_OBSERVER, m.ANSWER)
    if n == 7:
        return m.cell('from types import SimpleNamespace\n\nSIDE, BROKERS = "broker_updates", '
                      '"brokers"\n', m.CORRECT_RECORD_TRADE, m.CORRECT_PENDING,
                      m.CORRECT_AGGREGATE, m.CORRECT_BROKER_VOLUME, m.ANSWER)
    return m._answer()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 7, 8])
def test_the_correct_pieces_pass_every_check(n):
    namespace = {}
    exec(compile(all_correct(n), "<all correct>", "exec"), namespace)
    report = grading.check(n, namespace[grading.exercise(n).exercise.answer])
    assert report.passed, report.failures()
