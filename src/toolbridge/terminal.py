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

__all__ = ["strip_control_sequences"]

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
