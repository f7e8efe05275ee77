"""../shared/API.md is a contract: every name it imports is importable where it says, and
every exception it names is importable from ``percolator_ref``."""
from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API = ROOT.parent / "shared" / "API.md"
EXCEPTION = re.compile(r"`([A-Z][A-Za-z]*(?:Error|Crash|Closed|Unknown|Corrupt|Exhausted|"
                       r"Unavailable))`")


def api_text() -> str:
    if not API.exists():
        pytest.skip(f"{API} is not beside the repository")
    return API.read_text()


def code_blocks(text: str) -> list:
    return re.findall(r"```(?:python|py)?\n(.*?)```", text, flags=re.S)


def imports(text: str) -> list:
    """``(module, name or None)`` for every import statement in the page's code blocks."""
    found = []
    for block in code_blocks(text):
        for statement in re.findall(r"^((?:from|import) [^\n(]*(?:\([^)]*\))?[^\n]*)", block,
                                    flags=re.M):
            node = ast.parse(statement.split("#")[0].strip()).body[0]
            if isinstance(node, ast.ImportFrom):
                found += [(node.module, alias.name) for alias in node.names]
            else:
                found += [(alias.name, None) for alias in node.names]
    return found


def missing(pairs) -> list:
    """The imports that fail: ``"module: name"``."""
    failed = []
    for module, name in pairs:
        try:
            imported = importlib.import_module(module)
        except ImportError:
            failed.append(f"{module}: (module)")
            continue
        if name is not None and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                failed.append(f"{module}: {name}")
    return failed


def test_api_md_imports_are_found():
    pairs = imports(api_text())
    assert ("percolator_ref", "Cluster") in pairs
    assert ("percolator_ref.step", "Step") in pairs
    assert len(pairs) >= 8, pairs


def test_every_name_api_md_imports_is_importable_where_it_says():
    assert missing(imports(api_text())) == []


def test_every_exception_api_md_names_is_importable_from_the_package():
    import percolator_ref
    builtin = set(dir(builtins))
    names = sorted(set(EXCEPTION.findall(api_text())) - builtin)     # TypeError, ValueError
    assert "TransactionClosed" in names and "ClientCrash" in names
    assert [n for n in names if not (isinstance(getattr(percolator_ref, n, None), type)
                                     and issubclass(getattr(percolator_ref, n), Exception))] == []


def test_the_contract_check_can_fail():
    page = ("Intro\n```python\nfrom percolator_ref import Cluster, NoSuchName\n"
            "from percolator_ref.nowhere import X   # comment\n"
            "from percolator_ref.model import (Cell,\n    Write)\nimport percolator_ref.step\n```\n")
    pairs = imports(page)
    assert pairs == [("percolator_ref", "Cluster"), ("percolator_ref", "NoSuchName"),
                     ("percolator_ref.nowhere", "X"), ("percolator_ref.model", "Cell"),
                     ("percolator_ref.model", "Write"), ("percolator_ref.step", None)]
    assert missing(pairs) == ["percolator_ref: NoSuchName", "percolator_ref.nowhere: (module)"]
