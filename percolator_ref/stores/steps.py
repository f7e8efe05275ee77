"""What each step asks of a store (and of fault injection): the paper's steps and the variants'.

The paper's steps are :class:`~percolator_ref.step.Step`. A protocol variant
adds steps of its own (async commit's ``"check-primary"``, one-phase commit's
``"one-pc"``, ...). It *declares* each one with :func:`declare_step`, stating
its properties: ``read_only`` (it only reads, so a store may run it without
taking the row) and ``decides`` (what it reads is passed on: a value returned
or a transaction's fate decided, so a store with replicas answers only once
what it read is durable). Declared steps are steps like the enum's: fault
injection (:class:`~percolator_ref.faults.StoreFailsAt`) targets them, the
stores and the session read their properties through :func:`is_read_only` and
:func:`decides`, and the grader keeps their names.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from ..step import READ_ONLY_STEPS, Step


@dataclass(frozen=True)
class StepProperties:
    """What a step does, for the stores and fault injection (see the module doc)."""
    read_only: bool = False       # only reads: may run without taking the row for writing
    decides: bool = False         # its reads are passed on (a value, a decision at a primary)


DECIDING_STEPS = READ_ONLY_STEPS | {Step.CLEANUP_PRIMARY}
"""The paper's steps whose reads are passed on: a read's value, lazy cleanup's decision."""

_DECLARED: dict = {step.value: StepProperties(step in READ_ONLY_STEPS, step in DECIDING_STEPS)
                   for step in Step}
_DECLARING = threading.Lock()


def declare_step(name: str, *, read_only: bool = False, decides: bool = False) -> str:
    """Declare a variant's step ``name`` with its properties; returns ``name``.

    Declaring a name again with the same properties is a no-op; with others (or a
    name of :class:`Step`), ValueError naming ``name``.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"name must be a non-empty step name, got {name!r}")
    for arg, value in (("read_only", read_only), ("decides", decides)):
        if not isinstance(value, bool):
            raise TypeError(f"{arg} must be True or False, got {value!r}")
    if name in set(Step):
        raise ValueError(f"name {name!r} is one of the paper's steps (Step), not a variant's")
    wanted = StepProperties(read_only, decides)
    with _DECLARING:
        known = _DECLARED.setdefault(name, wanted)
    if known != wanted:
        raise ValueError(f"name {name!r} is already declared as a step with {known}")
    return name


def is_step(step) -> bool:
    """Is ``step`` one of :class:`Step` or a step a variant declared?"""
    return isinstance(step, str) and step in _DECLARED


def properties(step) -> StepProperties:
    """The declared properties of ``step`` (ValueError naming ``step`` if it is not one)."""
    if not is_step(step):
        raise ValueError(f"step must be a Step name such as 'commit-primary' or a step a "
                         f"variant declares (import the variant first), got {step!r}")
    return _DECLARED[step]


def is_read_only(step) -> bool:
    """Does ``step`` only read (an undeclared label: no)?"""
    return is_step(step) and _DECLARED[step].read_only


def decides(step) -> bool:
    """Are ``step``'s reads passed on (returned, or deciding a transaction's fate)?"""
    return is_step(step) and _DECLARED[step].decides


def declared_steps() -> tuple:
    """Every step name known now: the enum's, then the variants' declared so far."""
    return tuple(_DECLARED)
