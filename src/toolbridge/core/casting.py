"""Casting a model's argument values conservatively toward their schema's types.

"60" -> 60 where an integer is wanted, JSON text -> object where an object is wanted,
"yes" -> True for a boolean: each cast is recorded as a `Repair`. Casting never loses
information and never touches a value that already has the type its schema node wants.
These are the scalar and container casters the schema compiler
(`toolbridge.core.schema_compiler`) assembles into one caster per tool, and the state
one cast pass collects.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from toolbridge.core.calls import (
    ArgumentsDecodeError,
    Location,
    Repair,
    RepairAction,
    decode_arguments,
    format_path,
)
from toolbridge.core.errors import ArgumentIssue
from toolbridge.core.schema_issues import UNKNOWN_KEY_OBJECTS, unknown_keys_message

__all__ = ["Caster"]


class CastState:
    """What one cast pass collects: the repairs made and the objects with unknown keys.

    Unknown keys are reported per object, for the first `UNKNOWN_KEY_OBJECTS` objects;
    `unknown_paths` holds every such object, so the validator does not report them again.
    """

    __slots__ = ("issues", "repairs", "unknown_paths")

    def __init__(self) -> None:
        self.repairs: list[Repair] = []
        self.issues: list[ArgumentIssue] = []
        self.unknown_paths: list[str] = []

    def unknown_keys(self, keys: list[str], allowed: Sequence[str], location: Location) -> None:
        path = format_path(location)
        self.unknown_paths.append(path)
        if len(self.unknown_paths) <= UNKNOWN_KEY_OBJECTS:
            self.issues.append(ArgumentIssue(path, unknown_keys_message(keys, allowed)))

    def absorb(self, other: CastState) -> None:
        """Take over what a trial cast (of a union branch) found."""
        self.repairs.extend(other.repairs)
        for issue, path in zip(other.issues, other.unknown_paths, strict=False):
            self.unknown_paths.append(path)
            if len(self.unknown_paths) <= UNKNOWN_KEY_OBJECTS:
                self.issues.append(issue)
        self.unknown_paths.extend(other.unknown_paths[len(other.issues) :])


Caster = Callable[[Any, Location, CastState], Any]

NOTHING: Any = object()
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*\Z")
_NUMBER_TEXT = re.compile(r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*\Z")
_BOOL_TEXT = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}


def _is_integer(value: Any) -> bool:
    cls = type(value)
    if cls is int:
        return True
    if cls is float:
        return bool(value.is_integer())
    return isinstance(value, int) and cls is not bool


def _is_number(value: Any) -> bool:
    cls = type(value)
    return cls is int or cls is float or (isinstance(value, int | float) and cls is not bool)


MATCHES: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "null": lambda value: value is None,
}


def _to_integer(value: Any) -> Any:
    if isinstance(value, str) and _INT_TEXT.match(value):
        try:
            return int(value)
        except ValueError:  # more digits than Python's int parser allows
            return NOTHING
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return NOTHING


def _to_number(value: Any) -> Any:
    if isinstance(value, str) and _NUMBER_TEXT.match(value):
        if _INT_TEXT.match(value):
            return _to_integer(value)
        number = float(value)
        # Lossless only: the float must read back as the same decimal value, so
        # "0.10000000000000000001" (which would become 0.1) stays text for the validator.
        if not math.isfinite(number) or not _same_decimal(number, value.strip()):
            return NOTHING
        return number
    return NOTHING


def _same_decimal(number: float, text: str) -> bool:
    """Whether `text` is exactly the decimal value of `number`. An exponent beyond what
    `decimal` represents ("0e99999999999999999999") is not proven equal: no cast."""
    try:
        return Decimal(repr(number)) == Decimal(text)
    except InvalidOperation:
        return False


def _to_boolean(value: Any) -> Any:
    if isinstance(value, str):
        return _BOOL_TEXT.get(value.strip().lower(), NOTHING)
    return NOTHING


def _to_string(value: Any) -> Any:
    if isinstance(value, bool):
        return NOTHING
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # more digits than Python converts to text
            return NOTHING
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return NOTHING


def _json_text_to(expected: type) -> Callable[[Any], Any]:
    opener = "{" if expected is dict else "["

    def convert(value: Any) -> Any:
        if not isinstance(value, str) or not value.lstrip().startswith(opener):
            return NOTHING
        try:
            decoded = decode_arguments(value)
        except ArgumentsDecodeError:
            return NOTHING
        return decoded if isinstance(decoded, expected) else NOTHING

    return convert


CONVERTS: dict[str, Callable[[Any], Any]] = {
    "integer": _to_integer,
    "number": _to_number,
    "boolean": _to_boolean,
    "string": _to_string,
    "object": _json_text_to(dict),
    "array": _json_text_to(list),
}


# The exact types that already have a scalar type as they are: returned untouched at once.
_AS_IS: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def scalar_caster(type_name: str) -> Caster:
    """The caster of a node with one scalar type and nothing below it: the hot case.

    A value of an exact type in `_AS_IS` is returned first thing; text for an integer
    (the commonest cast) is converted inline; the rest takes the general steps.
    """
    matches = MATCHES[type_name]
    convert = CONVERTS[type_name]
    integral = type_name == "integer"
    action: RepairAction = "decode_json" if type_name in ("object", "array") else "cast"
    as_is = _AS_IS[type_name]
    int_text = _INT_TEXT.match

    def cast_scalar(value: Any, location: Location, state: CastState) -> Any:
        cls = type(value)
        if cls in as_is:
            return value
        if (
            integral
            and cls is str
            and ((value.isdigit() and value.isascii()) or int_text(value) is not None)
        ):
            try:
                new = int(value)
            except ValueError:  # more digits than Python's int parser allows
                return value
            state.repairs.append(Repair(location, "cast", value, new))
            return new
        if matches(value):
            if integral and type(value) is float:
                state.repairs.append(Repair(location, "cast", value, int(value)))
                return int(value)
            return value
        new = convert(value)
        if new is NOTHING:
            return value
        state.repairs.append(Repair(location, action, value, new))
        return new

    return cast_scalar


def container_caster(expected: type, inner: Caster) -> Caster:
    """The caster of an object-only or array-only node: descend, or decode JSON text."""
    decode = CONVERTS["object" if expected is dict else "array"]

    def cast_container(value: Any, location: Location, state: CastState) -> Any:
        if isinstance(value, expected):
            return inner(value, location, state)
        new = decode(value)
        if new is NOTHING:
            return value
        state.repairs.append(Repair(location, "decode_json", value, new))
        return inner(new, location, state)

    return cast_container
