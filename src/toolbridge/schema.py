"""Parameter schemas: freeze them, check them, and compile them into a caster + validator.

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

import itertools
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple, NoReturn

import jsonschema_rs

from toolbridge.calls import (
    ArgumentsDecodeError,
    Location,
    Repair,
    RepairAction,
    decode_arguments,
    format_path,
)
from toolbridge.errors import ArgumentIssue, ToolDefinitionError
from toolbridge.naming import NameIndex

__all__ = [
    "EMPTY_OBJECT_SCHEMA",
    "CompiledSchema",
    "FrozenDict",
    "FrozenList",
    "check_parameters_schema",
    "freeze",
    "thaw",
]

MAX_ISSUES = 20
MAX_DEPTH = 256  # nesting of containers accepted where a schema recurses
_MAX_MESSAGE = 300


# --- frozen JSON ------------------------------------------------------------------


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is frozen; copy it with toolbridge.schema.thaw()")


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation; JSON-serialisable and shared without copies."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable
    __ior__ = _immutable

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


class FrozenList(list[Any]):
    """A list that refuses mutation; JSON-serialisable and shared without copies."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _immutable
    clear = sort = reverse = _immutable
    __iadd__ = __imul__ = _immutable

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """A deep, immutable copy of JSON-like data (dicts and lists become frozen)."""
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A deep, plain, mutable copy of JSON-like data."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


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
        jsonschema_rs.meta.validate(thaw(schema))
    except jsonschema_rs.ValidationError as exc:
        path = format_path(exc.instance_path)
        raise ToolDefinitionError(
            f"{owner}: parameters is not a valid JSON Schema: {exc.message} (at {path})"
        ) from None
    except jsonschema_rs.ReferencingError as exc:
        raise ToolDefinitionError(f"{owner}: parameters has an unknown $schema: {exc}") from None


# --- messages -------------------------------------------------------------------------


def _shorten(text: str, limit: int = _MAX_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    return f"{text[:head]}…[{len(text) - limit} characters cut]…{text[-tail:]}"


# --- casting ------------------------------------------------------------------------


class _CastState:
    """What one cast pass collects: the repairs made and the unknown keys found."""

    __slots__ = ("issues", "repairs")

    def __init__(self) -> None:
        self.repairs: list[Repair] = []
        self.issues: list[ArgumentIssue] = []


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
        if not math.isfinite(number) or Decimal(repr(number)) != Decimal(value.strip()):
            return _NOTHING
        return number
    return _NOTHING


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


def _scalar_caster(type_name: str) -> Caster:
    """The caster of a node with one scalar type and nothing below it: the hot case."""
    matches = _MATCHES[type_name]
    convert = _CONVERTS[type_name]
    integral = type_name == "integer"
    action: RepairAction = "decode_json" if type_name in ("object", "array") else "cast"

    def cast_scalar(value: Any, location: Location, state: _CastState) -> Any:
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
        self.building: set[str] = set()
        # Whether the schema may descend without bound ($ref cycles, refs not followed
        # here): then deep input is refused before the validator sees it.
        self.recursive = False

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
            self.recursive = True  # a $ref cycle: defer to the caster once it is built
            return lambda value, path, state: (
                known[0](value, path, state) if known[0] is not None else value
            )
        cell: list[Caster | None] = [None]
        self.by_pointer[key] = cell
        self.building.add(key)
        cell[0] = self._build(schema, pointer, strict_keys)
        self.building.discard(key)
        return cell[0]

    def _build(self, schema: Mapping[str, Any], pointer: str, strict_keys: bool) -> Caster | None:
        steps: list[Caster] = []
        base = self._typed(schema, pointer, strict_keys)
        if base is not None:
            steps.append(base)
        ref = schema.get("$ref")
        if isinstance(ref, str) and self.resolve(ref) is None:
            self.recursive = True  # an anchor or another document: depth unknown
        if "$dynamicRef" in schema or "$recursiveRef" in schema:
            self.recursive = True
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
                state.repairs.extend(trial.repairs)
                state.issues.extend(trial.issues)
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
            if (c := self.node(sub, f"{pointer}/properties/{_escape(name)}", True)) is not None
        }
        patterns = [
            (re.compile(pattern), c)
            for pattern, sub in (schema.get("patternProperties") or {}).items()
            if (c := self.node(sub, f"{pointer}/patternProperties/{_escape(pattern)}", True))
        ]
        extra_schema = schema.get("additionalProperties")
        extra = (
            self.node(extra_schema, f"{pointer}/additionalProperties", True)
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
        if not (casters or patterns or extra or closed):
            return None

        def cast_object(
            value: dict[str, Any], location: Location, state: _CastState
        ) -> dict[str, Any]:
            out: dict[str, Any] | None = None
            for key, item in value.items():
                caster = casters.get(key)
                if caster is None:
                    if key in props:
                        continue
                    if closed:
                        if len(state.issues) <= MAX_ISSUES:
                            state.issues.append(_unknown_key(key, allowed, location))
                        continue
                    caster = next((c for p, c in patterns if p.search(key)), extra)
                    if caster is None:
                        continue
                new = caster(item, (*location, key), state)
                if new is not item:
                    if out is None:
                        out = dict(value)
                    out[key] = new
            return value if out is None else out

        return cast_object

    def _array(self, schema: Mapping[str, Any], pointer: str) -> Caster | None:
        prefix = schema.get("prefixItems")
        prefix_casters = (
            [self.node(sub, f"{pointer}/prefixItems/{i}", True) for i, sub in enumerate(prefix)]
            if isinstance(prefix, list)
            else []
        )
        items = self.node(schema.get("items"), f"{pointer}/items", True)
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


def _unknown_key(key: str, allowed: Sequence[str], location: Location) -> ArgumentIssue:
    shown = _shorten(key, 60)
    if not allowed:
        return ArgumentIssue(format_path(location), f"unknown key {shown!r}: this takes no keys")
    message = f"unknown key {shown!r}; allowed keys: {', '.join(allowed)}"
    close = NameIndex(allowed).suggest(key, limit=1)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    return ArgumentIssue(format_path(location), message)


# --- the compiled schema ---------------------------------------------------------------


class Coerced(NamedTuple):
    """The outcome of casting: the (possibly new) value, what changed, and key problems."""

    value: Any
    repairs: tuple[Repair, ...]
    issues: tuple[ArgumentIssue, ...]


class CompiledSchema:
    """A parameters schema compiled once: `coerce` casts, `issues` validates.

    `settled` says that a value the validator accepts needs no cast pass at all, so the
    registry can skip it on the hot path.
    """

    __slots__ = ("_caster", "_validator", "recursive", "schema", "settled")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        plain = thaw(schema)  # jsonschema-rs takes exact dicts and lists, not subclasses
        options: dict[str, Any] = {"validate_formats": True}
        validators = _SubschemaValidators(options)
        compiler = _Compiler(plain, validators)
        self._caster = compiler.node(plain, "", strict_keys=True)
        checked, self.settled = compiler.validation_schema()
        self.recursive = compiler.recursive
        validators.schema = checked
        try:
            self._validator = jsonschema_rs.validator_for(checked, **options)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
            message = getattr(exc, "message", None) or str(exc).splitlines()[0]
            raise ToolDefinitionError(f"parameters schema cannot be compiled: {message}") from None

    def coerce(self, value: dict[str, Any]) -> Coerced:
        """Cast `value` by the schema. A value that already satisfies it comes back as is."""
        if self._caster is None:
            return Coerced(value, (), ())
        state = _CastState()
        new = self._caster(value, (), state)
        repairs, issues = state.repairs, state.issues
        return Coerced(new, tuple(repairs) if repairs else (), tuple(issues) if issues else ())

    def too_deep(self, value: Any, limit: int = MAX_DEPTH) -> bool:
        """Whether `value` nests containers deeper than `limit` (checked without recursion).

        Only recursive schemas need it: the validator follows the data as deep as the
        schema lets it, and data a million levels deep would exhaust its native stack.
        """
        stack = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if depth > limit:
                return True
            if isinstance(item, dict):
                stack.extend((child, depth + 1) for child in item.values())
            elif isinstance(item, list):
                stack.extend((child, depth + 1) for child in item)
        return False

    def is_valid(self, value: Any) -> bool:
        return bool(self._validator.is_valid(value))

    def issues_no_cast_can_fix(self, value: Any) -> list[ArgumentIssue] | None:
        """For an invalid value of a settled schema: its issues when no cast could change
        the verdict (a missing key, a string outside a string enum, a bad format...), so
        the error path skips the cast pass; None when a cast might help."""
        errors = list(itertools.islice(self._validator.iter_errors(value), MAX_ISSUES + 1))
        if any(_castable(error) for error in errors):
            return None
        return list(_render_errors(iter(errors), set()))

    def issues(self, value: Any, reported: Sequence[ArgumentIssue] = ()) -> list[ArgumentIssue]:
        """Every validation error, each with its JSON path; empty when valid.

        Unknown keys already `reported` by `coerce` (with the allowed keys named) are
        not reported a second time.
        """
        seen = {issue.path for issue in reported}
        errors = _render_errors(self._validator.iter_errors(value), seen)
        return list(itertools.islice(errors, MAX_ISSUES + 1))  # one more says "and more"


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


def _render_errors(errors: Iterator[Any], unknown_key_paths: set[str]) -> Iterator[ArgumentIssue]:
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
