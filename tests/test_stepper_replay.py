"""The stepper's browser mode (``Stepper.replay_each_move``, on under Pyodide), run in CPython.

In a browser a parked script is a suspended stack, and a garbage collection on a deep stack
while one is suspended kills Pyodide (issue 28: notebook 05's Run All died so; the browser
test is tests/test_lite.py). In that mode no script stays parked between calls and the next
move replays the choices. Here: the same calls give the same frames, choices and branches
as the ordinary mode, no script's stack is left suspended after any call, and unwinding
the parked scripts writes nothing (the store is the shown frame's after every move).
"""
from __future__ import annotations

import pytest

from percolator_ref.viz import (Stepper, figure4_stepper, observer_race_stepper,
                                slow_holder_stepper, two_transfers_stepper)

SCENARIOS = [figure4_stepper, two_transfers_stepper, observer_race_stepper, slow_holder_stepper]


def drive(stepper: Stepper, after_each=lambda s: None) -> Stepper:
    """Steps, Back twice, a branch (the other transaction where there is one), a crash,
    run to the end, reset and one more step: each public call followed by ``after_each``."""
    calls = [lambda s: s.step(), lambda s: s.step(), lambda s: s.step(),
             lambda s: s.back(), lambda s: s.back(),
             lambda s: s.step(s.runnable[-1]) if s.runnable else None,
             lambda s: s.crash() if s.runnable else None,
             lambda s: s.step() if s.runnable else None,
             lambda s: s.run(), lambda s: s.goto(1),
             lambda s: s.reset(), lambda s: s.step()]
    after_each(stepper)
    for call in calls:
        call(stepper)
        after_each(stepper)
    return stepper


def record(stepper: Stepper) -> tuple:
    frames = [(f.index, f.actor, f.note, f.status, f.runnable, f.action, f.clock, f.dump)
              for f in stepper.frames]
    abandoned = [(at, [(f.actor, f.note, f.dump) for f in old]) for at, old in stepper.abandoned]
    return frames, stepper.cursor, list(stepper.decisions), abandoned


def nothing_parked_and_store_as_shown(stepper: Stepper) -> None:
    suspended = [r.name for r in stepper.runners if r.stack is not None and r.stack
                 and not r.stack.dead]
    assert suspended == [], f"stacks left suspended after a call: {suspended}"
    if stepper.cursor == len(stepper.frames) - 1:       # the live frame: the store is it
        assert stepper.cluster.bigtable.dump() == stepper.frame.dump


@pytest.mark.parametrize("make", SCENARIOS, ids=lambda m: m.__name__)
def test_replaying_each_move_gives_the_same_frames_as_parked_scripts(make, monkeypatch):
    monkeypatch.setattr(Stepper, "replay_each_move", False)
    parked = record(drive(make()))
    monkeypatch.setattr(Stepper, "replay_each_move", True)
    replayed = drive(make(), nothing_parked_and_store_as_shown)
    assert record(replayed) == parked
    assert len(parked[0]) >= 2 and parked[2]          # something moved


def test_without_replay_the_scripts_stay_parked_between_calls(monkeypatch):
    """The check above can fail: the ordinary mode leaves a parked script's stack alive."""
    monkeypatch.setattr(Stepper, "replay_each_move", False)
    s = figure4_stepper()
    s.step()
    with pytest.raises(AssertionError, match="left suspended"):
        nothing_parked_and_store_as_shown(s)


def test_a_widget_click_after_an_unwind_moves_on_from_the_shown_frame(monkeypatch):
    """The browser's Step button: each click a separate call, the run rebuilt in between."""
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(Stepper, "replay_each_move", True)
    s = figure4_stepper()
    w = s.widget()
    for _ in range(3):
        w.click("Step")
    assert s.cursor == 3 and "prewrite" in s.frame.note.lower()
    nothing_parked_and_store_as_shown(s)
    assert s.frame.dump == s.cluster.bigtable.dump()
