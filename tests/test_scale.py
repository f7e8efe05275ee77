"""``percolator scale``: TPC-E scaling by deterministic simulation of the real protocol code.

The runs use a fixed calibration (service times written here, not measured),
so that the simulated figures depend only on the seed: the same seed gives
the same points, in this process and in another one with a different hash
seed, with either carrier. The calibration's oracle takes 10 us per request,
about twenty times what the kit's in-memory oracle measures, so that the
oracle's bend without batching shows already at the quick sweep's 32
machines (with the measured oracle it shows between 100 and 1,000).
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from percolator_ref.commands import main
from percolator_ref.sim import calibration
from percolator_ref.sim.engine import Resource, Simulator

CALIBRATION = {"row_transaction_s": 1.8e-05, "worker_cpu_s": 6.3e-06,
               "oracle_request_s": 1e-05, "oracle_timestamp_s": 1.2e-08,
               "lock_service_s": 1.2e-07, "rpc_round_trip_s": 1.2e-05}
HAVE_GREENLET = importlib.util.find_spec("greenlet") is not None
CARRIERS = ["threads", pytest.param("greenlets", marks=pytest.mark.skipif(
    not HAVE_GREENLET, reason="the greenlet package is not installed"))]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "calibration.json"
    path.write_text(json.dumps(CALIBRATION))
    return str(path)


def scale(capsys, calibration_file, *args) -> dict:
    code = main(["scale", "--quick", "--json", "--no-progress", "--calibration",
                 calibration_file, *args])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["invariants_ok"] else 1)
    return out


@pytest.fixture(scope="module")
def runs(calibration_file):
    """The quick sweep with the broker fix and batching, without the fix, without batching."""
    out = {}
    for name, extra in (("fixed", []), ("no_fix", ["--no-broker-fix"]),
                        ("no_batching", ["--no-oracle-batching"])):
        proc = subprocess.run([sys.executable, "-m", "percolator_ref", "scale", "--quick",
                               "--json", "--no-progress", "--calibration", calibration_file,
                               *extra], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": ROOT,
                                   "PYTHONHASHSEED": str(len(out) + 1)})
        assert proc.returncode == 0, proc.stderr
        out[name] = json.loads(proc.stdout)
    return out


@pytest.mark.slow
def test_json_has_points_and_calibration(runs):
    out = runs["fixed"]
    assert [p["machines"] for p in out["points"]] == [1, 4, 16, 32]
    for p in out["points"]:
        for key in ("machines", "tpsE", "efficiency", "abort_rate", "oracle_utilization"):
            assert key in p, key
        assert 0 <= p["abort_rate"] <= 1 and 0 <= p["oracle_utilization"] <= 1
        assert p["tpsE"] > 0
    assert out["points"][0]["efficiency"] == 1.0
    for key in CALIBRATION:
        assert out["calibration"][key] == CALIBRATION[key]
    assert out["calibration"]["source"] == "file calibration.json"


@pytest.mark.slow
def test_invariants_hold_after_every_simulated_run(runs):
    for name, out in runs.items():
        assert out["invariants_ok"] is True, name
        for p in out["points"]:
            assert p["invariants_ok"] and p["violations"] == [], (name, p["violations"])
            assert p["transactions"] > 0


@pytest.mark.slow
def test_same_seed_gives_the_same_points(runs, capsys, calibration_file):
    """The fixture ran in other processes (other hash seeds); here again, in this one."""
    again = scale(capsys, calibration_file, "--machines", "1,4")
    assert again["points"] == runs["fixed"]["points"][:2]


def test_threads_and_greenlets_give_the_same_points(capsys, calibration_file):
    pytest.importorskip("greenlet")
    by_carrier = [scale(capsys, calibration_file, "--machines", "2", "--carrier", carrier)
                  for carrier in ("threads", "greenlets")]
    assert by_carrier[0]["points"] == by_carrier[1]["points"]


def test_another_seed_gives_other_points(capsys, calibration_file):
    a = scale(capsys, calibration_file, "--machines", "2")
    b = scale(capsys, calibration_file, "--machines", "2", "--seed", "1")
    assert a["points"] != b["points"]


@pytest.mark.slow
def test_the_bend_without_the_broker_fix_and_without_batching(runs):
    """At the largest size, the fix and batching scale better than either one missing:
    without the fix the broker rows make Trade-Results abort; without batching the
    oracle serves one timestamp per request and is saturated."""
    largest = {name: out["points"][-1] for name, out in runs.items()}
    fixed = largest["fixed"]
    assert largest["no_fix"]["efficiency"] < fixed["efficiency"] - 0.3
    assert largest["no_fix"]["trade_result_abort_rate"] > 3 * fixed["trade_result_abort_rate"]
    assert largest["no_batching"]["efficiency"] < fixed["efficiency"] - 0.3
    assert largest["no_batching"]["oracle_utilization"] > 0.95
    assert largest["no_batching"]["oracle_mean_batch"] == 1.0
    assert fixed["oracle_mean_batch"] > 1.0


@pytest.mark.parametrize("args,named", [
    (["--machines", "0"], "--machines"),
    (["--machines", "1,x"], "--machines"),
    (["--clients-per-machine", "0"], "--clients-per-machine"),
    (["--customers-per-machine", "0"], "--customers-per-machine"),
    (["--brokers", "0"], "--brokers"),
    (["--securities-per-machine", "0"], "--securities-per-machine"),
    (["--tablet-server-cores", "0"], "--tablet-server-cores"),
    (["--measure", "0"], "--measure"),
    (["--warmup", "-1"], "--warmup"),
    (["--seed", "-1"], "--seed"),
    (["--seeds", "0"], "--seeds"),
    (["--oracle-slowdown", "0.5"], "--oracle-slowdown"),
    (["--reference-machines", "0"], "--reference-machines"),
    (["--calibration", "/nonexistent/calibration.json"], "--calibration"),
])
def test_bad_arguments_are_refused_naming_them(capsys, args, named):
    assert main(["scale", "--quick", "--json", "--no-progress", *args]) == 2
    captured = capsys.readouterr()
    assert named in captured.err and captured.out == ""


@pytest.mark.parametrize("content,named", [
    ("not json", "not JSON"),
    (json.dumps({"row_transaction_s": 1e-5}), "lacks"),
    (json.dumps({**CALIBRATION, "oracle_request_s": -1}), "oracle_request_s"),
    (json.dumps({**CALIBRATION, "rpc_round_trip_s": "fast"}), "rpc_round_trip_s"),
])
def test_bad_calibration_files_are_refused_naming_the_field(capsys, tmp_path, content, named):
    path = tmp_path / "cal.json"
    path.write_text(content)
    assert main(["scale", "--quick", "--no-progress", "--calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--calibration" in err and named in err


def test_a_scale_output_serves_as_calibration(tmp_path):
    path = tmp_path / "previous.json"
    path.write_text(json.dumps({"points": [], "calibration": {**CALIBRATION, "source": "x"}}))
    loaded = calibration.load(str(path)).to_dict()
    assert {k: loaded[k] for k in CALIBRATION} == CALIBRATION
    assert loaded["source"] == "file previous.json"


def test_measured_calibration_is_positive_and_round_trips(tmp_path):
    cal = calibration.measure(repeats=1)
    data = cal.to_dict()
    assert all(data[k] > 0 for k in CALIBRATION)
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(data))
    assert calibration.load(str(path)).to_dict() == {**data, "source": "file measured.json"}


# -- the engine ------------------------------------------------------------------


@pytest.mark.parametrize("carrier", CARRIERS)
def test_processes_take_turns_on_simulated_time_in_a_fixed_order(carrier):
    sim = Simulator(carrier=carrier)
    server = Resource(sim, "server", capacity=1)
    log = []

    def client(process):
        for i in range(3):
            server.use(0.5, sim.resume, process)    # queue at the server, 0.5 s each
            sim.block(process)
            log.append((process.name, i, sim.now))
            sim.clock.sleep(0.25)                    # a backoff on simulated time

    for name in ("a", "b"):
        sim.spawn(name, client)
    sim.run()
    assert log == [("a", 0, 0.5), ("b", 0, 1.0), ("a", 1, 1.5), ("b", 1, 2.0),
                   ("a", 2, 2.5), ("b", 2, 3.0)]


@pytest.mark.parametrize("carrier", CARRIERS)
def test_resource_busy_time_is_counted_inside_the_window_only(carrier):
    sim = Simulator(carrier=carrier)
    server = Resource(sim, "server", capacity=2)
    server.window = (1.0, 3.0)

    def client(process):
        server.use(2.0, sim.resume, process)         # busy 0..2: 1 s inside the window
        sim.block(process)

    sim.spawn("a", client)
    sim.run()
    assert server.utilization() == pytest.approx(1.0 / (2 * 2.0))


@pytest.mark.parametrize("carrier", CARRIERS)
def test_an_error_in_a_process_is_raised_by_run(carrier):
    sim = Simulator(carrier=carrier)

    def waiter(process):
        sim.clock.sleep(10)

    def failing(process):
        sim.clock.sleep(1)
        raise KeyError("boom")

    sim.spawn("waiter", waiter)
    sim.spawn("failing", failing)
    with pytest.raises(KeyError, match="boom"):
        sim.run()


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_process_waiting_for_nothing_is_reported(carrier):
    sim = Simulator(carrier=carrier)
    sim.spawn("forgotten", lambda process: sim.block(process))   # nothing will resume it
    with pytest.raises(RuntimeError, match="stalled"):
        sim.run()



def test_seeds_give_a_mean_and_an_interval_that_holds_each_seed_s_spread(capsys, calibration_file):
    result = scale(capsys, calibration_file, "--machines", "1,2", "--seeds", "3",
                   "--reference-machines", "1")
    assert result["seeds"] == 3 and set(result["per_seed"]) == {"1", "2"}
    for point in result["points"]:
        per_seed = [p["tpsE"] for p in result["per_seed"][str(point["machines"])]]
        assert len(per_seed) == 3 and point["tpsE"] == round(sum(per_seed) / 3, 4)
        low, high = point["tpsE_ci95"]
        assert low <= point["tpsE"] <= high
        assert (high > low) == (len(set(per_seed)) > 1)        # no spread, no width


def test_interval95_and_a_slower_oracle():
    from percolator_ref.sim.seeds import interval95, slower_oracle
    assert interval95([1.0, 1.0, 1.0]) == [1.0, 1.0]
    low, high = interval95([1.0, 2.0, 3.0])                    # mean 2, sd 1, t(2) = 4.303
    assert (low, high) == (round(2 - 4.303 / 3 ** 0.5, 4), round(2 + 4.303 / 3 ** 0.5, 4))
    with pytest.raises(ValueError, match="two or more"):
        interval95([1.0])
    cal = calibration.Calibration(row_transaction_s=1e-5, worker_cpu_s=1e-5, oracle_request_s=1e-6,
                      oracle_timestamp_s=1e-8, lock_service_s=1e-7, rpc_round_trip_s=1e-5,
                      source="test")
    slow = slower_oracle(cal, 100)
    assert slow.oracle_request_s == pytest.approx(1e-4) and slow.oracle_timestamp_s == pytest.approx(1e-6)
    assert slow.row_transaction_s == cal.row_transaction_s
    assert slow.source == "test; oracle 100x slower"
    assert slower_oracle(cal, 1) is cal                        # 1x: the measured oracle, as named
    with pytest.raises(ValueError, match="factor"):
        slower_oracle(cal, 0.5)


def test_single_seed_runs_merge_into_the_several_seeds_result(capsys, calibration_file, tmp_path):
    args = ("--machines", "1,2", "--reference-machines", "1")
    together = scale(capsys, calibration_file, *args, "--seeds", "3")
    files = []
    for seed in (2, 0, 1):                                   # any order
        files.append(tmp_path / f"seed{seed}.json")
        files[-1].write_text(json.dumps(scale(capsys, calibration_file, *args, "--seed", str(seed))))
    assert main(["scale", "--json", "--merge", *map(str, files)]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged.pop("wall_seconds") and together.pop("wall_seconds")   # timings differ
    assert merged == together


def test_merge_refuses_runs_of_different_sweeps(capsys, calibration_file, tmp_path):
    runs = {name: scale(capsys, calibration_file, "--machines", "1,2", "--reference-machines", "1",
                        *extra) for name, extra in (("s0", ["--seed", "0"]), ("s2", ["--seed", "2"]),
                                                    ("hot", ["--seed", "1", "--no-broker-fix"]))}
    for name, run in runs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(run))
    for pair, named in ((("s0", "s2"), "seed 2 is where seed 1"), (("s0", "hot"), "other settings: broker_fix"),
                        (("s0",), "two or more")):
        assert main(["scale", "--json", "--merge", *(str(tmp_path / f"{n}.json") for n in pair)]) == 2
        assert named in capsys.readouterr().err
    assert main(["scale", "--merge", str(tmp_path / "none.json"), str(tmp_path / "s0.json")]) == 2
    err = capsys.readouterr().err
    assert "--merge" in err and "none.json" in err
