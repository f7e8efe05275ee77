"""What a graded step's reference code reaches: the helpers hidden with it.

An exercise names the reference of the step the student writes (``hidden``:
``"module:qualname"``). That is not enough: the reference's logic may sit in a
helper it calls (``transaction.snapshot_read`` returns
``committed_read(...)``, which holds most of the step), and an answer calling
the helper would pass without writing the step. :func:`helpers` finds them by
reachability, so no list is kept by hand:

- **reached**: every function of the kit the hidden targets' code refers to,
  then every function those refer to, and so on (a global name, a module's
  attribute such as ``rows.latest_write``, a method of the target's class called
  as ``self.name``);
- **private to the step**: of those, the ones defined in a hidden target's own
  module that nothing else in that module refers to (what only the hidden step
  uses). A helper the rest of the kit also uses (the store's vocabulary in
  :mod:`percolator_ref.rows` and :mod:`percolator_ref.model`, the cleanup a
  reader runs) is part of what the exercise hands the student, and stays.

The sandbox hides ``hidden`` and :func:`helpers` of it alike (:mod:`.child`).
"""
from __future__ import annotations

import importlib
import inspect
import types

PACKAGE = "percolator_ref"


def locate(target: str):
    """``(module, owner class or None, function)`` of ``"module:Qual.name"`` (None if it is a
    class or not a function)."""
    module_name, _, qualname = target.partition(":")
    module = importlib.import_module(module_name)
    owner, obj = None, module
    for part in qualname.split("."):
        owner, obj = obj, getattr(obj, part)
    fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    if not isinstance(fn, types.FunctionType):
        return module, None, None
    return module, owner if isinstance(owner, type) else None, fn


def _names(code) -> set:
    """Every name a code object (and the code nested in it) loads: globals and attributes."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _ours(fn) -> bool:
    return isinstance(fn, types.FunctionType) and (fn.__module__ or "").startswith(PACKAGE)


def _referred(fn, owner) -> list:
    """``[(function, its class or None)]`` that ``fn``'s code refers to, in the kit."""
    names = _names(fn.__code__)
    out = []
    for name in names:
        value = fn.__globals__.get(name)
        if _ours(value):
            out.append((value, None))
        elif isinstance(value, types.ModuleType) and value.__name__.startswith(PACKAGE):
            out += [(getattr(value, n), None) for n in names
                    if _ours(getattr(value, n, None))]
        if owner is not None:
            attr = inspect.getattr_static(owner, name, None)
            attr = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            if _ours(attr):
                out.append((attr, owner))
    return out


def reached(targets) -> dict:
    """``{function: its class or None}``: every kit function the targets' code reaches, the
    targets included (``targets``: ``"module:qualname"`` strings or such pairs)."""
    todo = []
    for target in targets:
        if isinstance(target, str):
            _, owner, fn = locate(target)
        else:
            fn, owner = target
        if fn is not None:
            todo.append((fn, owner))
    seen: dict = {}
    while todo:
        fn, owner = todo.pop()
        if fn in seen:
            continue
        seen[fn] = owner
        todo += [(f, o) for f, o in _referred(fn, owner) if f not in seen]
    return seen


def modules(targets) -> list:
    """Every module a hidden target lives in: the one it is named by and the one that defines
    it (``percolator_ref.observers:run_observer`` is defined in
    :mod:`percolator_ref.observers.notifications`, whose source must be hidden too)."""
    import sys
    found = []
    for target in targets:
        module, _, _ = locate(target)
        obj = importlib.import_module(module.__name__)
        for part in target.partition(":")[2].split("."):
            obj = getattr(obj, part)
        obj = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        for m in (module, sys.modules.get(getattr(obj, "__module__", None) or "")):
            if m is not None and m not in found:
                found.append(m)
    return found


def _module_functions(module) -> list:
    """``[(qualname, function, class or None)]`` defined in ``module``."""
    out = []
    for name, value in vars(module).items():
        if _ours(value) and value.__module__ == module.__name__:
            out.append((name, value, None))
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in vars(value).items():
                fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                if _ours(fn):
                    out.append((f"{name}.{attr}", fn, value))
    return out


def helpers(targets, given=()) -> tuple:
    """``"module:qualname"`` of each function private to the hidden step (module docstring),
    the targets themselves excluded, and so is each function named in ``given`` (what the
    exercise hands the student) and all that such a function reaches."""
    targets = tuple(targets)
    step = reached(targets)
    own = {locate(t)[2] for t in targets}
    kept = reached([(fn, owner) for fn, owner in step.items()
                    if fn.__name__ in set(given) and fn not in own])
    found = []
    for module in modules(targets):
        functions = _module_functions(module)
        for qualname, fn, owner in functions:
            if fn not in step or fn in own or fn in kept:
                continue
            users = [g for _, g, o in functions if g is not fn
                     and fn in {f for f, _ in _referred(g, o)}]
            if all(g in step for g in users):
                found.append(f"{module.__name__}:{qualname}")
    return tuple(sorted(found))


def handed(number: int, exercises_dir) -> set:
    """The names exercise ``number`` hands the student: every identifier its pristine notebook
    shows (a markdown cell's ``code`` spans, the code cells)."""
    import re
    from pathlib import Path

    import nbformat
    names: set = set()
    for path in sorted(Path(exercises_dir).glob(f"{number:02d}_*.ipynb"))[:1]:
        for cell in nbformat.read(path, as_version=4).cells:
            spans = re.findall(r"`([^`]+)`", cell.source) if cell.cell_type == "markdown" \
                else [cell.source]
            for span in spans:
                names |= set(re.findall(r"[A-Za-z_]\w*", span))
    return names


def hidden_targets(spec, exercises_dir) -> list:
    """What the sandbox hides for ``spec``: its ``hidden`` targets and their helpers that the
    exercise does not hand the student (:func:`helpers`, :func:`handed`)."""
    if not spec.hidden:
        return []
    return list(spec.hidden) + list(helpers(spec.hidden, handed(spec.number, exercises_dir)))
