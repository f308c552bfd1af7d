"""Parameter schemas: check them, and compile them into a caster + validator.

`CompiledSchema` is built once per tool, at registration. The result casts a model's
arguments conservatively ("60" -> 60 where an integer is wanted, JSON text -> object
where an object is wanted) and validates them with a compiled jsonschema-rs
validator (draft 2020-12 unless ``$schema`` says otherwise), collecting every error
with its JSON path.

Casting never loses information and never touches a value that already has the
type its schema node wants; union branches are taken only if the cast value then
validates against that branch.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

import jsonschema_rs

from toolbridge.core.calls import (
    ArgumentsDecodeError,
    Location,
    Repair,
    RepairAction,
    decode_arguments,
    format_path,
)
from toolbridge.core.errors import ArgumentIssue, ToolDefinitionError
from toolbridge.core.frozen import freeze, thaw
from toolbridge.core.jsondata import MAX_DEPTH, json_data_issues, leaves_look_plain
from toolbridge.core.naming import NameIndex

__all__ = [
    "EMPTY_OBJECT_SCHEMA",
    "Checked",
    "CompiledSchema",
    "check_parameters_schema",
]

MAX_ISSUES = 20
_MAX_MESSAGE = 300


EMPTY_OBJECT_SCHEMA: Mapping[str, Any] = freeze({"type": "object", "properties": {}})


# --- checking -----------------------------------------------------------------------


def check_parameters_schema(schema: object, *, owner: str) -> None:
    """Refuse anything that is not a valid JSON Schema of type object, saying why."""
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"{owner}: parameters must be a JSON Schema object (a dict), "
            f"got {type(schema).__name__}"
        )
    if schema.get("type") != "object":
        raise ToolDefinitionError(
            f'{owner}: parameters must be a JSON Schema with "type": "object" at the top, '
            f"got type {schema.get('type')!r}"
        )
    try:
        jsonschema_rs.meta.validate(thaw(schema), registry=_no_fetching())
    except jsonschema_rs.ValidationError as exc:
        path = format_path(exc.instance_path)
        raise ToolDefinitionError(
            f"{owner}: parameters is not a valid JSON Schema: {exc.message} (at {path})"
        ) from None
    except jsonschema_rs.ReferencingError as exc:
        raise ToolDefinitionError(f"{owner}: parameters has an unknown $schema: {exc}") from None


def _refuse_fetch(uri: str) -> Any:
    raise ValueError(
        f"{uri} is not fetched: toolbridge never downloads schemas (put the definition "
        "under $defs and refer to it with #/$defs/...)"
    )


@functools.cache
def _no_fetching() -> Any:
    """A registry that knows the standard meta-schemas and downloads nothing: a schema's
    $schema or $ref must never make registration reach the network (SSRF, hangs)."""
    return jsonschema_rs.Registry([], retriever=_refuse_fetch)


# --- messages -------------------------------------------------------------------------


def _shorten(text: str, limit: int = _MAX_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    return f"{text[:head]}…[{len(text) - limit} characters cut]…{text[-tail:]}"


# --- casting ------------------------------------------------------------------------


class _CastState:
    """What one cast pass collects: the repairs made and the objects with unknown keys.

    Unknown keys are reported per object, for the first `_UNKNOWN_KEY_OBJECTS` objects;
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
        if len(self.unknown_paths) <= _UNKNOWN_KEY_OBJECTS:
            self.issues.append(ArgumentIssue(path, _unknown_keys_message(keys, allowed)))

    def absorb(self, other: _CastState) -> None:
        """Take over what a trial cast (of a union branch) found."""
        self.repairs.extend(other.repairs)
        for issue, path in zip(other.issues, other.unknown_paths, strict=False):
            self.unknown_paths.append(path)
            if len(self.unknown_paths) <= _UNKNOWN_KEY_OBJECTS:
                self.issues.append(issue)
        self.unknown_paths.extend(other.unknown_paths[len(other.issues) :])


Caster = Callable[[Any, Location, _CastState], Any]

_NOTHING: Any = object()
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


_MATCHES: dict[str, Callable[[Any], bool]] = {
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
            return _NOTHING
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return _NOTHING


def _to_number(value: Any) -> Any:
    if isinstance(value, str) and _NUMBER_TEXT.match(value):
        if _INT_TEXT.match(value):
            return _to_integer(value)
        number = float(value)
        # Lossless only: the float must read back as the same decimal value, so
        # "0.10000000000000000001" (which would become 0.1) stays text for the validator.
        if not math.isfinite(number) or not _same_decimal(number, value.strip()):
            return _NOTHING
        return number
    return _NOTHING


def _same_decimal(number: float, text: str) -> bool:
    """Whether `text` is exactly the decimal value of `number`. An exponent beyond what
    `decimal` represents ("0e99999999999999999999") is not proven equal: no cast."""
    try:
        return Decimal(repr(number)) == Decimal(text)
    except InvalidOperation:
        return False


def _to_boolean(value: Any) -> Any:
    if isinstance(value, str):
        return _BOOL_TEXT.get(value.strip().lower(), _NOTHING)
    return _NOTHING


def _to_string(value: Any) -> Any:
    if isinstance(value, bool):
        return _NOTHING
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # more digits than Python converts to text
            return _NOTHING
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return _NOTHING


def _json_text_to(expected: type) -> Callable[[Any], Any]:
    opener = "{" if expected is dict else "["

    def convert(value: Any) -> Any:
        if not isinstance(value, str) or not value.lstrip().startswith(opener):
            return _NOTHING
        try:
            decoded = decode_arguments(value)
        except ArgumentsDecodeError:
            return _NOTHING
        return decoded if isinstance(decoded, expected) else _NOTHING

    return convert


_CONVERTS: dict[str, Callable[[Any], Any]] = {
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


def _scalar_caster(type_name: str) -> Caster:
    """The caster of a node with one scalar type and nothing below it: the hot case.

    A value of an exact type in `_AS_IS` is returned first thing; text for an integer
    (the commonest cast) is converted inline; the rest takes the general steps.
    """
    matches = _MATCHES[type_name]
    convert = _CONVERTS[type_name]
    integral = type_name == "integer"
    action: RepairAction = "decode_json" if type_name in ("object", "array") else "cast"
    as_is = _AS_IS[type_name]
    int_text = _INT_TEXT.match

    def cast_scalar(value: Any, location: Location, state: _CastState) -> Any:
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
        if new is _NOTHING:
            return value
        state.repairs.append(Repair(location, action, value, new))
        return new

    return cast_scalar


class _Compiler:
    """Turns a schema into a tree of caster closures; nodes that can never cast are None."""

    _COMPOSITION = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
    # Keywords next to "properties" that admit other keys, or combine with other schemas.
    _KEEPS_OPEN = (
        *_COMPOSITION,
        "$ref",
        "additionalProperties",
        "unevaluatedProperties",
        "dependentSchemas",
        "propertyNames",
    )

    def __init__(self, root: Mapping[str, Any], validators: _SubschemaValidators) -> None:
        self.root = root
        self.validators = validators
        self.by_pointer: dict[str, list[Caster | None]] = {}
        self.strictness: dict[str, set[bool]] = {}
        # Object nodes that refuse unknown keys by toolbridge's rule (no additionalProperties).
        self.closed_by_rule: set[str] = set()
        # Whether casting can change a value that already validates (3.0 -> 3 for integers).
        self.normalizes = False
        # Nodes being built, with the structural depth (objects and arrays descended
        # into) at which they started: a cycle back to one at the same depth is a $ref
        # cycle that never describes a value.
        self.building: dict[str, int] = {}
        self.depth = 0

    def resolve(self, ref: str) -> tuple[Mapping[str, Any], str] | None:
        """A local JSON-pointer ``$ref`` ("#/$defs/X"); None for anything else (anchors,
        other documents): those nodes are left to the validator, never guessed."""
        if ref != "#" and not ref.startswith("#/"):
            return None
        node: Any = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return (node, ref[1:]) if isinstance(node, Mapping) else None

    def node(self, schema: Any, pointer: str, strict_keys: bool) -> Caster | None:
        if not isinstance(schema, Mapping):
            return None
        self.strictness.setdefault(pointer, set()).add(strict_keys)
        key = f"{pointer}|{strict_keys}"
        known = self.by_pointer.get(key)
        if known is not None:
            if key not in self.building:
                return known[0]  # the same $defs node again: share its caster
            if self.building[key] == self.depth:
                raise ToolDefinitionError(
                    f"parameters schema: #{pointer} refers to itself through $ref, anyOf, "
                    "oneOf or allOf alone, so it never describes a value; give the cycle "
                    "a branch that is an object or an array"
                )
            return lambda value, path, state: (
                known[0](value, path, state) if known[0] is not None else value
            )
        cell: list[Caster | None] = [None]
        self.by_pointer[key] = cell
        self.building[key] = self.depth
        cell[0] = self._build(schema, pointer, strict_keys)
        del self.building[key]
        return cell[0]

    def inside(self, schema: Any, pointer: str) -> Caster | None:
        """The caster of a property's or an item's schema: one structural level down."""
        self.depth += 1
        try:
            return self.node(schema, pointer, True)
        finally:
            self.depth -= 1

    def _build(self, schema: Mapping[str, Any], pointer: str, strict_keys: bool) -> Caster | None:
        steps: list[Caster] = []
        base = self._typed(schema, pointer, strict_keys)
        if base is not None:
            steps.append(base)
        ref = schema.get("$ref")
        if isinstance(ref, str) and (target := self.resolve(ref)) is not None:
            inner = self.node(target[0], target[1], strict_keys and base is None)
            if inner is not None:
                steps.append(inner)
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword)
            if isinstance(branches, list):
                union = self._union(branches, f"{pointer}/{keyword}")
                if union is not None:
                    steps.append(union)
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            for index, branch in enumerate(all_of):
                caster = self.node(branch, f"{pointer}/allOf/{index}", strict_keys=False)
                if caster is not None:
                    steps.append(caster)
        if not steps:
            return None
        if len(steps) == 1:
            return steps[0]

        def chain(value: Any, location: Location, state: _CastState) -> Any:
            for step in steps:
                value = step(value, location, state)
            return value

        return chain

    def _types(self, schema: Mapping[str, Any]) -> list[str]:
        declared = schema.get("type")
        if isinstance(declared, str):
            types = [declared]
        elif isinstance(declared, list):
            types = [t for t in declared if isinstance(t, str)]
        else:
            values = schema["enum"] if isinstance(schema.get("enum"), list) else []
            if "const" in schema:
                values = [schema["const"]]
            types = []
            for value in values:
                for name in ("boolean", "integer", "number", "string", "null"):
                    if _MATCHES[name](value) and name not in types:
                        types.append(name)
                        break
        if schema.get("nullable") is True and "null" not in types:
            types.append("null")
        return types

    def _guessed_container(
        self, schema: Mapping[str, Any], pointer: str, strict: bool
    ) -> Caster | None:
        """A node with no type but object or array keywords: it accepts any other value as
        it is, so only an actual object or array is descended into; text is never decoded."""
        expected: type
        if any(k in schema for k in ("properties", "patternProperties", "additionalProperties")):
            inner, expected = self._object(schema, pointer, strict), dict
        elif any(k in schema for k in ("items", "prefixItems")):
            inner, expected = self._array(schema, pointer), list
        else:
            return None
        if inner is None:
            return None

        def descend_only(value: Any, location: Location, state: _CastState) -> Any:
            return inner(value, location, state) if isinstance(value, expected) else value

        return descend_only

    def _typed(self, schema: Mapping[str, Any], pointer: str, strict_keys: bool) -> Caster | None:
        types = self._types(schema)
        if not types:
            return self._guessed_container(schema, pointer, strict_keys)
        object_caster = self._object(schema, pointer, strict_keys) if "object" in types else None
        array_caster = self._array(schema, pointer) if "array" in types else None
        if "integer" in types and "number" not in types:
            self.normalizes = True
        if object_caster is None and array_caster is None:
            if len(types) == 1:
                return _scalar_caster(types[0]) if types[0] in _CONVERTS else None
        elif types == ["object"] and object_caster is not None:
            return _container_caster(dict, object_caster)
        elif types == ["array"] and array_caster is not None:
            return _container_caster(list, array_caster)
        matchers = [_MATCHES[t] for t in types if t in _MATCHES]
        casts = [(t, _CONVERTS[t]) for t in types if t in _CONVERTS]
        integral = "integer" in types and "number" not in types
        is_valid = self.validators.checker(pointer) if len(casts) > 1 else None

        def descend(value: Any, location: Location, state: _CastState) -> Any:
            if object_caster is not None and isinstance(value, dict):
                return object_caster(value, location, state)
            if array_caster is not None and isinstance(value, list):
                return array_caster(value, location, state)
            return value

        def cast_types(value: Any, location: Location, state: _CastState) -> Any:
            if any(matches(value) for matches in matchers):
                if integral and type(value) is float:
                    state.repairs.append(Repair(location, "cast", value, int(value)))
                    return int(value)
                return descend(value, location, state)
            for name, convert in casts:
                new = convert(value)
                if new is _NOTHING:
                    continue
                trial = _CastState()
                new = descend(new, location, trial)
                if is_valid is not None and not is_valid(new):
                    continue
                action: RepairAction = "decode_json" if name in ("object", "array") else "cast"
                state.repairs.append(Repair(location, action, value, new))
                state.absorb(trial)
                return new
            return value

        return cast_types

    def validation_schema(self) -> tuple[dict[str, Any], bool]:
        """The schema to validate with, and whether validity alone proves nothing to cast.

        Nodes closed by toolbridge's rule get ``additionalProperties: false`` so the compiled
        validator refuses unknown keys itself; a node that is also reached where that rule
        does not hold (an allOf branch) stays open, and then every call needs the cast pass.
        """
        schema = thaw(self.root)
        _allow_null_where_nullable(schema)
        complete = not self.normalizes
        for pointer in self.closed_by_rule:
            node = _at_pointer(schema, pointer)
            if self.strictness.get(pointer) == {True} and isinstance(node, dict):
                node["additionalProperties"] = False
            else:
                complete = False
        return schema, complete

    def _object(self, schema: Mapping[str, Any], pointer: str, strict_keys: bool) -> Caster | None:
        raw_props = schema.get("properties")
        props = raw_props if isinstance(raw_props, Mapping) else {}
        casters = {
            name: c
            for name, sub in props.items()
            if (c := self.inside(sub, f"{pointer}/properties/{_escape(name)}")) is not None
        }
        patterns = [
            (re.compile(pattern), c)
            for pattern, sub in (schema.get("patternProperties") or {}).items()
            if (c := self.inside(sub, f"{pointer}/patternProperties/{_escape(pattern)}"))
        ]
        extra_schema = schema.get("additionalProperties")
        extra = (
            self.inside(extra_schema, f"{pointer}/additionalProperties")
            if isinstance(extra_schema, Mapping)
            else None
        )
        closed = (
            extra_schema is False
            or (
                strict_keys
                and isinstance(raw_props, Mapping)
                and not any(k in schema for k in self._KEEPS_OPEN)
            )
        ) and "patternProperties" not in schema
        allowed = tuple(props)
        if closed and extra_schema is not False:
            self.closed_by_rule.add(pointer)
        required = schema.get("required")
        optional = set(props) - set(required if isinstance(required, list) else ())
        # Optional properties that refuse null: a null there means "absent" and is dropped.
        # True when the schema says so at a glance, else the validator decides on first use.
        null_refused: dict[str, bool | Callable[[Any], bool]] = {}
        for name in optional:
            verdict = _refuses_null(props[name])
            if verdict is not False:
                null_refused[name] = verdict or self.validators.checker(
                    f"{pointer}/properties/{_escape(name)}"
                )
        if not (casters or patterns or extra or closed or null_refused):
            return None

        def refuses_null(key: str) -> bool:
            verdict = null_refused[key]
            return verdict if isinstance(verdict, bool) else not verdict(None)

        def cast_object(
            value: dict[str, Any], location: Location, state: _CastState
        ) -> dict[str, Any]:
            out: dict[str, Any] | None = None
            unknown: list[str] | None = None
            for key, item in value.items():
                if item is None and key in null_refused and refuses_null(key):
                    if out is None:
                        out = dict(value)
                    del out[key]
                    state.repairs.append(Repair((*location, key), "drop_null", None, None))
                    continue
                caster = casters.get(key)
                if caster is None:
                    if key in props:
                        continue
                    if closed:
                        if unknown is None:
                            unknown = []
                        unknown.append(key)
                        continue
                    caster = next((c for p, c in patterns if p.search(key)), extra)
                    if caster is None:
                        continue
                new = caster(item, (*location, key), state)
                if new is not item:
                    if out is None:
                        out = dict(value)
                    out[key] = new
            if unknown is not None:
                state.unknown_keys(unknown, allowed, location)
            return value if out is None else out

        return cast_object

    def _array(self, schema: Mapping[str, Any], pointer: str) -> Caster | None:
        prefix = schema.get("prefixItems")
        prefix_casters = (
            [self.inside(sub, f"{pointer}/prefixItems/{i}") for i, sub in enumerate(prefix)]
            if isinstance(prefix, list)
            else []
        )
        items = self.inside(schema.get("items"), f"{pointer}/items")
        if items is None and not any(prefix_casters):
            return None

        def cast_array(value: list[Any], location: Location, state: _CastState) -> list[Any]:
            out: list[Any] | None = None
            for index, item in enumerate(value):
                caster = prefix_casters[index] if index < len(prefix_casters) else items
                if caster is None:
                    continue
                new = caster(item, (*location, index), state)
                if new is not item:
                    if out is None:
                        out = list(value)
                    out[index] = new
            return value if out is None else out

        return cast_array

    def _union(self, branches: list[Any], pointer: str) -> Caster | None:
        casters = [
            self.node(branch, f"{pointer}/{index}", strict_keys=True)
            for index, branch in enumerate(branches)
        ]
        if not any(casters):
            return None
        checks = [self.validators.checker(f"{pointer}/{i}") for i in range(len(branches))]
        tried = [(caster, check) for caster, check in zip(casters, checks, strict=True) if caster]

        def cast_union(value: Any, location: Location, state: _CastState) -> Any:
            candidates = []
            for caster, check in tried:
                trial = _CastState()
                new = caster(value, location, trial)
                if new is not value:
                    candidates.append((new, check, trial))
            # No branch would change the value: nothing to decide (and nothing validated).
            if not candidates or any(check(value) for check in checks):
                return value
            for new, check, trial in candidates:
                if check(new):
                    state.repairs.extend(trial.repairs)
                    return new
            return value

        return cast_union


class _SubschemaValidators:
    """Validators for subschemas by JSON pointer, compiled on first use.

    Only casting that has to choose between union branches needs them, so most tools
    never pay for the map (about three times the memory of the main validator).
    """

    __slots__ = ("_map", "_options", "schema")

    def __init__(self, options: dict[str, Any]) -> None:
        self.schema: dict[str, Any] = {}
        self._options = options
        self._map: Any = None

    def checker(self, pointer: str) -> Callable[[Any], bool]:
        key = f"#{pointer}"

        def is_valid(value: Any) -> bool:
            if self._map is None:
                self._map = jsonschema_rs.validator_map_for(self.schema, **self._options)
            validator = self._map.get(key)
            return validator is not None and bool(validator.is_valid(value))

        return is_valid


def _at_pointer(document: Any, pointer: str) -> Any:
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(document, dict):
            document = document.get(part)
        elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
            document = document[int(part)]
        else:
            return None
    return document


# Keywords that let values through without a type check of their own, or that combine
# schemas: a node with one of these is not "fully typed".
_UNTYPED_KEYWORDS = frozenset(
    {
        *_Compiler._COMPOSITION,
        "patternProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "dependentSchemas",
        "dependencies",
        "propertyNames",
        "contains",
        "prefixItems",
        "additionalItems",
        "$dynamicRef",
        "$recursiveRef",
    }
)


def _typed_depth(schema: Any, root: dict[str, Any], refs: frozenset[str]) -> int | None:
    """How many levels of objects and arrays a value valid against `schema` can nest,
    when the validator type-checks every value and visits every key of such a value
    (each node has a ``type``; objects are closed or type their other keys; arrays type
    their items); None when some value could pass unchecked, or the nesting is recursive.
    """
    if not isinstance(schema, dict) or any(k in schema for k in _UNTYPED_KEYWORDS):
        return None
    ref = schema.get("$ref")
    if ref is not None:
        if not isinstance(ref, str) or ref in refs or not ref.startswith("#/"):
            return None
        if "type" in schema:  # a $ref next to its own type: keep the rule simple
            return None
        target = _at_pointer(root, ref[1:])
        return _typed_depth(target, root, refs | {ref})
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else declared
    if not isinstance(types, list) or not types:
        return None
    depth = 0
    if "object" in types:
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, dict) or not (extra is False or isinstance(extra, dict)):
            return None
        children = [*properties.values(), *([extra] if isinstance(extra, dict) else [])]
        below = [_typed_depth(child, root, refs) for child in children]
        if any(level is None for level in below):
            return None
        depth = 1 + max((level for level in below if level is not None), default=0)
    if "array" in types:
        items = _typed_depth(schema.get("items"), root, refs)
        if items is None:
            return None
        depth = max(depth, 1 + items)
    return depth


def _refuses_null(schema: Any) -> bool | None:
    """Whether a property's schema refuses null: True or False where its own keywords
    settle it, None where only the validator can tell ($ref, anyOf, not ...)."""
    if isinstance(schema, bool):
        return not schema
    if not isinstance(schema, Mapping):
        return False
    if schema.get("nullable") is True:
        return None
    declared = schema.get("type")
    if (isinstance(declared, str) and declared != "null") or (
        isinstance(declared, list) and "null" not in declared
    ):
        return True
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        return True
    if "const" in schema and schema["const"] is not None:
        return True
    if any(k in schema for k in _Compiler._COMPOSITION) or "$ref" in schema:
        return None
    return False


# Keywords whose value is a subschema, a map of subschemas, or a list of subschemas.
_ONE_SCHEMA = (
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _allow_null_where_nullable(schema: dict[str, Any]) -> None:
    """Let every subschema with the OpenAPI keyword ``nullable: true`` accept null, in place.

    Casting already reads ``nullable`` (a null is left alone there); JSON Schema itself
    ignores the keyword, so without this the validator would refuse what casting kept.
    Only keywords are widened, nothing moves: the JSON pointers of every subschema stay
    valid. ``type`` gains "null", ``enum`` gains null, ``const`` becomes a two-value
    ``enum``, ``anyOf``/``oneOf`` gain a null branch, a ``$ref`` moves into a new ``anyOf``
    with a null branch, and each ``allOf`` branch is widened the same way.
    """
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if node.get("nullable") is True:
            _widen_to_null(node)
        for keyword in _ONE_SCHEMA:
            stack.append(node.get(keyword))
        for keyword in _SCHEMA_MAPS:
            children = node.get(keyword)
            if isinstance(children, dict):
                stack.extend(children.values())
        for keyword in _SCHEMA_LISTS:
            children = node.get(keyword)
            if isinstance(children, list):
                stack.extend(children)


def _widen_to_null(node: dict[str, Any]) -> None:
    declared = node.get("type")
    if isinstance(declared, str) and declared != "null":
        node["type"] = [declared, "null"]
    elif isinstance(declared, list) and "null" not in declared:
        node["type"] = [*declared, "null"]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    if "const" in node and node["const"] is not None:
        node["enum"] = [node.pop("const"), None]
    for keyword in ("anyOf", "oneOf"):
        if isinstance(node.get(keyword), list):
            node[keyword] = [*node[keyword], {"type": "null"}]
    if "$ref" in node and "anyOf" not in node:
        node["anyOf"] = [{"$ref": node.pop("$ref")}, {"type": "null"}]
    for branch in node.get("allOf") or ():
        if isinstance(branch, dict):  # every branch must let null through
            _widen_to_null(branch)


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _container_caster(expected: type, inner: Caster) -> Caster:
    """The caster of an object-only or array-only node: descend, or decode JSON text."""
    decode = _CONVERTS["object" if expected is dict else "array"]

    def cast_container(value: Any, location: Location, state: _CastState) -> Any:
        if isinstance(value, expected):
            return inner(value, location, state)
        new = decode(value)
        if new is _NOTHING:
            return value
        state.repairs.append(Repair(location, "decode_json", value, new))
        return inner(new, location, state)

    return cast_container


_UNKNOWN_KEY_OBJECTS = 3  # objects whose unknown keys are listed; the rest are counted
_KEYS_SHOWN = 3  # unknown keys named per object
_ALLOWED_SHOWN = 12  # allowed keys named per object


def _unknown_keys_message(keys: list[str], allowed: Sequence[str]) -> str:
    """One line for all unknown keys of one object: the first few named, the rest
    counted, the allowed keys, and the nearest allowed key to each one named."""
    shown = ", ".join(repr(_shorten(key, 40)) for key in keys[:_KEYS_SHOWN])
    if len(keys) > _KEYS_SHOWN:
        shown += f" and {len(keys) - _KEYS_SHOWN:,} more"
    message = f"unknown key{'s' if len(keys) > 1 else ''} {shown}"
    if not allowed:
        return f"{message}: this takes no keys"
    names = ", ".join(_shorten(name, 40) for name in allowed[:_ALLOWED_SHOWN])
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
        pairs = ", ".join(f"{c} for {_shorten(k, 40)!r}" for k, c in close)
        message += f" (did you mean {pairs}?)"
    return message


def _either(names: Sequence[str]) -> str:
    """``'a'``, or ``'a' or 'b'`` when two names are equally close."""
    return " or ".join(repr(_shorten(name, 40)) for name in names)


# --- the compiled schema ---------------------------------------------------------------


class Checked(NamedTuple):
    """The outcome of `CompiledSchema.check`: the value to run with (the input itself when
    nothing was repaired), every repair made, and every problem (empty when valid)."""

    value: Any
    repairs: tuple[Repair, ...]
    issues: tuple[ArgumentIssue, ...]


# Checked(...) runs NamedTuple's Python-level __new__; the hot path builds it directly.
_new_tuple = tuple.__new__


class CompiledSchema:
    """A parameters schema compiled once; `check` is the one question the registry asks.

    `settled` says that a value the validator accepts needs no cast pass at all, which
    `check` uses to skip it on the hot path.
    """

    __slots__ = ("_caster", "_typed", "_validator", "schema", "settled")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        plain = thaw(schema)  # jsonschema-rs takes exact dicts and lists, not subclasses
        # offline: a remote $ref is an error at registration, never a download
        options: dict[str, Any] = {"validate_formats": True, "offline": True}
        validators = _SubschemaValidators(options)
        compiler = _Compiler(plain, validators)
        self._caster = compiler.node(plain, "", strict_keys=True)
        checked, self.settled = compiler.validation_schema()
        validators.schema = checked
        # Whether a valid value's plain-data check may be the validator's own pass plus
        # `leaves_look_plain` instead of the Python walk (see `check`).
        depth = _typed_depth(checked, checked, frozenset())
        self._typed = depth is not None and depth <= MAX_DEPTH
        try:
            self._validator = jsonschema_rs.validator_for(checked, **options)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
            message = getattr(exc, "message", None) or str(exc).splitlines()[0]
            raise ToolDefinitionError(f"parameters schema cannot be compiled: {message}") from None

    def check(self, value: Any, *, plain: bool = False) -> Checked:
        """Cast `value` by the schema and validate it: the value, the repairs, the issues.

        First, unless `plain` vouches for it (text from `decode_arguments` that
        `jsondata.text_may_hide_problems` cleared), `value` must be plain JSON data
        (`jsondata.json_data_issues`). A valid value the cast pass cannot change comes
        back as the same object. Never raises for any input.
        """
        validator = self._validator
        valid: bool | None = None  # the validator's verdict on `value`, once asked
        if not plain:
            if self._typed and leaves_look_plain(value):
                # A fully typed schema makes the validator look at every value and key
                # (a set, bytes or an int key is a ValueError or invalid there), and
                # `leaves_look_plain` saw the rest: a valid value is plain data.
                try:
                    valid = plain = bool(validator.is_valid(value))
                except ValueError:
                    valid = None
                if plain and self.settled:
                    return _new_tuple(Checked, (value, (), ()))
            if not plain and (found := json_data_issues(value)):
                return Checked(value, (), _capped(found))
        try:
            if self.settled:
                if valid is None:
                    valid = bool(validator.is_valid(value))
                if valid:  # valid as sent: no cast pass, no copy
                    return _new_tuple(Checked, (value, (), ()))
                errors = list(itertools.islice(validator.iter_errors(value), MAX_ISSUES + 1))
                if not any(_castable(error) for error in errors):
                    # no cast could change the verdict (a missing key, a bad format...)
                    return Checked(value, (), _capped(list(_render_errors(errors, set()))))
            state = _CastState()
            new = value if self._caster is None else self._caster(value, (), state)
            repairs = tuple(state.repairs)
            if not state.unknown_paths and validator.is_valid(new):
                return _new_tuple(Checked, (new, repairs, ()))
            return Checked(new, repairs, self._issues(new, state))
        except (RecursionError, ValueError) as exc:
            # Defence in depth: plain JSON within MAX_DEPTH never gets here, but a limit
            # of the validator's own must still be an error for the model, not a crash.
            issue = ArgumentIssue("$", f"the arguments cannot be validated: {_shorten(str(exc))}")
            return Checked(value, (), (issue,))

    def _issues(self, value: Any, state: _CastState) -> tuple[ArgumentIssue, ...]:
        """Unknown keys found by the cast pass, then the validator's errors, capped."""
        issues = list(state.issues)
        if len(state.unknown_paths) > _UNKNOWN_KEY_OBJECTS:
            more = len(state.unknown_paths) - _UNKNOWN_KEY_OBJECTS
            issues.append(ArgumentIssue("$", f"unknown keys in {more:,} more objects"))
        errors = itertools.islice(self._validator.iter_errors(value), MAX_ISSUES + 1)
        issues.extend(_render_errors(errors, set(state.unknown_paths)))
        return _capped(issues)


MAX_RENDERED = 2_000  # characters of issue text sent back for one call, at most


def _capped(issues: Sequence[ArgumentIssue]) -> tuple[ArgumentIssue, ...]:
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


def _castable(error: Any) -> bool:
    kind = type(error.kind).__name__
    if kind in _CASTABLE_KINDS:
        return True
    if kind in ("Enum", "Constant"):  # "2" for enum [1, 2], 7 for const "7"
        options = error.kind.options if kind == "Enum" else [error.kind.expected_value]
        instance = error.instance
        return not (isinstance(instance, str) and all(isinstance(o, str) for o in options))
    return False


def _render_errors(errors: Iterable[Any], unknown_key_paths: set[str]) -> Iterator[ArgumentIssue]:
    for error in errors:
        path = format_path(error.instance_path)
        kind = type(error.kind).__name__
        if kind == "AdditionalProperties" and path in unknown_key_paths:
            continue
        if kind == "Required":
            missing = _shorten(str(error.kind.property), 80)
            yield ArgumentIssue(path, f"missing required key {missing!r}")
        else:
            yield ArgumentIssue(path, _shorten(error.message))
