"""Exercises 9 and 10 (TiKV's rollback records and async commit) on the trusted world.

The catalogue, the solutions, nbval and the secret sweep cover them as every
exercise (they are in grading.MODULES); these pin what the two exercises add:
TiKV's lock fields cross the channel (and a forged field is refused), and the
worlds run the variants their checks are about.
"""
import json
import time

import pytest

from percolator_ref import grading
from percolator_ref.grading.channel import ProtocolError, decode, encode
from percolator_ref.grading.judge.interactive import Trial, local_hub
from percolator_ref.cleanup import Cleanup
from percolator_ref.model import Cell, Lock, WriteKind
from percolator_ref.variants.locks import TiKVLock

BOB, JOE = Cell("default", "Bob", "bal"), Cell("default", "Joe", "bal")


def test_tikv_locks_cross_the_channel_with_their_fields():
    lock = TiKVLock(8, BOB, True, "T8", WriteKind.PUT, min_commit_ts=9, secondaries=(JOE,))
    back = decode(json.loads(json.dumps(encode(lock))))
    assert back == lock and type(back) is TiKVLock and back.secondaries == (JOE,)
    plain = Lock(8, BOB, True, "T8", WriteKind.PUT)
    assert type(decode(encode(plain))) is Lock and "extras" not in encode(plain)


@pytest.mark.parametrize("extras", [
    {"$": "D", "v": [["owner", "me"]]},                          # not a lock field
    {"$": "D", "v": [["min_commit_ts", "9"]]},                   # not a number
    {"$": "D", "v": [["min_commit_ts", True]]},
    {"$": "D", "v": [["ttl", {"$": "F", "v": "inf"}]]},
    {"$": "D", "v": [["secondaries", [["default", "Joe"]]]]},    # not a cell
    [1, 2],
])
def test_forged_lock_fields_are_refused(extras):
    data = dict(encode(Lock(8, BOB, True, "T8", WriteKind.PUT)), extras=extras)
    with pytest.raises(ProtocolError):
        decode(data)


@pytest.mark.parametrize("n,variant", [(9, "rollback-records"), (10, "async-commit")])
def test_the_world_runs_the_variant_its_checks_are_about(n, variant):
    module = grading.exercise(n)
    world_class = module.RecordsWorld if n == 9 else module.AsyncWorld
    trial = Trial(local_hub(module.exercise, Cleanup), time.monotonic() + 60, {"t0": 5})
    world = world_class(trial)
    try:
        assert [v.name for v in world.cluster.variants] == [variant]
        assert world.oracle is world.cluster.oracle
    finally:
        trial.close()


def test_the_async_world_raises_max_ts_before_it_serves_a_read():
    module = grading.exercise(10)
    trial = Trial(local_hub(module.exercise, Cleanup), time.monotonic() + 60, {"t0": 5})
    world = module.AsyncWorld(trial)
    try:
        world.reach(40)
        reader = world.client("reader", [["Bob", "bal"]])
        assert reader.timestamps == [40] and world.max_ts.value == 40
        assert reader.answer == {"value": [None]}
    finally:
        trial.close()


# -- a grade never depends on thread timing ----------------------------------------------------

def _grader_writer(answers, timestamps=(), crashed=False):
    from percolator_ref.grading.judge.participants import Client
    return Client(1, "W", "trusted", crashable=True, timestamps=list(timestamps),
                  answers=list(answers), crashed=crashed)


@pytest.mark.parametrize("answers,timestamps", [
    ([{"raised": "KeyError: 'x'"}], ()),           # raised before its start timestamp
    ([], ()),                                        # never answered
    ([{"raised": "ValueError: boom"}], (12,)),      # raised after it
    ([{"value": True}], (12,)),                      # says committed; nothing in the store
])
def test_a_grader_writer_that_did_not_crash_and_did_not_answer_truly_fails(answers, timestamps):
    from percolator_ref.grading.framework import Fail
    module = grading.exercise(9)
    trial = Trial(local_hub(module.exercise, Cleanup), time.monotonic() + 60, {"t0": 5})
    world = module.RecordsWorld(trial)
    try:
        with pytest.raises(Fail, match="^W "):
            module.writer_answered(world, _grader_writer(answers, timestamps))
        module.writer_answered(world, _grader_writer(answers, timestamps, crashed=True))
        module.writer_answered(world, _grader_writer([{"value": False}], (12,)))
    finally:
        trial.close()
