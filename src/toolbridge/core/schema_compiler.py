"""The schema compiler: a parameters schema becomes one tree of caster closures.

`Compiler` walks the schema once, at registration, and builds a caster per node that
can cast (typed nodes, objects, arrays, unions, ``$ref``/``allOf`` chains), sharing
the caster of a ``$defs`` node reached twice and refusing a ``$ref`` cycle that never
describes a value. It also gives the schema to validate with (unknown keys closed by
toolbridge's rule, ``nullable`` widened). Union branches are taken only if the cast
value then validates against that branch, which `SubschemaValidators` answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema_rs

from toolbridge.core.calls import Location, Repair, RepairAction
from toolbridge.core.casting import (
    CONVERTS,
    MATCHES,
    NOTHING,
    Caster,
    CastState,
    container_caster,
    scalar_caster,
)
from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import thaw
from toolbridge.core.schema_keywords import (
    COMPOSITION,
    allow_null_where_nullable,
    at_pointer,
    escape,
    refuses_null,
)


class Compiler:
    """Turns a schema into a tree of caster closures; nodes that can never cast are None."""

    # Keywords next to "properties" that admit other keys, or combine with other schemas.
    _KEEPS_OPEN = (
        *COMPOSITION,
        "$ref",
        "additionalProperties",
        "unevaluatedProperties",
        "dependentSchemas",
        "propertyNames",
    )

    def __init__(self, root: Mapping[str, Any], validators: SubschemaValidators) -> None:
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

        def chain(value: Any, location: Location, state: CastState) -> Any:
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
                    if MATCHES[name](value) and name not in types:
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

        def descend_only(value: Any, location: Location, state: CastState) -> Any:
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
                return scalar_caster(types[0]) if types[0] in CONVERTS else None
        elif types == ["object"] and object_caster is not None:
            return container_caster(dict, object_caster)
        elif types == ["array"] and array_caster is not None:
            return container_caster(list, array_caster)
        matchers = [MATCHES[t] for t in types if t in MATCHES]
        casts = [(t, CONVERTS[t]) for t in types if t in CONVERTS]
        integral = "integer" in types and "number" not in types
        is_valid = self.validators.checker(pointer) if len(casts) > 1 else None

        def descend(value: Any, location: Location, state: CastState) -> Any:
            if object_caster is not None and isinstance(value, dict):
                return object_caster(value, location, state)
            if array_caster is not None and isinstance(value, list):
                return array_caster(value, location, state)
            return value

        def cast_types(value: Any, location: Location, state: CastState) -> Any:
            if any(matches(value) for matches in matchers):
                if integral and type(value) is float:
                    state.repairs.append(Repair(location, "cast", value, int(value)))
                    return int(value)
                return descend(value, location, state)
            for name, convert in casts:
                new = convert(value)
                if new is NOTHING:
                    continue
                trial = CastState()
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
        allow_null_where_nullable(schema)
        complete = not self.normalizes
        for pointer in self.closed_by_rule:
            node = at_pointer(schema, pointer)
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
            if (c := self.inside(sub, f"{pointer}/properties/{escape(name)}")) is not None
        }
        patterns = [
            (re.compile(pattern), c)
            for pattern, sub in (schema.get("patternProperties") or {}).items()
            if (c := self.inside(sub, f"{pointer}/patternProperties/{escape(pattern)}"))
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
            verdict = refuses_null(props[name])
            if verdict is not False:
                null_refused[name] = verdict or self.validators.checker(
                    f"{pointer}/properties/{escape(name)}"
                )
        if not (casters or patterns or extra or closed or null_refused):
            return None

        def drops_null(key: str) -> bool:
            verdict = null_refused[key]
            return verdict if isinstance(verdict, bool) else not verdict(None)

        def cast_object(
            value: dict[str, Any], location: Location, state: CastState
        ) -> dict[str, Any]:
            out: dict[str, Any] | None = None
            unknown: list[str] | None = None
            for key, item in value.items():
                if item is None and key in null_refused and drops_null(key):
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

        def cast_array(value: list[Any], location: Location, state: CastState) -> list[Any]:
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

        def cast_union(value: Any, location: Location, state: CastState) -> Any:
            candidates = []
            for caster, check in tried:
                trial = CastState()
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


class SubschemaValidators:
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
