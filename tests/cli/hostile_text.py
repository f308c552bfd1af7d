"""The hostile corpus of the untrusted-text tests, and the check that output is inert.

`HOSTILE` packs what must never act on a terminal or on rich: markup (closing tags
with no opening one crash rich's parser), emoji codes, CSI/OSC/DCS escape sequences
in 7-bit and 8-bit form, BEL, backspace, a carriage return, NUL, DEL, bidi
overrides and marks, zero-width characters, a byte order mark and the tag characters
that spell hidden text. `assert_inert` checks a command's output holds none of them raw.
"""

from __future__ import annotations

import subprocess
import unicodedata

MARKUP = "[/x] [bold red]bold[/bold red] [link=https://evil.example]link[/link] [/dim] :thumbs_up:"
ESCAPES = (
    "\x1b]0;pwned-title\x07 \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x1b[H \x1bP1$r0m\x1b\\ "
    "\x9b31m \x9d0;t\x9c \x90dcs\x9c \x07 \x08 a\rb \x00 \x7f \u202eevil\u202c \u2066i\u2069 "
    "z\u200bw\u200dj \u200fr\u061c \ufeffbom \U000e0068\U000e0069tag"
)
HOSTILE = f"{MARKUP} {ESCAPES}"
"""Untrusted text as a model, a tool, a file or a server could send it."""

IN_ARGV = HOSTILE.replace("\x00", "")
"""`HOSTILE` as a command-line argument can hold it (no NUL)."""

LITERAL = "[/x] [bold red]bold[/bold red]"
"""A part of `HOSTILE` every plain-text rendering shows exactly as written."""


def bad_characters(text: str) -> list[str]:
    """The characters of `text` that act on a terminal: C0 but tab and newline, ESC, DEL,
    C1 (as code points: UTF-8 continuation bytes are not C1), and what changes the text
    unseen: format characters (bidi controls, zero-width ones, tags), line separators."""
    return sorted(
        {
            f"U+{ord(ch):04X}"
            for ch in text
            if (ord(ch) < 0x20 and ch not in "\t\n")
            or 0x7F <= ord(ch) <= 0x9F
            or (not ch.isascii() and unicodedata.category(ch) in ("Cf", "Zl", "Zp"))
        }
    )


def assert_inert(
    done: subprocess.CompletedProcess[bytes], code: int, *, traceback: bool = False
) -> tuple[str, str]:
    """Exit `code`, no traceback (unless `traceback`: ``-v`` asked for one), UTF-8 output
    with no character that acts on a terminal; the decoded stdout and stderr."""
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == code, (done.returncode, stdout[-3000:], stderr[-3000:])
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        assert traceback or "Traceback" not in stream, (name, stream[-3000:])
        assert "MarkupError" not in stream, (name, stream[-3000:])
        assert not bad_characters(stream), (name, bad_characters(stream), stream[-3000:])
    return stdout, stderr
