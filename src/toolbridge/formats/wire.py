"""Typed readers for provider JSON: the one place wire shapes are checked.

Model output and stored histories are untrusted input. Every public entry point of
`toolbridge.formats` reads its payload through these helpers, so a field of the wrong
type (a list where a string belongs, ``null`` where an object belongs, a payload
nested thousands of levels deep) becomes a `FormatError` naming the JSON path, never
a ``TypeError``, ``AttributeError``, ``KeyError`` or ``RecursionError`` from deep
inside a parser.

The rule: a field the provider documents with a type is read with the reader of that
type. Missing or ``null`` reads as None; present with another type is a `FormatError`.
Fields a parser does not use are never looked at.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from toolbridge.formats.types import FormatError

__all__ = [
    "MAX_DEPTH",
    "as_payload",
    "check_depth",
    "definition_items",
    "dumped",
    "json_type",
    "load_json",
    "opt_bool",
    "opt_id",
    "opt_index",
    "opt_list",
    "opt_obj",
    "opt_str",
    "req_obj",
]

MAX_DEPTH = 256
"""The deepest nesting of objects and arrays a payload may have. Real payloads stay far
below it; past it, the recursive steps after parsing (copies, JSON encoding, schema
walks) would exhaust Python's stack."""

_JSON_TYPES = (
    (bool, "a boolean"),
    (str, "a string"),
    (int, "a number"),
    (float, "a number"),
    (Mapping, "an object"),
    (list, "an array"),
    (tuple, "an array"),
)


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages (``an array``, ``null`` ...)."""
    if value is None:
        return "null"
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    return f"a Python {type(value).__name__}"


def _wrong(where: str, expected: str, value: Any) -> FormatError:
    return FormatError(f"{where} must be {expected}, got {json_type(value)}")


def load_json(text: str | bytes | bytearray, what: str) -> Any:
    """Decode JSON text; invalid or too deeply nested text is a `FormatError`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise FormatError(f"{what} is nested deeper than JSON decoding allows") from None
    except ValueError as exc:
        raise FormatError(f"{what} is not valid JSON: {exc}") from None
    check_depth(value, what)
    return value


def as_payload(payload: Any, provider: str) -> dict[str, Any]:
    """A response as a plain dict: JSON text, a dict, or an SDK model (dumped by alias).

    The one entry check of every whole-response parser: an object, nested no deeper
    than `MAX_DEPTH`, else a `FormatError`.
    """
    if isinstance(payload, str | bytes | bytearray):
        payload = load_json(payload, f"the {provider} response")
    else:
        payload = dumped(payload)
        check_depth(payload, f"the {provider} response")
    if not isinstance(payload, Mapping):
        raise FormatError(f"a {provider} response must be a JSON object, got {json_type(payload)}")
    return dict(payload)


def dumped(value: Any) -> Any:
    """An SDK model as its wire JSON (``model_dump`` by alias); anything else as it is."""
    if isinstance(value, Mapping | list | str | int | float | bool) or value is None:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return value


def definition_items(tools: Any, what: str = "tools") -> list[Mapping[str, Any]]:
    """A ``tools`` array read back by `parse_definitions`: a list of objects, depth-checked."""
    tools = dumped(tools)
    if isinstance(tools, str | bytes | bytearray):
        tools = load_json(tools, what)
    if isinstance(tools, Mapping) or not isinstance(tools, Iterable):
        raise _wrong(what, "an array of tool objects", tools)
    items = [dumped(item) for item in tools]
    for index, item in enumerate(items):
        req_obj(item, f"{what}[{index}]")
    check_depth(items, what)
    return items


_SCALARS = frozenset({str, int, float, bool, type(None)})


def check_depth(value: Any, what: str, limit: int = MAX_DEPTH) -> None:
    """Refuse a value whose objects and arrays nest deeper than `limit`.

    Level by level, without recursion; exact types are tested first because this runs
    on every stream event.
    """
    level = [value]
    depth = 0
    while level:
        depth += 1
        below: list[Any] = []
        for node in level:
            kind = type(node)
            if kind is dict:
                below.extend(node.values())
            elif kind is list:
                below.extend(node)
            elif kind in _SCALARS:
                continue
            elif isinstance(node, Mapping):
                below.extend(node.values())
            elif isinstance(node, list | tuple):
                below.extend(node)
            else:
                continue
            if depth > limit:
                raise FormatError(f"{what} is nested deeper than {limit} levels")
        level = below


def req_obj(value: Any, where: str) -> Mapping[str, Any]:
    """`value` as an object, else a `FormatError` at `where`."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise _wrong(where, "an object", value)


def opt_obj(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    """``parent[key]`` as an object; None when missing or null."""
    value = parent.get(key)
    if value is None or type(value) is dict or isinstance(value, Mapping):
        return value
    raise _wrong(f"{where}.{key}", "an object", value)


def opt_list(parent: Mapping[str, Any], key: str, where: str) -> list[Any] | None:
    """``parent[key]`` as an array; None when missing or null."""
    value = parent.get(key)
    if value is None or type(value) is list or isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    raise _wrong(f"{where}.{key}", "an array", value)


def opt_str(parent: Mapping[str, Any], key: str, where: str) -> str | None:
    """``parent[key]`` as a string; None when missing or null."""
    value = parent.get(key)
    if value is None or type(value) is str or isinstance(value, str):
        return value
    raise _wrong(f"{where}.{key}", "a string", value)


def opt_bool(parent: Mapping[str, Any], key: str, where: str) -> bool | None:
    """``parent[key]`` as a boolean; None when missing or null."""
    value = parent.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise _wrong(f"{where}.{key}", "a boolean", value)


def opt_index(parent: Mapping[str, Any], key: str, where: str) -> int | None:
    """``parent[key]`` as an integer (not a boolean); None when missing or null."""
    value = parent.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _wrong(f"{where}.{key}", "an integer", value)


def opt_id(parent: Mapping[str, Any], key: str, where: str) -> str | None:
    """A call id: a non-empty string, or None when missing, null or empty (one is then
    generated). Any other type is refused, never passed on as an id."""
    return opt_str(parent, key, where) or None
