"""Read what the user hands a command (a file or stdin) with one-line errors, never a traceback.

Everything read here has limits: at most `MAX_INPUT_BYTES`, and JSON nested at most
`formats.wire.MAX_DEPTH` levels (what the provider parsers accept). Past them, the
input is refused with an error that says which limit, not a ``RecursionError`` or a
process that fills its memory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, BinaryIO

from toolbridge.cli.app import CliError
from toolbridge.core.jsondata import nesting
from toolbridge.formats.wire import MAX_DEPTH

__all__ = ["MAX_INPUT_BYTES", "decode_utf8", "read_json", "read_source", "read_stdin"]

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""The most a command reads from a file or stdin: a provider response with a few images
fits many times over."""


def read_stdin() -> str:
    """Standard input as text, refused past `MAX_INPUT_BYTES` or when not UTF-8."""
    return decode_utf8(_read_bounded(sys.stdin.buffer, "stdin"), "stdin")


def read_source(source: str) -> tuple[str, str]:
    """The text of `source` (a path, or ``-`` for stdin) and a name for messages."""
    if source == "-":
        return read_stdin(), "stdin"
    path = Path(source)
    try:
        with path.open("rb") as file:
            raw = _read_bounded(file, source)
    except FileNotFoundError:
        raise CliError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{source}: is a directory, not a file") from None
    except OSError as exc:
        raise CliError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    return decode_utf8(raw, source), source


def _read_bounded(file: BinaryIO, name: str) -> bytes:
    raw = file.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise CliError(f"{name}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; not read")
    return raw


def decode_utf8(raw: bytes, name: str) -> str:
    """`raw` as text; not UTF-8 is an error naming where the first bad byte is."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{name}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def read_json(source: str) -> tuple[Any, str]:
    """The JSON value in `source` and its name; invalid JSON says where it broke, and
    JSON nested deeper than `MAX_DEPTH` levels is refused."""
    text, name = read_source(source)
    if not text.strip():
        raise CliError(f"{name}: empty; expected a provider response as JSON")
    too_deep = CliError(f"{name}: not valid JSON: nested too deeply (over {MAX_DEPTH} levels)")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{name}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:  # the decoder recurses once per level
        raise too_deep from None
    except ValueError as exc:  # an integer longer than Python converts (4300 digits)
        raise CliError(f"{name}: not valid JSON: {exc}") from None
    if nesting(value) > MAX_DEPTH:
        raise too_deep
    return value, name
