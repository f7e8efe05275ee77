"""What a grading child may read: the read policy that the sandbox's layers enforce.

:func:`read_policy` turns an exercise's spec, the pristine exercises and the
other submissions into the lists the child's layers apply (:mod:`.child`'s
audit hook, :mod:`.landlock`, :mod:`.privileges`): the Python installation
and the kit's package may be read; the grading room, the exercises, the
hidden reference's source and compiled forms, the submissions, a repository
on ``sys.path`` and the system's secrets may not.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from .reach import hidden_targets, modules
from .child import DEVICES, inside, under

PACKAGE = Path(__file__).resolve().parents[2]
ROOT = PACKAGE.parent
SYSTEM_READS = ("/usr", "/lib", "/lib64", "/etc", "/proc")    # read by any Python process
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh")
"""Never readable by the child (the private uid cannot read them anyway)."""


def _module_files(targets) -> list:
    """The source and compiled files of every module a target is named by or defined in."""
    files = []
    for module in modules(targets):
        spec = importlib.util.find_spec(module.__name__)
        if spec and spec.origin:
            files.append(os.path.realpath(spec.origin))
            if spec.cached:
                files.append(os.path.realpath(spec.cached))
            files += _compiled_variants(spec.origin)
    return files


def _compiled_variants(origin: str) -> list:
    """Every compiled form of a module (``-O``/``-OO`` ones too: ``.opt-1.pyc``, ``.opt-2.pyc``)."""
    source = Path(origin)
    cache = source.parent / "__pycache__"
    found = [source.with_suffix(".pyc")]
    if cache.is_dir():
        found += sorted(cache.glob(source.stem + ".*.pyc"))
    return [os.path.realpath(f) for f in found]


def _is_repository(path: Path) -> bool:
    return any((path / marker).exists() for marker in (".git", "solutions", "exercises"))


def read_policy(spec, exercises_dir, others) -> dict:
    """What the child may read: the Python installation and the package, minus secrets.

    Not read as the installation: a ``sys.path`` entry that is a repository, or that holds
    the working directory, the exercises or a submission (see :func:`_private_places`).
    """
    hidden = _module_files(spec.hidden)
    prefixes = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    private = _private_places(exercises_dir, others)
    entries = {str(Path(p).resolve()) for p in sys.path if p and Path(p).exists()}
    repos = {p for p in entries | {str(ROOT)} if Path(p).is_dir() and _is_repository(Path(p))}
    holding = {p for p in entries if not under(p, prefixes) and any(inside(q, p) for q in private)}
    python = sorted(set(prefixes) | (entries - repos - holding))
    needed = prefixes + SYSTEM_READS + (str(PACKAGE),)
    denied = sorted(repos | {q for q in holding | set(private) if not under(q, prefixes)
                             and not any(inside(r, q) for r in needed)})
    files = [str(f) for f in sorted(PACKAGE.rglob("*"))
             if f.is_file() and "grading" not in f.relative_to(PACKAGE).parts
             and str(f.resolve()) not in hidden]
    return {
        "allow_read": [str(PACKAGE)] + python,
        "deny_read": denied,
        "hard_deny": [str(PACKAGE / "grading"), os.path.realpath(exercises_dir)] + hidden
                     + [o for o in map(os.path.realpath, others)
                        if not any(inside(r, o) for r in needed)] + list(SYSTEM_SECRETS),
        "landlock": {"read_dirs": python + list(SYSTEM_READS),
                     "list_dirs": [str(PACKAGE)], "read_files": files + list(DEVICES)},
        "expose": python + [str(PACKAGE)],
        "hidden": hidden_targets(spec, exercises_dir),
    }


def _private_places(exercises_dir, others) -> list:
    """The grader's working directory, the exercises and the submissions: places whose
    listing is nobody's business. A ``sys.path`` entry holding one of them (``python -m``
    puts the working directory there) is not read as part of the Python installation."""
    places = [os.path.realpath(exercises_dir)] + [os.path.realpath(o) for o in others]
    places += [os.path.dirname(p) for p in places[1:]]
    try:
        places.append(os.path.realpath(os.getcwd()))
    except OSError:                     # a working directory that was deleted: nothing to hide
        pass
    return sorted(set(places))


def private_roots(paths) -> tuple:
    """The outermost folders holding ``paths`` (real paths, sorted): what a child is denied
    in place of the submissions themselves, so that its job (which a notebook can read)
    never lists another submission's path: the class folder, the folder of unpacked zips."""
    folders = sorted({os.path.dirname(os.path.realpath(p)) for p in paths})
    return tuple(f for f in folders if not any(f != g and inside(f, g) for g in folders))
