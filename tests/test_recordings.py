"""The recordings in ``notebooks/data/`` are what their commands produce.

Notebooks 07, 08 and 10 show long runs loaded from JSON recordings. A
recording edited by hand, or left stale after the code changed, would be an
output pasted into a notebook; these tests catch both.

**Simulated recordings** (``scale_*.json``, from ``percolator scale --json``).
Each stores the parameters that produced it: ``settings`` (every field of
:class:`~percolator_ref.sim.scaling.ScaleSettings`, the seed included),
``oracle_slowdown`` (absent from the oldest recordings, which predate the
option: 1), ``calibration`` (the service times used, with ``source`` naming the
calibration file, ``"file scale_default.json"``, or ``"measured on this
machine"`` for ``scale_default.json`` itself), ``seeds`` when several were
pooled, and the sizes as the points' ``machines``. :func:`command_of` rebuilds
the ``percolator scale`` command line from those fields alone (checked by
parsing it with the real parser: it gives back the recorded settings), then
runs it through :func:`percolator_ref.commands.main` for the recording's
cheapest point: its smallest size and its first seed. The simulation runs on
simulated time in one deterministic order, so with the calibration fixed the
point depends only on the settings and the seed: every recomputed figure must
equal the recorded one exactly (they are rounded by the same code). The sizes
and seeds not re-run are checked for internal consistency instead: the pooled
means and intervals are those of the per-seed points, and each efficiency is
the tpsE ratio it claims. ``scale_default.json``'s own calibration was measured
on a machine (not reproducible), so it is taken as given; what is checked is
that the other recordings used exactly it (times ``oracle_slowdown``).

**Measured recordings** (``figure8_store_cpu.json`` and ``bench_clients16.json``
from ``percolator bench --clients``; ``failover_run.json`` from the failover
experiment on a real replicated Redis Cluster). Their numbers are wall-clock
rates and CPU seconds of real processes on a loaded machine, and the failover's
timeline depends on when the operating system schedules a kill and a
failover: re-running gives other numbers, so they cannot be recomputed. What is
checked is their structure and internal consistency: every derived figure
(ratios, per-operation costs, CPU shares, the oracle's share taken out, the
timeline's minimum, totals) is recomputed from the raw fields it is derived
from, with the producing code's own functions where it has them.

Each check is a plain function that raises ``AssertionError`` naming what
differs; the ``test_tampered_*`` tests change one number in a temporary copy
and assert that the check catches it.
"""
import contextlib
import copy
import io
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from percolator_ref.bench import clients as bench_clients
from percolator_ref.bench.figure8 import PAPER_FIGURE_8
from percolator_ref.commands import main
from percolator_ref.commands.scale import INT_SETTINGS, settings_of
from percolator_ref.sim.calibration import load
from percolator_ref.sim.scaling import ScaleSettings, efficiencies
from percolator_ref.sim.seeds import pooled, slower_oracle

DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data"
SCALE = sorted(p.name for p in DATA.glob("scale_*.json"))
BENCH = ["bench_clients16.json", "figure8_store_cpu.json"]
FAILOVER = ["failover_run.json"]
# recomputing these recordings' cheapest point costs more than a few seconds of CPU:
# a size below reference_machines=100 is 100 pooled runs (about 5 s; TrueTime's 12 s)
SLOW = {"scale_default.json", "scale_no_batching.json", "scale_truetime.json"}
LONG = {"scale_no_batching.json", "scale_truetime.json"}
DEFAULT_SETTINGS = asdict(ScaleSettings())


def read(path) -> dict:
    return json.loads(Path(path).read_text())


def test_every_recording_is_checked():
    """A new recording must be added here (to be recomputed, or checked for consistency)."""
    assert sorted(p.name for p in DATA.glob("*.json")) == sorted(SCALE + BENCH + FAILOVER)
    assert len(SCALE) >= 9


# ---------------------------------------------------------------- simulated recordings

def settings_of_recording(rec: dict) -> dict:
    """The recorded settings, with the fields older recordings predate at their default."""
    s = dict(rec["settings"])
    assert set(s) <= set(DEFAULT_SETTINGS), f"unknown settings {set(s) - set(DEFAULT_SETTINGS)}"
    s.setdefault("truetime_epsilon_us", None)
    assert set(s) == set(DEFAULT_SETTINGS), f"settings lack {set(DEFAULT_SETTINGS) - set(s)}"
    return s


def calibration_file(rec: dict, path: Path) -> Path:
    """The calibration file the recording's ``source`` names (itself, if measured)."""
    source = rec["calibration"]["source"].split("; ")[0]
    if source == "measured on this machine":
        return path
    assert source.startswith("file "), f"calibration source {source!r}"
    return DATA / source[len("file "):]


def command_of(rec: dict, path: Path, machines: int) -> list:
    """The ``percolator scale`` arguments that produce ``rec``'s point for ``machines``
    under its first seed, from the recording's stored parameters only."""
    s = settings_of_recording(rec)
    assert s["aggregate_period_s"] == DEFAULT_SETTINGS["aggregate_period_s"]  # no option sets it
    argv = ["scale", "--json", "--no-progress", "--machines", str(machines),
            "--seed", str(s["seed"]), "--calibration", str(calibration_file(rec, path)),
            "--oracle-slowdown", repr(float(rec.get("oracle_slowdown", 1.0))),
            "--warmup", repr(s["warmup_s"]), "--measure", repr(s["measure_s"])]
    for name in INT_SETTINGS:
        argv += [f"--{name.replace('_', '-')}", str(s[name])]
    argv += [] if s["broker_fix"] else ["--no-broker-fix"]
    argv += [] if s["oracle_batching"] else ["--no-oracle-batching"]
    if s["truetime_epsilon_us"] is not None:
        argv += ["--truetime", str(s["truetime_epsilon_us"])]
    return argv


def parsed(argv: list):
    """``argv`` parsed by the kit's own parser (the one ``main`` uses)."""
    import argparse
    from percolator_ref.commands.scale import register
    parser = argparse.ArgumentParser(prog="percolator")
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def run_command(argv: list) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    result = json.loads(out.getvalue())
    assert code == (0 if result["invariants_ok"] else 1)
    return result


def cheapest_point(rec: dict) -> dict:
    """The recorded point of the smallest size under the first seed."""
    smallest = min(p["machines"] for p in rec["points"])
    if "per_seed" in rec:
        return rec["per_seed"][str(smallest)][0]
    return next(p for p in rec["points"] if p["machines"] == smallest)


def check_calibration(rec: dict, path: Path) -> None:
    """The recording's service times are its calibration file's, times ``oracle_slowdown``."""
    cal = slower_oracle(load(str(calibration_file(rec, path))), rec.get("oracle_slowdown", 1.0))
    expected = cal.to_dict()
    if calibration_file(rec, path) == path:          # the measured one: its own source
        expected["source"] = rec["calibration"]["source"]
    assert rec["calibration"] == expected, f"{path.name}: calibration differs from its file"


def differences(recorded: dict, recomputed: dict) -> dict:
    keys = set(recorded) | set(recomputed)
    return {k: (recorded.get(k), recomputed.get(k)) for k in sorted(keys)
            if recorded.get(k) != recomputed.get(k)}


def check_recomputed(path: Path) -> None:
    """Re-run ``path``'s cheapest point by its command; it must equal the recorded one."""
    rec = read(path)
    point = cheapest_point(rec)
    argv = command_of(rec, path, point["machines"])
    assert asdict(settings_of(parsed(argv))) == settings_of_recording(rec), argv
    check_calibration(rec, path)
    result = run_command(argv)
    assert result["calibration"]["source"] == rec["calibration"]["source"] or (
        calibration_file(rec, path) == path), result["calibration"]
    diff = differences(point, result["points"][0])
    assert not diff, f"{path.name} at {point['machines']} machines, recorded vs recomputed: {diff}"


def check_consistent(path: Path) -> None:
    """The figures not re-run agree with each other (pooling, efficiency, invariants)."""
    rec = read(path)
    sizes = [p["machines"] for p in rec["points"]]
    assert sizes == sorted(set(sizes)) and len(rec["wall_seconds"]) == len(sizes), path.name
    assert rec["invariants_ok"] == all(p["invariants_ok"] for p in rec["points"]), path.name
    runs = ([[rec["per_seed"][str(n)][s] for n in sizes] for s in range(rec["seeds"])]
            if "per_seed" in rec else [rec["points"]])
    for seed_points in runs:
        again = [{k: v for k, v in p.items() if k != "efficiency"} for p in seed_points]
        efficiencies(again)
        assert [p["efficiency"] for p in again] == [p["efficiency"] for p in seed_points], path.name
        assert all(p["invariants_ok"] == (not p["violations"]) for p in seed_points), path.name
    if "per_seed" in rec:
        assert sorted(rec["per_seed"]) == sorted(map(str, sizes)), path.name
        for p in rec["points"]:
            per_seed = rec["per_seed"][str(p["machines"])]
            assert len(per_seed) == rec["seeds"] == p["seeds"], path.name
            diff = differences(p, pooled(p["machines"], per_seed))
            assert not diff, f"{path.name}: mean of the seeds at {p['machines']}: {diff}"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.long) if n in LONG else
                                  pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in SCALE])
def test_scale_recording_is_what_its_command_produces(name):
    """(The two costliest, a minute or two each, run in ``make test-long``; every recording's
    own consistency is checked in ``make test``, by the test below.)"""
    check_recomputed(DATA / name)


@pytest.mark.parametrize("name", SCALE)
def test_scale_recording_is_consistent(name):
    check_consistent(DATA / name)


# ---------------------------------------------------------------- measured recordings

def near(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol + 1e-9


def check_bench(path: Path) -> None:
    """``percolator bench --clients`` output: every derived figure from its raw fields."""
    r = read(path)
    name, costs = path.name, r["costs_per_op"]
    assert r["concurrent_operations"] == r["clients"] * r["threads_per_client"], name
    assert r["paper"] == PAPER_FIGURE_8, name
    assert r["server_calls_per_op"] == {op: c["server_calls"] for op, c in costs.items()}, name
    assert r["cpu_relative"] == bench_clients.cpu_relative(costs), name
    if "oracle_timestamp" in costs:                  # the oracle's phase: its share taken out
        assert r["store_cpu"] == bench_clients.store_cpu(costs), name
    rates = {op: r[key] for op, key in bench_clients.RATE_KEYS.items() if op in costs}
    assert set(rates) == set(costs) == set(r["cpu_share"]), name
    for ratio, op, raw in (("read_relative", "percolator_get", "bigtable_read"),
                           ("write_relative", "percolator_write", "bigtable_write"),
                           ("write_relative_without_conditional_mutations",
                            "percolator_write_separate", "bigtable_write")):
        # the rates are printed to 0.1 op/s and the ratio to 0.001
        assert near(r[ratio], rates[op] / rates[raw], 0.0005 + 1e-4), (name, ratio)
    for op, c in costs.items():
        check_costs(name, op, c, rates[op], r["cpu_share"][op], r["rounds"])


def check_costs(name: str, op: str, c: dict, rate: float, share: dict, rounds: int) -> None:
    """One operation's per-op costs against its call counts and CPU share."""
    calls = c["server_calls"] - c["round_trips"] - c["oracle_requests"]
    assert near(c["token_and_other_calls"], calls, 0.0015), (name, op)
    if rounds % 2:         # an odd number of rounds: the median phase has the median rate
        # the clients' CPU seconds per second = CPU per op x ops per second (printed rounded)
        for side, key in (("clients", "client_cpu_us"), ("server", "server_cpu_us")):
            busy = c[key] * 1e-6 * rate
            assert near(share[side], busy, 0.005 + 0.05e-6 * rate + 1e-3), (name, op, side)


def check_failover(path: Path) -> None:
    """The failover run: its outcome and its timeline's figures from its raw fields."""
    r = read(path)
    check_failover_run(path.name, r, r["settings"]["before_s"] + r["settings"]["after_s"])
    check_failover_run(path.name + " other_wait", r["other_wait"],
                       r["settings"]["before_s"] + r["settings"]["after_s"])
    assert r["settings"]["wait"] == 1 and r["lost_commits"] == 0 and r["invariants_ok"], path.name
    cost = r["wait_cost"]
    for kind, ratio in (("raw_writes_per_s", "raw_ratio"),
                        ("write_transactions_per_s", "transaction_ratio")):
        assert near(cost[ratio], cost[kind]["wait=1"] / cost[kind]["wait=0"], 0.0005 + 1e-4)


def check_failover_run(name: str, r: dict, seconds: float) -> None:
    series = r["series"]
    assert [row["t"] for row in series] == list(range(int(seconds))), name
    assert sum(row["commits"] for row in series) <= r["acknowledged_commits"], name
    assert all(row["tpsE"] <= row["commits"] for row in series), name
    failures = r["unavailable"] + r["unknown"] + r["error_count"]
    assert sum(row["failed_attempts"] for row in series) <= failures, name
    assert sum(r["failure_reasons"].values()) <= failures, name
    assert r["error_count"] == len(r["client_errors"]) or len(r["client_errors"]) == 10, name
    assert r["invariants_ok"] == (r["violation_count"] == 0), name
    assert len(r["violations"]) == min(r["violation_count"], 20), name
    assert len(r["lost_examples"]) == min(r["lost_commits"], 5), name
    assert r["checked_commits"] <= r["acknowledged_commits"], name
    assert r["reused_timestamps"] == 0 or r["reused_timestamp_examples"], name
    assert r["killed_at_s"] <= r["failover_done_at_s"], name
    back = r["killed_at_s"] + (r["recovery_s"] if r["recovery_s"] is not None
                               else seconds - r["killed_at_s"])
    during = [row["tpsE"] for row in series[int(r["killed_at_s"]):int(back)]]
    assert r["tpsE_min_during"] == (min(during) if during else None), name


@pytest.mark.parametrize("name", BENCH)
def test_bench_recording_is_consistent(name):
    check_bench(DATA / name)


@pytest.mark.parametrize("name", FAILOVER)
def test_failover_recording_is_consistent(name):
    check_failover(DATA / name)


# ---------------------------------------------------------------- the checks can fail

CHEAP = "scale_window_0.005.json"       # its cheapest point re-runs in well under a second


def tampered(tmp_path: Path, name: str, change) -> Path:
    """A copy of recording ``name`` with ``change(data)`` applied."""
    data = read(DATA / name)
    before = copy.deepcopy(data)
    change(data)
    assert data != before
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def bump_transactions(d):
    d["per_seed"]["10"][0]["transactions"] += 1


def bump_tpse(d):
    d["per_seed"]["10"][0]["tpsE"] += 0.1


def longer_window(d):
    d["settings"]["measure_s"] = 0.006


@pytest.mark.parametrize("change", [bump_transactions, bump_tpse, longer_window])
def test_tampered_point_is_caught(tmp_path, change):
    check_recomputed(DATA / CHEAP)                       # the untouched recording passes
    with pytest.raises(AssertionError):
        check_recomputed(tampered(tmp_path, CHEAP, change))


def test_tampered_calibration_is_caught(tmp_path):
    def faster_tablet_server(d):
        d["calibration"]["row_transaction_s"] *= 0.99
    with pytest.raises(AssertionError, match="calibration"):
        check_recomputed(tampered(tmp_path, CHEAP, faster_tablet_server))


def test_tampered_larger_size_is_caught(tmp_path):
    """A size not re-run: a seed's point no longer pools to the recorded mean."""
    def change(d):
        d["per_seed"]["10"][3]["abort_rate"] += 0.01
    name = "scale_long_batched.json"
    check_consistent(DATA / name)
    with pytest.raises(AssertionError, match="mean of the seeds"):
        check_consistent(tampered(tmp_path, name, change))


@pytest.mark.parametrize("change", [
    lambda d: d.update(read_relative=round(d["read_relative"] + 0.01, 3)),
    lambda d: d["costs_per_op"]["percolator_write"].update(client_cpu_us=600.0),
    lambda d: d["store_cpu"]["relative"].update(write_relative=0.4),
    lambda d: d.update(percolator_writes_per_s=d["percolator_writes_per_s"] + 100)])
def test_tampered_bench_is_caught(tmp_path, change):
    name = "figure8_store_cpu.json"
    check_bench(DATA / name)
    with pytest.raises(AssertionError):
        check_bench(tampered(tmp_path, name, change))


@pytest.mark.parametrize("change", [
    lambda d: d.update(tpsE_min_during=1),
    lambda d: d["series"][5].update(failed_attempts=500),
    lambda d: d["other_wait"].update(lost_commits=0)])
def test_tampered_failover_is_caught(tmp_path, change):
    name = "failover_run.json"
    check_failover(DATA / name)
    with pytest.raises(AssertionError):
        check_failover(tampered(tmp_path, name, change))
