"""The Hermitage anomaly set under snapshot isolation.

Each schedule lives in ``percolator_ref.workloads.hermitage`` (so notebooks
can run and tabulate them); here each is run on the parametrised backend and
its exact reads, commit outcomes and final table are pinned, written out by
hand from the schedule, together with the expected verdict and a clean
history check.
"""
import pytest

from percolator_ref.workloads import hermitage

ALL = {"1": 10, "2": 20}

EXPECTED = {
    "G0": ("prevented", {}, {"T1": True, "T2": False}, {"1": 11, "2": 21}),
    "G1a": ("prevented",
            {"T2 where true (before T1 aborts)": ALL, "T2 where true (after T1 aborts)": ALL},
            {"T1": "crashed before commit point", "T2": True}, ALL),
    "G1b": ("prevented",
            {"T2 where value % 5 = 0 (before T1 commits)": ALL,
             "T2 where value % 3 = 0 (after T1 commits)": {}},
            {"T1": True, "T2": True}, {"1": 11, "2": 20}),
    "G1c": ("prevented", {"T1 get 2": 20, "T2 get 1": 10},
            {"T1": True, "T2": True}, {"1": 11, "2": 22}),
    "OTV": ("prevented", {"T3 get 1": 11, "T3 get 2": 19},
            {"T1": True, "T2": False, "T3": True}, {"1": 11, "2": 19}),
    "PMP": ("prevented", {"T1 where value = 30": {}, "T1 where value % 3 = 0": {}},
            {"T2": True, "T1": True}, {"1": 10, "2": 20, "3": 30}),
    "PMP-write": ("prevented", {"T1 where true": ALL, "T2 where value = 20": {"2": 20}},
                  {"T1": True, "T2": False}, {"1": 20, "2": 30}),
    "P4": ("prevented", {"T1 get 1": 10, "T2 get 1": 10},
           {"T1": True, "T2": False}, {"1": 11, "2": 20}),
    "G-single": ("prevented", {"T1 get 1": 10, "T2 get 1": 10, "T2 get 2": 20, "T1 get 2": 20},
                 {"T2": True, "T1": True}, {"1": 12, "2": 18}),
    "G-single-dependencies": ("prevented",
                              {"T1 where value % 5 = 0": ALL, "T2 where value = 10": {"1": 10},
                               "T1 where value % 3 = 0": {}},
                              {"T2": True, "T1": True}, {"1": 12, "2": 20}),
    "G-single-write-1": ("prevented",
                         {"T1 get 1": 10, "T2 where true": ALL, "T1 where value = 20": {"2": 20}},
                         {"T2": True, "T1": False}, {"1": 12, "2": 18}),
    "G-single-write-2": ("prevented",
                         {"T1 get 1": 10, "T2 where true": ALL, "T1 where value = 20": {"2": 20}},
                         {"T1": True, "T2": False}, {"1": 10}),
    "G2-item": ("allowed", {"T1 get 1": 10, "T1 get 2": 20, "T2 get 1": 10, "T2 get 2": 20},
                {"T1": True, "T2": True}, {"1": 11, "2": 21}),
    "G2": ("allowed", {"T1 where value % 3 = 0": {}, "T2 where value % 3 = 0": {}},
           {"T1": True, "T2": True}, {"1": 10, "2": 20, "3": 30, "4": 42}),
    "G2-two-edges": ("allowed", {"T1 where true": ALL, "T3 where true": {"1": 10, "2": 25}},
                     {"T2": True, "T3": True, "T1": True}, {"1": 0, "2": 25}),
}


def test_the_scenario_list_covers_the_hermitage_set():
    names = [s.__name__ for s in hermitage.SCENARIOS]
    assert len(names) == len(set(names)) == len(EXPECTED)


@pytest.mark.parametrize("scenario", hermitage.SCENARIOS, ids=lambda s: s.__name__)
def test_hermitage_scenario(make_cluster, scenario):
    cluster = make_cluster()
    result = scenario(cluster)
    expected, reads, commits, final = EXPECTED[result.name]
    assert result.details == {"reads": reads, "commits": commits, "final": final}
    assert result.expected == expected
    assert result.observed == expected
    assert result.history_ok and result.ok
    assert cluster.check_history().ok


def test_run_all_tabulates_every_scenario(make_cluster):
    table = hermitage.run_all(make_cluster)
    assert [r.name for r in table] == list(EXPECTED)
    assert table.ok
    text, page = repr(table), table._repr_html_()
    assert text.count("\n") == len(EXPECTED) - 1 and "FAIL" not in text
    assert page.count("<tr>") == len(EXPECTED) + 1
    assert repr(hermitage.run_all()) == text      # deterministic: same table every run


def test_a_result_that_disagrees_is_not_ok():
    r = hermitage.HermitageResult("P4", "x", "prevented", "allowed", True)
    assert not r.ok and "FAIL" in str(r)
    r = hermitage.HermitageResult("P4", "x", "prevented", "prevented", False)
    assert not r.ok
