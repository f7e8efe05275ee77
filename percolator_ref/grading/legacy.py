"""Exercises not yet converted to scenarios + verdicts: their old battery, run in the sandbox.

An exercise module with a :class:`~.battery.Battery` called ``battery`` (and
no :class:`~.framework.Exercise` called ``exercise``) is graded through
:func:`spec_of`: each old check becomes a scenario that runs the whole check
in the sandbox and reports ``{"passed": ..., "reason": ...}``, and a verdict
that believes it. Such exercises get the sandbox (fresh process, limits,
answer cells only, audit hook) but NOT trusted verdicts: a hostile answer
cell can fake their report. ``Grade.trusted`` says which kind a grade is.
"""
from __future__ import annotations

from .framework import Exercise, describe_exception, require


def spec_of(module, answer: str) -> Exercise:
    """The :class:`Exercise` of ``module`` (new style), or an adapter of its old battery."""
    spec = getattr(module, "exercise", None)
    if isinstance(spec, Exercise):
        if spec.answer != answer:
            raise ValueError(f"exercise {spec.number}: the check cell grades {answer!r}, "
                             f"the spec says answer={spec.answer!r}")
        return spec
    battery = module.battery
    spec = Exercise(battery.exercise, battery.title, answer=answer, graded={})
    spec.trusted = False
    for check in battery.checks:
        spec.scenario(check.name)(_scenario(check.fn))
        spec.verdict(check.name)(_verdict)
    return spec


def _scenario(fn):
    def scenario(answer, p, ctx):
        try:
            fn(answer)
        except AssertionError as exc:
            return {"passed": False, "reason": " ".join(str(exc).split()) or "assertion failed"}
        except Exception as exc:     # noqa: BLE001 - the student's bug is a FAIL
            return {"passed": False, "reason": describe_exception(exc)}
        return {"passed": True, "reason": ""}
    return scenario


def _verdict(obs, p):
    require(isinstance(obs, dict) and obs.get("passed") is True,
            str(obs.get("reason") if isinstance(obs, dict) else obs) or "failed")
