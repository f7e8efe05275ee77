"""Feedback text a notebook can influence, made safe to print and to store.

:func:`escape_text` is applied to everything a notebook can put in a report
(exception text, student names, file names) before the terminal report, the
CSV or Gradescope's ``results.json`` shows it (:mod:`.grader`,
:mod:`.submissions`).
"""
from __future__ import annotations

import unicodedata

NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def escape_text(text, newlines: bool = False) -> str:
    """``text`` with every control, format (bidi), separator or unassigned character escaped.

    ``newlines=True`` keeps ``\\n`` (multi-line feedback); everything else that a
    terminal or a spreadsheet would interpret is shown as ``\\xNN`` / ``\\uNNNN``.
    """
    out = []
    for ch in str(text):
        if ch == "\n" and newlines:
            out.append(ch)
        elif ch in NAMED_ESCAPES:
            out.append(NAMED_ESCAPES[ch])
        elif unicodedata.category(ch) in UNSAFE_CATEGORIES:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else
                       f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def indent_lines(text, prefix: str) -> str:
    """Escaped ``text`` whose continuation lines start with ``prefix`` (never a report's margin)."""
    return escape_text(text, newlines=True).replace("\n", "\n" + prefix)
