"""Text that is safe to print on a terminal or store in a spreadsheet.

:func:`escape_text` turns every control, format (bidirectional), separator or
unassigned character into a visible ``\\x1b``-style escape. Anything that
shows a value someone else chose (a student's answer, a counterexample file) in a
terminal goes through it: the grading reports (:mod:`percolator_ref.grading.grade.feedback`)
and the text form of the kit's tables (:mod:`.tables`), which
``percolator replay`` prints.
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
