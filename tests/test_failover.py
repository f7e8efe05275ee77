"""A Redis Cluster master SIGKILLed under TPC-E load (``percolator failover``).

- with ``wait=1`` (the default) no commit acknowledged to a client is lost and TPC-E's
  invariants hold; the JSON has its keys and a per-second series;
- without it, with the victim's replica cut off for a second before the kill, commits
  acknowledged in that second are lost and the invariants catch it: the check can fail;
- the timeline arithmetic and the lost-commit check on hand-made data (no server).
"""
import json

import pytest

from percolator_ref.commands import main
from percolator_ref.model import Write
from percolator_ref.workloads import failover
from redis_fixtures import require_redis

KEYS = ("tpsE_before", "tpsE_min_during", "tpsE_after", "recovery_s", "lost_commits",
        "invariants_ok", "series", "killed_at_s", "failover_done_at_s", "acknowledged_commits")


@pytest.mark.redis
@pytest.mark.slow
def test_failover_with_wait_loses_no_acknowledged_commit(capsys):
    require_redis()
    code = main(["failover", "--before", "2", "--after", "8", "--processes", "2",
                 "--json", "--no-progress"])
    result = json.loads(capsys.readouterr().out)
    assert set(KEYS) <= set(result)
    assert result["lost_commits"] == 0 and result["invariants_ok"], result["violations"]
    assert result["reused_timestamps"] == 0          # the oracle's counter never went back
    assert code == 0
    assert result["acknowledged_commits"] > 0 and result["checked_commits"] > 0
    assert [row["t"] for row in result["series"]] == list(range(10))
    assert set(result["series"][0]) == {"t", "tpsE", "commits", "failed_attempts"}
    assert result["tpsE_before"] > 0 and result["recovery_s"] is not None
    assert result["killed_at_s"] < result["failover_done_at_s"]


@pytest.mark.redis
@pytest.mark.slow
def test_without_wait_the_replication_window_loses_acknowledged_commits():
    require_redis()
    result = failover.run_failover(failover.FailoverSettings(
        before_s=3, after_s=7, processes=2, wait=0, replica_lag_s=1.0), progress=False)
    assert result["lost_commits"] > 0
    assert not result["invariants_ok"]


def test_settings_refuse_bad_input(capsys):
    with pytest.raises(ValueError, match="processes"):
        failover.FailoverSettings(processes=0)
    with pytest.raises(ValueError, match="wait"):
        failover.FailoverSettings(wait=2)
    with pytest.raises(ValueError, match="masters"):
        failover.FailoverSettings(masters=2)
    assert main(["failover", "--before", "-1", "--json"]) == 2
    assert "argument --before" in capsys.readouterr().err


class FakeBigtable:
    def __init__(self, cells):
        self.cells = cells

    def versions(self, table, row, column):
        return self.cells.get((table, row, column), [])


def test_lost_commits_finds_a_missing_write_record():
    commits = [{"name": "a", "start_ts": 5, "commit_ts": 6, "cells": [["t", "r1", "c"]]},
               {"name": "b", "start_ts": 7, "commit_ts": 8,
                "cells": [["t", "r1", "c"], ["t", "r2", "c"]]},
               {"name": "read-only", "start_ts": 9, "commit_ts": None, "cells": []}]
    bt = FakeBigtable({("t", "r1", "c:write"): [(8, Write(7)), (6, Write(5))],
                       ("t", "r2", "c:write"): [(8, Write(6))]})   # wrong start_ts: lost
    assert [c["name"] for c in failover.lost_commits(bt, commits)] == ["b"]


def test_timeline_numbers_and_series():
    t0 = 1000.0
    times = [0.5 + i * 0.1 for i in range(40)] + [8.0 + i * 0.1 for i in range(20)]
    commits = [{"t": t0 + x, "trade_result": True} for x in times]
    failures = [{"t": t0 + 5.5}]
    series = failover.per_second(commits, failures, t0, 10)
    assert [r["tpsE"] for r in series] == [5, 10, 10, 10, 5, 0, 0, 0, 10, 10]
    assert series[5]["failed_attempts"] == 1
    numbers = failover.timeline_numbers(commits, t0, kill_t=4.5, end_t=10.0)
    assert numbers["tpsE_before"] == 10.0
    assert numbers["tpsE_min_during"] == 0
    assert 3.5 <= numbers["recovery_s"] <= 4.1       # half the rate back within 8.5 s
    assert numbers["tpsE_after"] == pytest.approx(10.0, abs=0.6)


def test_reused_timestamps_finds_a_timestamp_handed_out_twice():
    commits = [{"start_ts": 5, "commit_ts": 7}, {"start_ts": 8, "commit_ts": 9},
               {"start_ts": 3, "commit_ts": None}]                   # read-only: no commit ts
    assert failover.reused_timestamps(commits) == []
    # a counter that went back by three hands out 7 and 8 again
    commits += [{"start_ts": 7, "commit_ts": 8}]
    assert failover.reused_timestamps(commits) == [7, 8]
    assert failover.reused_timestamps([{"start_ts": 4, "commit_ts": 4}]) == []   # one owner


def test_recorded_failover_hands_no_timestamp_out_twice_with_wait():
    """The notebook's recorded run: with WAIT the oracle's counter never goes back."""
    from pathlib import Path
    run = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "data"
                      / "failover_run.json").read_text())
    assert run["settings"]["wait"] == 1 and run["reused_timestamps"] == 0
    assert run["acknowledged_commits"] > 0
    without = run["other_wait"]
    assert without["settings"]["wait"] == 0 and without["reused_timestamps"] > 0
