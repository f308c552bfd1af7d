"""Remove terminal control sequences from text before a model reads it or a terminal prints it.

Command output may carry escape sequences: colours (CSI), window titles and clipboard
writes (OSC 52), device control strings, cursor moves that overwrite what was printed.
None of it means anything to a model, and printed by the CLI it would act on the
user's terminal. `strip_control_sequences` removes every such sequence, including one
cut off at the end of the text, and every other C0/C1 control character except tab
and newline; a carriage return becomes a newline, so no line can hide another.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["escape_invisible", "strip_control_sequences"]

_STRING_END = r"(?:\x07|\x1b\\|\x9c|$)"  # BEL, ST (ESC \ or 8-bit), or the cut-off end

_CONTROL = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: parameters, intermediates, final byte
    rf"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*{_STRING_END}"  # OSC DCS SOS PM APC
    r"|\x1b[ -/]*[0-~]?"  # any other escape: ESC, intermediates, final byte
    r"|\r\n?"  # carriage returns, handled below
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]",  # remaining C0 (not tab, newline), DEL, C1
)


def _replace(match: re.Match[str]) -> str:
    return "\n" if match.group().startswith("\r") else ""


def strip_control_sequences(text: str) -> str:
    """`text` without terminal control sequences or control characters (tab and newline kept)."""
    if text.isprintable():  # the common case: nothing to remove, not even a newline
        return text
    return _CONTROL.sub(_replace, text)


def _shown(ch: str) -> str:
    if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"):
        return ch
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"


def escape_invisible(text: str) -> str:
    """`text` with every character a terminal would act on or not show (controls, DEL,
    bidi overrides, zero-width and other format characters) written as a ``\\uXXXX``
    escape; tab and newline kept.

    For what a user decides on, such as the arguments of a call to approve: JSON escapes
    only C0 controls, and a right-to-left override can show one argument as another.
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(map(_shown, text))
