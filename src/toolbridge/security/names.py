"""File names that are not UTF-8, as a model is shown them and gives them back.

A Linux file name is bytes. Python decodes one that is not UTF-8 with
``surrogateescape`` (byte 0xE9 becomes U+DCE9), a lone surrogate that no request to a
model can carry. So a model is shown each such byte as the four characters ``\\xe9``
(`shown`), and a path it sends with ``\\xNN`` escapes of bytes 0x80 to 0xFF names
those bytes (`from_escapes`), unless the path exists as written (`Workspace.resolve`).
An escape never names a byte below 0x80, so it cannot spell ``/``, ``.`` or NUL.
"""

from __future__ import annotations

import os
import re

__all__ = ["from_escapes", "shown"]

_UNDECODABLE = re.compile("[\udc80-\udcff]")  # the bytes 0x80-0xFF surrogateescape made
_ESCAPE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def _as_escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()) - 0xDC00:02x}"


def shown(text: str) -> str:
    """`text` with each byte of a name that is not UTF-8 written as ``\\xNN``."""
    if text.isascii():
        return text
    return _UNDECODABLE.sub(_as_escape, text)


def from_escapes(path: str) -> str | None:
    """`path` with each ``\\xNN`` escape (0x80 to 0xFF) read as that byte, as the file
    system's names decode (``caf\\xe9.txt`` -> ``'caf\\udce9.txt'``, ``caf\\xc3\\xa9``
    -> ``'café'``); None when it holds no such escape."""
    if "\\x" not in path:
        return None
    pieces = _ESCAPE.split(path)  # text, hex digits, text, hex digits, ..., text
    if len(pieces) == 1:
        return None
    try:
        data = b"".join(
            bytes([int(piece, 16)]) if index % 2 else os.fsencode(piece)
            for index, piece in enumerate(pieces)
        )
    except UnicodeEncodeError:  # a lone surrogate in the text itself: not a name
        return None
    return os.fsdecode(data)
