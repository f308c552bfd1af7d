"""How problems with a call's arguments read: the `ArgumentIssue`s a model gets back.

Unknown keys are named with the allowed keys and the nearest one ("did you mean ..."),
jsonschema-rs errors are rendered with their JSON path, every text is shortened, and a
call's issues are capped in number and characters so one bad call cannot flood the
model's context. `castable` says which validator errors a cast pass might fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from toolbridge.core.calls import format_path
from toolbridge.core.errors import ArgumentIssue
from toolbridge.core.naming import NameIndex

__all__ = ["MAX_ISSUES", "MAX_RENDERED"]

MAX_ISSUES = 20
_MAX_MESSAGE = 300


def shorten(text: str, limit: int = _MAX_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    return f"{text[:head]}…[{len(text) - limit} characters cut]…{text[-tail:]}"


UNKNOWN_KEY_OBJECTS = 3  # objects whose unknown keys are listed; the rest are counted
_KEYS_SHOWN = 3  # unknown keys named per object
_ALLOWED_SHOWN = 12  # allowed keys named per object


def unknown_keys_message(keys: list[str], allowed: Sequence[str]) -> str:
    """One line for all unknown keys of one object: the first few named, the rest
    counted, the allowed keys, and the nearest allowed key to each one named."""
    shown = ", ".join(repr(shorten(key, 40)) for key in keys[:_KEYS_SHOWN])
    if len(keys) > _KEYS_SHOWN:
        shown += f" and {len(keys) - _KEYS_SHOWN:,} more"
    message = f"unknown key{'s' if len(keys) > 1 else ''} {shown}"
    if not allowed:
        return f"{message}: this takes no keys"
    names = ", ".join(shorten(name, 40) for name in allowed[:_ALLOWED_SHOWN])
    if len(allowed) > _ALLOWED_SHOWN:
        names += f" and {len(allowed) - _ALLOWED_SHOWN} more"
    message += f"; allowed keys: {names}"
    index = NameIndex(allowed)
    close = [
        (key, _either(found)) for key in keys[:_KEYS_SHOWN] if (found := index.suggest(key, 1))
    ]
    if len(keys) == 1 and close:
        message += f" (did you mean {close[0][1]}?)"
    elif close:
        pairs = ", ".join(f"{c} for {shorten(k, 40)!r}" for k, c in close)
        message += f" (did you mean {pairs}?)"
    return message


def _either(names: Sequence[str]) -> str:
    """``'a'``, or ``'a' or 'b'`` when two names are equally close."""
    return " or ".join(repr(shorten(name, 40)) for name in names)


MAX_RENDERED = 2_000  # characters of issue text sent back for one call, at most


def capped(issues: Sequence[ArgumentIssue]) -> tuple[ArgumentIssue, ...]:
    """At most `MAX_ISSUES` issues and about `MAX_RENDERED` characters; the rest counted."""
    kept: list[ArgumentIssue] = []
    size = 0
    for issue in issues:
        size += len(issue.path) + len(issue.message) + 8
        if len(kept) >= MAX_ISSUES or (kept and size > MAX_RENDERED):
            break
        kept.append(issue)
    if len(kept) < len(issues):
        more = len(issues) - len(kept)
        kept.append(ArgumentIssue("$", f"... and {more} more problems"))
    return tuple(kept)


# Errors a cast may fix: a wrong type ("60" for an integer), a union no branch took,
# an unknown key (the cast pass names the allowed ones), a false schema.
_CASTABLE_KINDS = frozenset(
    {"Type", "AnyOf", "OneOfNotValid", "OneOfMultipleValid", "AdditionalProperties", "FalseSchema"}
)


def castable(error: Any) -> bool:
    kind = type(error.kind).__name__
    if kind in _CASTABLE_KINDS:
        return True
    if kind in ("Enum", "Constant"):  # "2" for enum [1, 2], 7 for const "7"
        options = error.kind.options if kind == "Enum" else [error.kind.expected_value]
        instance = error.instance
        return not (isinstance(instance, str) and all(isinstance(o, str) for o in options))
    return False


def render_errors(errors: Iterable[Any], unknown_key_paths: set[str]) -> Iterator[ArgumentIssue]:
    for error in errors:
        path = format_path(error.instance_path)
        kind = type(error.kind).__name__
        if kind == "AdditionalProperties" and path in unknown_key_paths:
            continue
        if kind == "Required":
            missing = shorten(str(error.kind.property), 80)
            yield ArgumentIssue(path, f"missing required key {missing!r}")
        else:
            yield ArgumentIssue(path, shorten(error.message))
