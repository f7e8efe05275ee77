"""Feedback text a notebook can influence, made safe to print and to store.

:func:`escape_text` is applied to everything a notebook can put in a report
(exception text, student names, file names) before the terminal report, the
CSV or Gradescope's ``results.json`` shows it (:mod:`.grader`,
:mod:`.submissions`).
"""
from __future__ import annotations

from ...viz.printable import escape_text

__all__ = ["escape_text", "indent_lines", "unreadable"]


def indent_lines(text, prefix: str) -> str:
    """Escaped ``text`` whose continuation lines start with ``prefix`` (never a report's margin)."""
    return escape_text(text, newlines=True).replace("\n", "\n" + prefix)


def unreadable(exc: BaseException) -> str:
    """Why a file is not a readable notebook, quoting nothing of it: a parser's message
    (nbformat's, json's) may quote the file, and the file may be anything (a link to a
    secret, a classmate's work), so only the kind of error and where it is are told."""
    where = ""
    if isinstance(getattr(exc, "lineno", None), int) and isinstance(getattr(exc, "colno", None), int):
        where = f" at line {exc.lineno}, column {exc.colno}"
    return f"not a readable notebook ({type(exc).__name__}{where}); its contents are not shown"
