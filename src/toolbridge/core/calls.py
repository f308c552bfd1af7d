"""What the model sent: `ToolCallRequest`, strict argument decoding, and the repair log.

New calls are decoded strictly (`decode_arguments`): broken JSON, NaN, duplicate keys
and overflowing numbers are errors, never guesses. Lenient repair exists only for
replaying stored history (`repair_arguments_for_replay`) and execution never uses it.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ArgumentsDecodeError",
    "NumberOverflowError",
    "OverflowedNumber",
    "Repair",
    "ToolCallRequest",
    "decode_arguments",
    "format_path",
    "parse_tool_arguments",
    "repair_arguments_for_replay",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call as the model sent it; `arguments` is raw (text, dict, or anything).

    `extra` keeps provider data that must be echoed back verbatim (thought signatures,
    item ids) and is ignored by execution.
    """

    id: str
    name: str
    arguments: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)


RepairAction = Literal["unwrap_arguments", "decode_json", "cast", "drop_null"]
Location = tuple[str | int, ...]


@dataclass(slots=True)
class Repair:
    """One change made to the model's arguments before validation, for tracing and tests.

    `location` is the key/index path inside the arguments (``()`` for the whole object);
    `path` renders it as a JSON path, only when someone reads it.
    """

    location: Location
    action: RepairAction
    before: Any
    after: Any

    @property
    def path(self) -> str:
        return format_path(self.location)


_PATH_PARTS = 16  # a deeper path shows its first 8 and last 4 parts


def format_path(location: Sequence[str | int]) -> str:
    """``["a", 0, "b c"]`` -> ``$.a[0]["b c"]`` (long keys and deep paths shortened)."""
    out = ["$"]
    if len(location) > _PATH_PARTS:
        cut = len(location) - 12
        return f"{format_path(location[:8])}…({cut} levels)…{format_path(location[-4:])[1:]}"
    for part in location:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif len(part) <= 60 and part.isascii() and part.isidentifier():
            # a plain key, [A-Za-z_][A-Za-z0-9_]*: what an ASCII identifier is
            out.append(f".{part}")
        else:
            shown = part if len(part) <= 60 else f"{part[:40]}…{part[-10:]}"
            out.append(f"[{json.dumps(shown, ensure_ascii=False)}]")
    return "".join(out)


class ArgumentsDecodeError(ValueError):
    """The argument text is not one strict JSON value; the message says why in a phrase."""


def _reject_constant(name: str) -> Any:
    raise ArgumentsDecodeError(f"{name} is not valid JSON; send a number or a string")


class NumberOverflowError(ArgumentsDecodeError):
    """A JSON number too large for a 64-bit float (``1e400``): valid grammar, no value."""


class OverflowedNumber(float):
    """An infinite float that remembers the JSON number text it overflowed from."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> OverflowedNumber:
        number = super().__new__(cls, text)
        number.text = text
        return number


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NumberOverflowError(f"the number {text[:40]} is too large for a float")
    return value


def _any_float(text: str) -> float:
    value = float(text)
    return OverflowedNumber(text) if math.isinf(value) else value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ArgumentsDecodeError(f"duplicate key {key[:80]!r}; send each key once")
            seen.add(key)
    return result


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys,
    parse_constant=_reject_constant,
    parse_float=_finite_float,
)
# The decoder's C scanner, called directly (typeshed does not declare the attribute).
_Scanner = Callable[[str, int], tuple[Any, int]]
_SCAN: _Scanner = vars(_DECODER)["scan_once"]
_SPACE_CHARS = " \t\n\r"  # JSON's whitespace, as json.decoder skips it
_SPACE = re.compile(f"[{_SPACE_CHARS}]*")


def _space_end(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


# The same, but numbers that overflow a float decode to `OverflowedNumber` (infinite), so
# that the check after decoding can name the field that holds one.
_KEEPING_OVERFLOW = json.JSONDecoder(
    object_pairs_hook=_unique_keys,
    parse_constant=_reject_constant,
    parse_float=_any_float,
)
_SCAN_KEEPING_OVERFLOW: _Scanner = vars(_KEEPING_OVERFLOW)["scan_once"]


def decode_arguments(text: str, *, keep_overflow: bool = False) -> Any:
    """Decode one strict JSON value, or raise `ArgumentsDecodeError` saying what is wrong.

    A number too large for a float raises `NumberOverflowError`, unless `keep_overflow`
    asks for it as an infinite `OverflowedNumber` (for a caller that reports its path).
    """
    scan = _SCAN_KEEPING_OVERFLOW if keep_overflow else _SCAN
    try:
        # JSONDecoder.decode, without its two layers of Python calls (the hot path)
        try:
            value, end = scan(text, _space_end(text, 0) if text[:1] in _SPACE_CHARS else 0)
        except StopIteration as stop:
            raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        if end != len(text) and (end := _space_end(text, end)) != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
        return value
    except ArgumentsDecodeError:
        raise
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            reason = f"extra text after the JSON value at position {exc.pos}"
        elif exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            # An unterminated string runs to the end of the text: it was cut inside it.
            reason = "the text ends before the JSON value is complete (was it cut off?)"
        else:
            reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise ArgumentsDecodeError(reason) from None
    except RecursionError:
        raise ArgumentsDecodeError("the JSON is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python allows
        raise ArgumentsDecodeError(str(exc)) from None


def parse_tool_arguments(raw: Any) -> Any:
    """Normalise provider arguments: None or blank -> {}, JSON object text -> dict.

    Anything else (other JSON, broken text, non-strings) is returned unchanged so that
    the registry can reject it with a precise message.
    """
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = decode_arguments(raw)
        except ArgumentsDecodeError:
            return raw
        return value if isinstance(value, dict) else raw
    return raw


# json-repair parses recursively and fails on deep nesting with RecursionError or
# ValueError (about 150 levels of '[{"a":' is already too deep for it): text nested
# deeper than this is not handed to it at all.
REPLAY_REPAIR_MAX_DEPTH = 64
_BRACKET_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def _bracket_depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (an unterminated string ends it)."""
    depth = deepest = 0
    for token in _BRACKET_OR_STRING.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def repair_arguments_for_replay(raw: Any) -> dict[str, Any]:
    """Best-effort object for replaying stored history to a provider. Never for execution.

    Valid object text is decoded as is; anything else goes through json-repair (the
    ``repair`` extra), and what still is not an object becomes ``{}``. Never raises for
    any `raw`: text nested deeper than `REPLAY_REPAIR_MAX_DEPTH` levels, and text
    json-repair itself fails on, also become ``{}`` (logged with the reason).
    """
    parsed = parse_tool_arguments(raw)
    if isinstance(parsed, dict):
        return parsed
    if not isinstance(raw, str):
        return {}
    try:
        import json_repair
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "repair_arguments_for_replay needs json-repair: pip install 'toolbridge[repair]'"
        ) from exc
    depth = _bracket_depth(raw)
    if depth > REPLAY_REPAIR_MAX_DEPTH:
        logger.info(
            "stored arguments nest %d levels deep (more than %d): replayed as {}",
            depth,
            REPLAY_REPAIR_MAX_DEPTH,
        )
        return {}
    try:
        repaired = json_repair.loads(raw)
    except Exception as exc:  # a dependency's failure on untrusted text: this path never raises
        logger.info(
            "json-repair cannot repair stored arguments (%s: %s): replayed as {}",
            type(exc).__name__,
            exc,
        )
        return {}
    return repaired if isinstance(repaired, dict) else {}
