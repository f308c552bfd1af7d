"""Read what the user hands a command (a file or stdin) with one-line errors, never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from toolbridge.cli.app import CliError

__all__ = ["decode_utf8", "read_json", "read_source"]


def read_source(source: str) -> tuple[str, str]:
    """The text of `source` (a path, or ``-`` for stdin) and a name for messages."""
    if source == "-":
        return decode_utf8(sys.stdin.buffer.read(), "stdin"), "stdin"
    path = Path(source)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CliError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{source}: is a directory, not a file") from None
    except OSError as exc:
        raise CliError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    return decode_utf8(raw, source), source


def decode_utf8(raw: bytes, name: str) -> str:
    """`raw` as text; not UTF-8 is an error naming where the first bad byte is."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{name}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def read_json(source: str) -> tuple[Any, str]:
    """The JSON value in `source` and its name; invalid JSON says where it broke."""
    text, name = read_source(source)
    if not text.strip():
        raise CliError(f"{name}: empty; expected a provider response as JSON")
    try:
        return json.loads(text), name
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{name}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise CliError(f"{name}: not valid JSON: it is nested too deeply") from None
    except ValueError as exc:  # an integer longer than Python converts (4300 digits)
        raise CliError(f"{name}: not valid JSON: {exc}") from None
