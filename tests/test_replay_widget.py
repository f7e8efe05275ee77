"""A grading counterexample in the kit's stepper widget (issue 19, item 3).

``grading.replay(report).widget()`` is the notebooks' StepperWidget over a
RecordedStepper: one frame per step of the shortest failing schedule (client
X did row transaction Y), the cells after it, the stepper's controls.
"""
import pytest

from percolator_ref import grading
from percolator_ref.grading.judge.journal import CRASH, TIMESTAMP
from percolator_ref.grading.judge.interactive import self_check
from percolator_ref.viz import RecordedStepper
from percolator_ref.viz.widget import StepperWidget
from grading_helpers import load_catalogue

WRONG = "reads past a dead holder's primary lock (thinks it can never commit now)"


@pytest.fixture(scope="module")
def failing():
    namespace = {}
    exec(compile(load_catalogue(1)[WRONG], "<answer>", "exec"), namespace)
    report = self_check(grading.exercise(1).exercise, namespace["SnapshotReadTransaction"])
    return next(r for r in report.results if r.counterexample)


def test_the_widget_is_the_stepper_widget_over_the_counterexamples_steps(failing):
    steps = failing.counterexample["steps"]
    shown = grading.replay(failing)
    w = shown.widget()
    assert isinstance(w, StepperWidget) and isinstance(w.stepper, RecordedStepper)
    assert len(w.stepper.frames) == len(steps) >= 2
    for frame, step in zip(w.stepper.frames, steps):
        assert frame.actor == step["client"]
        if step["step"] not in (TIMESTAMP, CRASH):      # a row transaction: its step and row
            assert frame.title.endswith(f"{step['step']} {step['events'][0]['row']}")
    assert any(s["step"] == "prewrite-primary" for s in steps)
    assert failing.reason.split(" (shortest")[0] in w.children[0].value.replace("&#x27;", "'")


def test_its_controls_step_through_the_recorded_schedule(failing):
    steps = failing.counterexample["steps"]
    w = grading.replay(failing).widget()
    assert w.crash_button.disabled and w.back_button.disabled
    assert list(w.choice.options) == [steps[1]["client"]]      # the recorded choice moves next
    for _ in steps[1:]:
        w.click("Step")
    assert w.stepper.cursor == len(steps) - 1 and w.step_button.disabled
    assert f"step {len(steps)} of {len(steps)}" in w.note.value
    assert "After this step the check failed" in w.note.value
    assert w.slider.value == len(steps) and w.slider.description == "step"
    w.click("Back")
    assert w.stepper.cursor == len(steps) - 2
    # the slider reads as the title does ("step N of M" beside a slider at N)
    assert w.slider.value == len(steps) - 1 and f"step {len(steps) - 1} of {len(steps)}" in w.note.value
    w.slider.value = 1
    assert w.stepper.cursor == 0 and f"step 1 of {len(steps)}" in w.note.value
    w.click("Reset")
    assert w.stepper.cursor == 0


def test_a_recorded_stepper_cannot_branch(failing):
    stepper = grading.replay(failing).stepper
    with pytest.raises(ValueError, match="cannot branch"):
        stepper.crash()
    nobody = "nobody"
    with pytest.raises(ValueError, match="recorded run"):
        stepper.step(nobody)
    with pytest.raises(ValueError, match="frames"):
        RecordedStepper([])


def test_the_cells_it_changed_are_marked_as_the_stepper_marks_them(failing):
    frames = grading.replay(failing).frames
    marked = [f for f in frames if f.events]
    assert marked, "no row transaction step wrote anything"
    text = repr(marked[0].table)
    assert "*" in text and "written by this step" in text


def test_the_notebooks_demo_cell_shows_it_and_never_runs_in_grading():
    import nbformat
    from percolator_ref.grading.grade.answers import plan
    from grading_helpers import pristine_path
    pristine = nbformat.read(pristine_path(1), as_version=4)
    demo = [c for c in pristine.cells if "demo" in c.metadata.get("tags", [])]
    assert len(demo) == 1 and "grading.replay(demo).widget()" in demo[0].source
    assert demo[0].outputs[-1]["data"]["text/plain"].startswith("Cell-table stepper at ")
    cells, problems = plan(pristine, pristine, 1)
    assert problems == [] and all(c.id != demo[0].id for c in cells)
    assert cells and not any("PastOwnLock" in c.source for c in cells)
