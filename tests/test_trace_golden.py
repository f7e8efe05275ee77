"""The redesign kept the protocol's behaviour: the same cells, the same trace
sentences and the same Figure 4 frames as recorded before it
(tests/data/protocol_traces.json, captured by tests/trace_golden.py)."""
import json
from pathlib import Path

import pytest

from trace_golden import SCENARIOS, capture

GOLDEN = json.loads((Path(__file__).parent / "data" / "protocol_traces.json").read_text())


@pytest.fixture(scope="module")
def captured():
    return capture()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_trace_is_identical_to_the_one_recorded_before_the_redesign(captured, scenario):
    assert captured[scenario] == GOLDEN[scenario]


def test_figure4_frames_are_the_papers_ten_row_transactions(captured):
    steps = [e["step"] for e in captured["figure4"]]
    assert steps == ["prewrite-primary", "prewrite-secondary", "commit-primary",
                     "commit-secondary", "get", "get", "prewrite-primary",
                     "prewrite-secondary", "commit-primary", "commit-secondary"]
    commit_point = captured["figure4"][8]
    assert commit_point["changes"] == [["bal:write", 8, None, "data @ 7"],
                                       ["bal:lock", 7, "I am primary", None]]


def test_the_comparison_can_fail(captured):
    changed = json.loads(json.dumps(captured["figure4"]))
    changed[8]["note"] = changed[8]["note"].replace("commit point", "commit")
    assert changed != GOLDEN["figure4"]
