"""A stepper over a run that was recorded elsewhere (a grading counterexample).

:class:`RecordedStepper` has the :class:`~percolator_ref.viz.stepper.Stepper`
interface that :class:`~percolator_ref.viz.widget.StepperWidget` drives
(``step``, ``back``, ``goto``, ``reset``, ``frames``, ``cursor``, ``frame``),
over frames built beforehand: nothing runs, so a step only moves the cursor
to the next stored frame, and the recorded choice is the only one (the one
client that moves next). ``crash`` is refused: a recorded run cannot branch.

:func:`recorded_frame` builds one :class:`RecordedFrame` from what a step
recorded: who did it, what it did (in words, for the title), the store's dump
after it, the tracer's events of the step (the versions they wrote or erased
are drawn bold or struck through, as in the stepper) and the clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .stepper import Frame, FrameCursor


@dataclass(frozen=True)
class RecordedFrame(Frame):
    """A stored step: ``did`` says what the client did; ``total``: the run's number of steps."""
    did: str = ""
    total: int = 0

    @property
    def title(self) -> str:
        return f"step {self.index + 1} of {self.total}: {self.actor} {self.did}"


def recorded_frame(index: int, total: int, actor: str, did: str, dump: dict,
                   events=(), clock: float = 0.0, crashed: bool = False,
                   note: str = "") -> RecordedFrame:
    """One stored frame. ``did``: what ``actor`` did, in words; ``dump``: the store after
    it; ``events``: the step's :class:`~percolator_ref.trace.RowTransactionEvent` s (what
    they changed is marked); ``note``: said after what the client did."""
    note = f"{actor} {did}." + (f" {note}" if note else "")
    return RecordedFrame(index, actor, tuple(e for e in events if e.changes), dump, note, "",
                         clock, (), "crash" if crashed else "step", did, total)


class RecordedStepper(FrameCursor):
    """Step through stored frames with the stepper's controls (nothing re-runs)."""

    can_crash = False
    unit, first_number = "step", 1     # frame i is "step i + 1 of M": the widget's slider too

    def __init__(self, frames):
        frames = list(frames)
        if not frames or not all(isinstance(f, Frame) for f in frames):
            raise ValueError("frames must be a non-empty list of Frame")
        self.frames = [_with_status(frames, i) for i in range(len(frames))]
        self.cursor = 0
        self.abandoned: list = []

    @property
    def runnable(self) -> list:
        return list(self.frame.runnable)

    @property
    def finished(self) -> bool:
        return self.cursor == len(self.frames) - 1

    def step(self, who: Optional[str] = None) -> Frame:
        """Show the next stored frame; ``who`` must be the client that moved there."""
        if self.finished:
            raise ValueError("the recorded run has no further step")
        if who is not None and who not in self.frame.runnable:
            raise ValueError(f"who={who!r} cannot move at step {self.cursor + 1}: in the "
                             f"recorded run {list(self.frame.runnable)} moves next")
        self.cursor += 1
        return self.frame

    def crash(self, who: Optional[str] = None) -> Frame:
        raise ValueError("a recorded run cannot branch: its clients cannot be crashed here")

    def reset(self) -> Frame:
        """Back to the first frame."""
        return self.goto(0)

    def __repr__(self):
        return f"<RecordedStepper frame {self.cursor}/{len(self.frames) - 1}>"


def _with_status(frames: list, i: int) -> Frame:
    """Frame ``i`` with who moves next (the recorded choice) and each client's next step."""
    following = frames[i + 1:]
    clients = list(dict.fromkeys(f.actor for f in frames))
    parts = []
    for client in clients:
        later = next((f for f in following if f.actor == client), None)
        gone = any(f.actor == client and f.action == "crash" for f in frames[:i + 1])
        parts.append(f"{client}: " + ("crashed" if gone else
                                      f"next {getattr(later, 'did', '')}" if later else "done"))
    runnable = (following[0].actor,) if following else ()
    return _replace(frames[i], status=" | ".join(parts), runnable=runnable)


def _replace(frame: Frame, **changes) -> Frame:
    import dataclasses
    return dataclasses.replace(frame, **changes)
