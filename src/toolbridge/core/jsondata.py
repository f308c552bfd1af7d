"""Is a value plain JSON data? The boundary check every argument value passes first.

Arguments reach `prepare_call` as text, bytes or Python objects built by a provider
parser or a developer. Before casting and validation, one walk makes sure the value
is data a JSON encoder can write and a tool can rely on: objects with text keys,
arrays, finite numbers, integers of at most 4,300 digits, booleans, null and text
that is valid Unicode (no lone surrogate such as ``"\\ud800"``, which JSON's grammar
allows but UTF-8 cannot encode), nested at most `MAX_DEPTH` levels. Each problem
names its JSON path, so the model learns which field to fix; the walk is iterative,
so no input can exhaust the stack.
"""

from __future__ import annotations

import marshal
import math
import re
from collections.abc import Iterator
from typing import Any

from toolbridge.core.calls import Location, format_path
from toolbridge.core.errors import ArgumentIssue

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "json_data_issues",
    "leaves_look_plain",
    "nesting",
    "text_may_hide_problems",
]

# Levels of nested objects and arrays accepted in arguments. jsonschema-rs refuses data
# deeper than 255 levels ("Recursion limit reached"); real arguments nest a few levels.
MAX_DEPTH = 128

# Python writes and reads at most this many digits of an integer (sys.int_info's
# default_max_str_digits): the strict decoder refuses longer ones, and so does this.
MAX_INT_DIGITS = 4300
_BIGGEST = 10**MAX_INT_DIGITS
_SURROGATE = re.compile("[\ud800-\udfff]")
_KINDS = "text, a number, true/false, null, an array or an object"

# A linked path: (parent link, key or index); materialised only when a problem is found.
_Link = tuple[Any, str | int] | None


def text_may_hide_problems(text: str) -> bool:
    """Whether JSON `text` might decode to something `json_data_issues` would refuse.

    `calls.decode_arguments` already refuses what JSON cannot hold (NaN, overflowing
    numbers, duplicate keys); what it lets through is a lone surrogate (from a
    ``\\uD800`` escape or in the text itself) and deep nesting. Both leave marks this
    checks at C speed, so text without them skips the walk (nesting deeper than
    `MAX_DEPTH` takes more than twice as many characters).
    """
    if "\\" in text and "\\u" in text:  # one memchr first: most text has no backslash
        return True
    if not text.isascii() and _SURROGATE.search(text) is not None:
        return True
    return len(text) > 2 * MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH


# In `marshal`'s bytes: the UTF-8 form of a surrogate (ED A0..BF), which no real
# character has, and the last two bytes of a little-endian double whose exponent is all
# ones (an infinity or a NaN) after its type code ("g", or "g" | 0x80 for a double
# marshal refers to twice). Other bytes can match too: that only sends a value down
# the full walk. Each is searched for only where its rare byte is present (memchr).
_SURROGATE_UTF8 = re.compile(b"\xed[\xa0-\xbf]")
_NON_FINITE_DOUBLE = re.compile(b"[g\xe7].{6}[\xf0-\xff][\x7f\xff]", re.DOTALL)
# An integer of more than MAX_INT_DIGITS digits takes more marshal bytes than this.
_MARSHAL_LIMIT = 1_800


def leaves_look_plain(value: Any) -> bool:
    """Whether `value`'s leaves pass the checks of `json_data_issues`, as far as one C
    pass (`marshal`) shows: exact built-in types only (no subclass, no Decimal, no
    arbitrary object), no lone surrogate, no infinity or NaN, no huge integer.

    It does not see which containers and keys hold what (a set, bytes, a tuple, an int
    key pass `marshal`), nor the depth: a caller relies on it only together with a
    validator that type-checks every value and key (`CompiledSchema` with a fully typed
    schema). False means "walk it", never "it is not plain".
    """
    try:
        data = marshal.dumps(value)
    except ValueError:  # a subclass or a type marshal does not know, or too deep
        return False
    if len(data) > _MARSHAL_LIMIT:
        return False
    if b"\xed" in data and _SURROGATE_UTF8.search(data) is not None:
        return False
    return not (
        (b"\x7f" in data or b"\xff" in data) and _NON_FINITE_DOUBLE.search(data) is not None
    )


def json_data_issues(value: Any, *, limit: int = 21) -> list[ArgumentIssue]:
    """Every place (up to `limit`) where `value` is not plain JSON data, with its path."""
    if _plain(value):
        return []
    issues: list[ArgumentIssue] = []
    for link, message in _problems(value):
        issues.append(ArgumentIssue(format_path(_location(link)), message))
        if len(issues) >= limit:
            break
    return issues


def _plain(value: Any) -> bool:
    """Whether `value` is plain JSON data: the fast walk over exact built-in types (what
    decoders and SDKs produce), with no paths kept. Anything else - a subclass, a
    problem - answers False and `_problems` walks again to say what and where."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if type(container) is dict:
            for key in container:
                if type(key) is not str or not (key.isascii() or _SURROGATE.search(key) is None):
                    return False
            children: Any = container.values()
        else:
            children = container
        for item in children:
            cls = type(item)
            if cls is str:
                if not item.isascii() and _SURROGATE.search(item) is not None:
                    return False
            elif cls is dict or cls is list:
                stack.append((item, depth + 1))
            elif cls is float:
                if not math.isfinite(item):
                    return False
            elif cls is int:
                if not -_BIGGEST < item < _BIGGEST:
                    return False
            elif not (cls is bool or item is None):
                return False
    return True


def nesting(value: Any) -> int:
    """How many levels of objects and arrays (dicts, lists, tuples) `value` nests: 0 for
    a scalar. Iterative, so a parsed file of any depth can be measured before a
    recursive step (a copy, an encoder, a schema walk) meets it."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list | tuple):
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in item)
    return deepest


def _location(link: _Link) -> Location:
    parts: list[str | int] = []
    while link is not None:
        link, key = link
        parts.append(key)
    return tuple(reversed(parts))


def _problems(value: Any) -> Iterator[tuple[_Link, str]]:
    stack: list[tuple[Any, _Link, int]] = [(value, None, 1)]
    while stack:
        item, link, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and (found := _SURROGATE.search(item)) is not None:
                yield link, _surrogate_message("the text", found)
        elif isinstance(item, dict):
            if depth > MAX_DEPTH:
                yield link, f"the arguments nest deeper than {MAX_DEPTH} levels"
                continue
            for key, child in reversed(item.items()):
                if not isinstance(key, str):
                    yield link, f"the key {_shown(key)} is not text: JSON object keys are text"
                    continue
                if not key.isascii() and (found := _SURROGATE.search(key)) is not None:
                    yield link, _surrogate_message(f"the key {_shown(key)}", found)
                    continue
                stack.append((child, (link, key), depth + 1))
        elif isinstance(item, list | tuple):
            if depth > MAX_DEPTH:
                yield link, f"the arguments nest deeper than {MAX_DEPTH} levels"
                continue
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], (link, index), depth + 1))
        elif isinstance(item, float):
            if not math.isfinite(item):
                yield link, _non_finite_message(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            if not -_BIGGEST < item < _BIGGEST:
                yield (
                    link,
                    (
                        f"the integer has more than {MAX_INT_DIGITS:,} digits, more than JSON "
                        "text carries here; send a smaller number"
                    ),
                )
        elif item is None or isinstance(item, bool):
            continue
        else:
            name = type(item).__name__
            yield link, f"a Python {name} is not JSON data; send {_KINDS}"


def _surrogate_message(what: str, found: re.Match[str]) -> str:
    code = f"\\u{ord(found.group()):04x}"
    return (
        f"{what} holds a lone surrogate {code} at position {found.start()}, which is not "
        "valid Unicode and cannot be encoded as UTF-8; send the character itself (or a "
        "complete surrogate pair), or leave it out"
    )


def _non_finite_message(number: float) -> str:
    text = getattr(number, "text", None) or repr(number)
    if math.isnan(number):
        return f"{text} is not a number; send a finite number"
    return (
        f"the number {text[:40]} is too large: it overflows a 64-bit float "
        "(at most about 1.8e308); send a smaller number"
    )


def _shown(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 60 else f"{text[:50]}…"
