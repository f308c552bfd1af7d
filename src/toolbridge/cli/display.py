"""How the command line shows text it did not write: as inert, plain text, one way.

Text from a model, a tool, a file, an MCP server, a skill or the journal is data. Every
command prints it through this module: `clean` writes each control character a terminal
would act on (C0 but tab and newline, DEL, C1 such as the 8-bit CSI ``\\x9b``) as a
visible ``\\xNN`` and each bidi override or line separator as ``\\uXXXX``, so it cannot
move the cursor, set a title, write the clipboard or reorder a line; `plain` makes it a
rich `Text`, which is never parsed as markup (``[/x]`` stays ``[/x]``, it does not crash)
nor as emoji codes. `json_text` is the JSON every ``--json`` prints: exact values,
with the same characters escaped (JSON itself escapes only C0) and lone surrogates
written as text. `SafeFormatter` does the same for the log records the command line
shows.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich loads with the first line shown: `--help` and `--version` need none
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

__all__ = [
    "SafeFormatter",
    "clean",
    "echo",
    "echo_json",
    "json_text",
    "plain",
    "show",
    "table",
]

# What a terminal acts on: C0 controls but tab and newline, DEL, and C1 controls (their
# 8-bit forms start CSI, OSC and DCS sequences as ESC does); a lone CR would let one
# line overwrite another.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Unicode's format characters (category Cf, as of Unicode 15.1), which change what a
# person reads without being seen: bidi marks, embeddings, overrides and isolates (Trojan
# Source), zero-width spaces and joiners, the byte order mark, and the tag characters
# that spell text no terminal shows.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
# What reorders, hides or splits what a person reads: the format characters, the Unicode
# line/paragraph separators; and lone surrogates (a JSON "\ud800" from a model), which no
# stream can encode.
_INVISIBLE = re.compile(f"[{_FORMAT}\u2028\u2029\ud800-\udfff]")
# In JSON text, the same but for lone surrogates: their JSON escape ("\udc80") is what
# strict readers refuse (serde_json; I-JSON forbids it), so they are written as text.
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f{_FORMAT}\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_ASCII = re.compile("[^\x00-\x7f]")


def _escape_control(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _escape_unicode(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def clean(text: str) -> str:
    """`text` safe to print: control characters as ``\\xNN``, format characters (bidi
    controls, zero-width ones, tags), line separators and lone surrogates as ``\\uXXXX``
    (``\\UXXXXXXXX`` beyond U+FFFF); tab, newline and everything else
    unchanged (a CR before a newline is a Windows line end, and goes)."""
    if text.isprintable():  # the common case: nothing to escape (not even a newline)
        return text
    text = text.replace("\r\n", "\n")
    return _INVISIBLE.sub(_escape_unicode, _CONTROL.sub(_escape_control, text))


def plain(text: str, style: str = "") -> Text:
    """`text` cleaned, as a rich `Text`: printed as it is, never read as markup."""
    from rich.text import Text

    return Text(clean(text), style=style)


def table(*headers: str, title: str | Text | None = None) -> Table:
    """A table whose every value is shown whole: one too long for its column folds onto
    more lines, never cut with '…' (printed to a pipe or a file, 80 columns, two
    different values would otherwise read alike)."""
    from rich.table import Column, Table

    return Table(*(Column(header, overflow="fold") for header in headers), title=title)


def show(console: Console, *parts: str | tuple[str, str], end: str = "\n") -> None:
    """Print `parts` on `console` as plain text; a ``(text, style)`` part is styled.

    The one way a command prints a line that holds untrusted text: each part is cleaned
    and none is parsed as markup or emoji codes.
    """
    from rich.text import Text

    line = Text()
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        line.append(clean(text), style=style or None)
    console.print(line, end=end, soft_wrap=True)


def echo(text: str, *, err: bool = False) -> None:
    """Write `text` cleaned, exactly otherwise (tabs kept, no wrapping): a tool's output."""
    _write(clean(text), sys.stderr if err else sys.stdout)


def _write(text: str, stream: TextIO) -> None:
    """`text` and a newline on `stream`, in the stream's own encoding, as the consoles
    write (click's echo would write UTF-8 to an output that says it is ASCII)."""
    stream.write(f"{text}\n")
    stream.flush()


def _escape_in_json(match: re.Match[str]) -> str:
    """A character as its JSON escape: beyond U+FFFF, the escapes of its surrogate pair."""
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escape_as_text(match: re.Match[str]) -> str:
    return f"\\\\u{ord(match.group()):04x}"


def json_text(
    value: Any,
    *,
    indent: int | None = None,
    default: Callable[[Any], Any] | None = None,
    allow_nan: bool = True,
) -> str:
    """`value` as JSON for a terminal or a pipe: exact (a reader gets every character
    back), readable (non-ASCII text kept), and with every character a terminal would act
    on written as a ``\\uXXXX`` escape (``json.dumps`` escapes only C0). A lone
    surrogate is no character: it becomes the six characters ``\\udc80`` of text, as
    `clean` shows it, so that strict readers take the JSON."""
    text = json.dumps(
        value, indent=indent, ensure_ascii=False, default=default, allow_nan=allow_nan
    )
    return _SURROGATE.sub(_escape_as_text, _JSON_UNSAFE.sub(_escape_in_json, text))


def echo_json(
    value: Any,
    *,
    indent: int | None = None,
    default: Callable[[Any], Any] | None = None,
    allow_nan: bool = True,
) -> None:
    """Print `value` as `json_text` on stdout (`allow_nan` False: a `ValueError` for a NaN
    or an infinity, which strict JSON has no form for). On an output whose encoding
    cannot write all of it (``PYTHONIOENCODING=latin-1``), every non-ASCII character is
    a JSON escape: the text stays exact."""
    text = json_text(value, indent=indent, default=default, allow_nan=allow_nan)
    try:
        text.encode(sys.stdout.encoding)
    except UnicodeEncodeError:
        text = _NON_ASCII.sub(_escape_in_json, text)
    _write(text, sys.stdout)


class SafeFormatter(logging.Formatter):
    """A log formatter for the terminal: the formatted record (message, arguments,
    traceback) cleaned, since a record may quote a tool, a server or a file. Without
    `tracebacks` a record's traceback is left out: the command line shows one only
    with ``-v``."""

    def __init__(self, fmt: str | None = None, *, tracebacks: bool = True) -> None:
        super().__init__(fmt)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks:
            return clean(super().format(record))
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        return clean(self.formatMessage(record))
