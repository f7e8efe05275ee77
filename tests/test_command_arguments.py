"""Every command-line argument is checked where it enters (issue 21, finding 5).

Each bad invocation exits with status 2 within seconds, with ONE line on
stderr that names the argument: never a traceback, a silent default, a run
that cannot end, or exit 0 after running nonsense.
"""
import subprocess
import sys

import pytest

from percolator_ref.commands import main

BAD = [
    # soak
    ("soak --seconds nan", "--seconds"), ("soak --seconds 0", "--seconds"),
    ("soak --seconds -1", "--seconds"), ("soak --seconds inf", "--seconds"),
    ("soak --seconds 1e8", "--seconds"), ("soak --threads 0", "--threads"),
    ("soak --threads -1", "--threads"), ("soak --threads 1e8", "--threads"),
    ("soak --threads 100000000", "--threads"), ("soak --threads x", "--threads"),
    ("soak --backend foo", "--backend"), ("soak --backend redis://127.0.0.1:1/0", "--backend"),
    ("soak --backend redis+cluster://127.0.0.1:1", "--backend"),
    ("soak --kill-every nan", "--kill-every"), ("soak --kill-every 0", "--kill-every"),
    ("soak --kill-every inf", "--kill-every"), ("soak --seed -1", "--seed"),
    ("soak --nemesis", "--nemesis"), ("soak --wait 2", "--wait"),
    ("soak --nemesis-interval inf", "--nemesis-interval"),
    # tpce
    ("tpce --seconds nan", "--seconds"), ("tpce --seconds inf", "--seconds"),
    ("tpce --seconds 0", "--seconds"), ("tpce --latency inf", "--latency"),
    ("tpce --latency nan", "--latency"), ("tpce --latency -1", "--latency"),
    ("tpce --threads 0", "--threads"), ("tpce --threads 1e8", "--threads"),
    ("tpce --customers 1e11", "--customers"), ("tpce --customers 100000000000", "--customers"),
    ("tpce --customers 0", "--customers"), ("tpce --brokers 0", "--brokers"),
    ("tpce --securities 0", "--securities"), ("tpce --processes 0", "--processes"),
    ("tpce --processes 2", "--processes"), ("tpce --backend nope", "--backend"),
    ("tpce --backend redis://127.0.0.1:1/0", "--backend"),
    # bench
    ("bench --latency nan", "--latency"), ("bench --latency inf", "--latency"),
    ("bench --model-latency inf", "--model-latency"), ("bench --ops 0", "--ops"),
    ("bench --ops 1e12", "--ops"), ("bench --ops 1000000000000", "--ops"),
    ("bench --rounds 0", "--rounds"), ("bench --clients 0", "--clients"),
    ("bench --clients 2 --seconds inf", "--seconds"), ("bench --clients 2", "--clients"),
    ("bench --clients 2 --threads 0", "--threads"), ("bench --backend bogus", "--backend"),
    ("bench --store-cpu", "--store-cpu"),       # in memory: no server whose CPU to measure
    # scale
    ("scale --measure inf", "--measure"), ("scale --measure nan", "--measure"),
    ("scale --measure 0", "--measure"), ("scale --warmup inf", "--warmup"),
    ("scale --machines 1e8", "--machines"), ("scale --machines 100000000", "--machines"),
    ("scale --machines 0", "--machines"), ("scale --machines 1,x", "--machines"),
    ("scale --clients-per-machine 0", "--clients-per-machine"),
    ("scale --worker-cores 1000", "--worker-cores"), ("scale --seed -1", "--seed"),
    # failover
    ("failover --before inf", "--before"), ("failover --before nan", "--before"),
    ("failover --before 0", "--before"), ("failover --after inf", "--after"),
    ("failover --replica-lag inf", "--replica-lag"), ("failover --replica-lag -1", "--replica-lag"),
    ("failover --replica-lag 5", "--replica-lag"), ("failover --processes 0", "--processes"),
    ("failover --processes 1e8", "--processes"), ("failover --customers 1e11", "--customers"),
    ("failover --wait 2", "--wait"),
    # demo, grade
    ("demo crash --after 9", "--after"), ("demo crash --after -1", "--after"),
    ("grade x.ipynb --jobs 0", "--jobs"), ("grade x.ipynb --timeout 60", "--timeout"),
    ("grade x.ipynb --memory 1e12", "--memory"),
    ("grade x.ipynb --scenario-timeout inf", "--scenario-timeout"),
    # grade-bench
    ("grade-bench --jobs 0", "--jobs"), ("grade-bench --per-exercise 0", "--per-exercise"),
    ("grade-bench --per-exercise 1e9", "--per-exercise"),
    ("grade-bench --catalogue /nonexistent", "--catalogue"),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("command,argument", BAD, ids=[c for c, _ in BAD])
def test_a_bad_invocation_exits_2_with_one_line_naming_the_argument(capsys, command, argument):
    try:
        status = main(command.split())
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 2, f"{command}: exit {status}\n{err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert argument in lines[0], f"{command}: {lines[0]}"


def test_there_are_at_least_46_bad_invocations():
    assert len(BAD) >= 46


@pytest.mark.parametrize("command", ["soak --seconds inf", "tpce --latency inf",
                                     "scale --machines 100000000"])
def test_as_a_process_one_line_and_status_2(command):
    done = subprocess.run([sys.executable, "-m", "percolator_ref", *command.split()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("command,bound", [("soak", "86400"), ("tpce", "100,000"),
                                           ("bench", "1,000,000"), ("scale", "2,000"),
                                           ("failover", "3600")])
def test_help_states_the_upper_bounds(capsys, command, bound):
    assert main([command, "--help"]) == 0
    assert bound in capsys.readouterr().out


def test_grade_has_no_notebook_timeout_and_says_the_limits_are_per_check(capsys):
    """Every exercise's time limits are per check, and a notebook's is derived from them
    (``Exercise.time_limit`` plus ``SETUP_SECONDS``): ``grade --timeout`` had no effect, so it
    is gone (given, it is refused by name: :data:`BAD`). The help and exercises/README.md say
    what limits a notebook instead, with the derived figures."""
    from pathlib import Path

    from percolator_ref import grading
    from percolator_ref.grading.sandbox.launcher import SETUP_SECONDS
    assert main(["grade", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--timeout" not in out and "--scenario-timeout" not in out
    assert "Each check has its own time limit" in out and "their sum" in out
    readme = Path(__file__).resolve().parents[1] / "exercises" / "README.md"
    text = " ".join(readme.read_text().split())
    assert "`--timeout` (" not in text
    for n in (1, 8):
        limit = SETUP_SECONDS + grading.exercise(n).exercise.time_limit
        assert f"{limit:g} s for exercise {n}" in text
