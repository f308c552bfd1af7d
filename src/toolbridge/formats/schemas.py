"""Adapting a tool's JSON Schema to what a provider accepts, without changing its meaning.

Three adaptations, each exact or refused:

- `inline_refs`: replace local ``$ref``s by what they point to (recursive ones refuse).
- `openai_strict`: OpenAI strict mode. Every property becomes required and each
  optional one also accepts ``null``; every object gets ``additionalProperties: false``.
  A schema outside strict mode's subset raises `UnsupportedSchema`, and the tool is
  then sent with ``strict: false`` and its original schema.
- `gemini_parameters`: Gemini's OpenAPI-style ``parameters`` subset (upper-case types,
  ``nullable``, string enums only). Anything outside it raises `UnsupportedSchema`, and
  the tool is then sent as ``parametersJsonSchema``, which takes full JSON Schema.

Closing objects is not a change of meaning in toolbridge: the registry already treats
an object with ``properties`` and no ``additionalProperties`` as closed (unknown keys
are errors), so only explicitly open objects refuse adaptation.

Undoing strict mode: a model in strict mode must send every key, and sends ``null``
for an optional one it would have left out. `drop_strict_nulls` walks the decoded
arguments with the *original* schema and drops each ``null`` whose key is optional
there and whose original schema does not accept ``null``, so the tool sees the key
as absent and its default applies. A ``null`` the original schema accepts is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema_rs

from toolbridge.core.frozen import thaw

__all__ = [
    "UnsupportedSchema",
    "accepts_null",
    "drop_strict_nulls",
    "gemini_parameters",
    "inline_refs",
    "json_schema_from_gemini",
    "openai_strict",
    "takes_no_arguments",
]


class UnsupportedSchema(ValueError):
    """The schema cannot be adapted exactly; the message names the keyword and where."""


# Keywords whose value is one subschema, a list of them, or a name -> subschema map.
_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
_MANY = ("anyOf", "allOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")

# Keywords that read each other inside one schema object: merging a $ref target and
# its siblings is exact only if they never both touch the same group.
_COUPLED = (
    frozenset({"properties", "patternProperties", "additionalProperties", "unevaluatedProperties"}),
    frozenset({"items", "prefixItems", "additionalItems", "unevaluatedItems"}),
    frozenset({"contains", "minContains", "maxContains"}),
    frozenset({"if", "then", "else"}),
)
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
# Annotations a provider may reject; dropping them never changes which values are valid.
_DROPPED = frozenset({"$schema", "$id", "$comment", "examples", "deprecated", "readOnly"})
_DROPPED |= {"writeOnly", "$anchor"}


def _map_subschemas(node: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A copy of `node` with `fn` applied to each direct subschema (not to data values)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ONE and isinstance(value, dict | bool):
            out[key] = fn(value)
        elif (key in _MANY or key == "items") and isinstance(value, list):
            out[key] = [fn(item) for item in value]
        elif key in _NAMED and isinstance(value, Mapping):
            out[key] = {name: fn(sub) for name, sub in value.items()}
        else:
            out[key] = value
    return out


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with every local ``$ref`` replaced by its target and ``$defs`` removed.

    A ``$ref`` with sibling keywords is merged with its target when they share no
    keyword group, and becomes ``allOf`` otherwise, so the meaning stays the same.
    Raises `UnsupportedSchema` for recursive or non-local references.
    """
    root = thaw(schema)

    def resolve(ref: str) -> Any:
        if not ref.startswith("#"):
            raise UnsupportedSchema(f"$ref {ref!r} is not a local reference")
        node: Any = root
        for raw in ref[1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise UnsupportedSchema(f"$ref {ref!r} points to nothing")
        return node

    def walk(node: Any, seen: frozenset[str]) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        body = {k: v for k, v in node.items() if k not in ("$ref", "$defs", "definitions")}
        body = _map_subschemas(body, lambda sub: walk(sub, seen))
        if not isinstance(ref, str):
            return body
        if ref in seen:
            raise UnsupportedSchema(f"$ref {ref!r} is recursive")
        target = walk(resolve(ref), seen | {ref})
        return _merge_ref(target, body)

    result = walk(root, frozenset())
    if not isinstance(result, dict):
        raise UnsupportedSchema("the schema is not an object")
    return result


def _merge_ref(target: Any, siblings: dict[str, Any]) -> Any:
    if not siblings:
        return target
    if not isinstance(target, dict):
        return {"allOf": [target, siblings]}
    shared = (target.keys() & siblings.keys()) - _ANNOTATIONS
    coupled = any(group & target.keys() and group & siblings.keys() for group in _COUPLED)
    if shared or coupled:
        return {"allOf": [target, siblings]}
    return {**target, **siblings}


def accepts_null(node: Any) -> bool:
    """Whether `node` (refs inlined) lets ``null`` through: every constraint must agree."""
    if isinstance(node, bool):
        return node
    if not isinstance(node, Mapping):
        return True
    declared = node.get("type")
    if isinstance(declared, str) and declared != "null":
        return False
    if isinstance(declared, list) and "null" not in declared:
        return False
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        return False
    if "const" in node and node["const"] is not None:
        return False
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and not any(accepts_null(b) for b in branches):
            return False
    all_of = node.get("allOf")
    if isinstance(all_of, list) and not all(accepts_null(b) for b in all_of):
        return False
    return not ("not" in node and accepts_null(node["not"]))


# --- OpenAI strict mode ------------------------------------------------------------

_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "title",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_STRICT_MAX_DEPTH = 10
_STRICT_MAX_PROPERTIES = 5000


def openai_strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The strict-mode form of `schema`, or `UnsupportedSchema` saying what prevents it."""
    inlined = inline_refs(schema)
    counter = [0]
    result = _strict_node(inlined, "$", 0, counter)
    if "anyOf" in result or result.get("type") != "object":
        raise UnsupportedSchema('the top level must be a plain {"type": "object"} schema')
    return result


def _strict_node(node: Any, path: str, depth: int, counter: list[int]) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise UnsupportedSchema(f"{path}: boolean schemas are not allowed in strict mode")
    body = {k: v for k, v in node.items() if k not in _DROPPED and k != "default"}
    unknown = sorted(body.keys() - _STRICT_KEYWORDS)
    if unknown:
        raise UnsupportedSchema(f"{path}: {unknown[0]!r} is not supported in strict mode")
    if not any(k in body for k in ("type", "anyOf", "enum", "const")):
        raise UnsupportedSchema(f"{path}: a schema that accepts any value is not allowed")
    types = _types(body, path)
    fmt = body.get("format")
    if fmt is not None and fmt not in _STRICT_FORMATS:
        raise UnsupportedSchema(f"{path}: format {fmt!r} is not supported in strict mode")
    out = dict(body)
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if "anyOf" in out:
        if not isinstance(out["anyOf"], list) or not out["anyOf"]:
            raise UnsupportedSchema(f"{path}: anyOf must be a non-empty list")
        out["anyOf"] = [
            _strict_node(b, f"{path}.anyOf[{i}]", depth, counter)
            for i, b in enumerate(out["anyOf"])
        ]
    if "object" in types or "properties" in out or "additionalProperties" in out:
        if "object" not in types:
            raise UnsupportedSchema(f'{path}: object keywords need "type": "object"')
        out.update(_strict_object(out, path, depth + 1, counter))
    if "array" in types or "items" in out:
        items = out.get("items")
        if "array" not in types or not isinstance(items, dict):
            raise UnsupportedSchema(f'{path}: arrays need "type": "array" and an "items" schema')
        out["items"] = _strict_node(items, f"{path}[]", depth + 1, counter)
    return out


def _types(body: Mapping[str, Any], path: str) -> list[str]:
    declared = body.get("type")
    types = [declared] if isinstance(declared, str) else declared
    if types is None:
        return []
    if not isinstance(types, list) or not set(types) <= _JSON_TYPES:
        raise UnsupportedSchema(f"{path}: unknown type {declared!r}")
    return types


def _strict_object(
    node: Mapping[str, Any], path: str, depth: int, counter: list[int]
) -> dict[str, Any]:
    if depth > _STRICT_MAX_DEPTH:
        raise UnsupportedSchema(f"{path}: more than {_STRICT_MAX_DEPTH} levels of nesting")
    if node.get("additionalProperties", False) is not False:
        raise UnsupportedSchema(f"{path}: open objects (additionalProperties) are not allowed")
    properties = node.get("properties") or {}
    required = node.get("required") or []
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise UnsupportedSchema(f"{path}: properties must be an object and required a list")
    missing = [name for name in required if name not in properties]
    if missing:
        raise UnsupportedSchema(f"{path}: required key {missing[0]!r} has no property schema")
    counter[0] += len(properties)
    if counter[0] > _STRICT_MAX_PROPERTIES:
        raise UnsupportedSchema(f"more than {_STRICT_MAX_PROPERTIES} properties in total")
    adapted: dict[str, Any] = {}
    for name, sub in properties.items():
        strict_sub = _strict_node(sub, f"{path}.{name}", depth, counter)
        adapted[name] = strict_sub if name in required else _nullable(strict_sub)
    return {"properties": adapted, "required": list(adapted), "additionalProperties": False}


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`node` that also accepts null (and nothing else new); as is if it already does."""
    if accepts_null(node):
        return node
    if set(node) <= {"anyOf", "description", "title"}:
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    declared = node.get("type")
    if declared is not None and "anyOf" not in node:
        out = dict(node)
        out["type"] = [declared, "null"] if isinstance(declared, str) else [*declared, "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [node, {"type": "null"}]}


def drop_strict_nulls(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """Undo strict mode's optional -> nullable mapping on decoded `arguments`.

    `schema` is the tool's original schema. Each ``null`` under a key that is optional
    there, and whose schema rejects ``null``, is dropped; everything else is kept.
    """
    try:
        root = inline_refs(schema)
    except UnsupportedSchema:
        return arguments  # such a schema is never sent in strict mode
    return _drop_nulls(arguments, root)


def _drop_nulls(value: Any, node: Any) -> Any:
    if not isinstance(node, dict):
        return value
    properties = node.get("properties")
    if isinstance(value, dict) and isinstance(properties, dict):
        required = set(node.get("required") or ())
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                out[key] = item
            elif item is None and key not in required and not accepts_null(sub):
                continue
            else:
                out[key] = _drop_nulls(item, sub)
        return out
    items = node.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_drop_nulls(item, items) for item in value]
    branches = node.get("anyOf")
    if isinstance(branches, list) and isinstance(value, dict | list):
        for branch in branches:
            restored = _drop_nulls(value, branch)
            if isinstance(branch, dict) and jsonschema_rs.is_valid(branch, restored):
                return restored
    return value


# --- Gemini parameters (OpenAPI subset) --------------------------------------------

_GEMINI_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "title",
        "default",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    }
)
_GEMINI_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
_NULL_BRANCH = {"type": "null"}


def gemini_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Gemini's ``parameters`` form of `schema`, or `UnsupportedSchema` saying why not."""
    return _gemini_node(inline_refs(schema), "$")


def _gemini_node(node: Any, path: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise UnsupportedSchema(f"{path}: boolean schemas have no Gemini form")
    body = {k: v for k, v in node.items() if k not in _DROPPED}
    unknown = sorted(body.keys() - _GEMINI_KEYWORDS)
    if unknown:
        raise UnsupportedSchema(f"{path}: {unknown[0]!r} has no Gemini parameters form")
    if body.pop("additionalProperties", False) is not False:
        raise UnsupportedSchema(f"{path}: open objects (additionalProperties) have no Gemini form")
    if "const" in body:
        body["enum"] = [body.pop("const")]
    if "anyOf" in body:
        return _gemini_union(body, path)
    types = _types(body, path)
    enum = body.pop("enum", None)
    nullable = ("null" in types or not types) and (enum is None or None in enum)
    types = [t for t in types if t != "null"]
    out: dict[str, Any] = {}
    if enum is not None:
        strings = [v for v in enum if v is not None]
        if not strings or not all(isinstance(v, str) for v in strings):
            raise UnsupportedSchema(f"{path}: Gemini enums hold strings only")
        if types not in ([], ["string"]):
            raise UnsupportedSchema(f"{path}: a string enum needs type string")
        types, out["enum"] = ["string"], strings
    if len(types) != 1:
        what = f"several types {types}" if types else "a schema that accepts any value"
        raise UnsupportedSchema(f"{path}: {what} has no Gemini form")
    kind = types[0]
    body.pop("type", None)
    fmt = body.get("format")
    if fmt is not None and fmt not in _GEMINI_FORMATS.get(kind, frozenset()):
        raise UnsupportedSchema(f"{path}: format {fmt!r} has no Gemini form for {kind}")
    if "properties" in body or "required" in body:
        if kind != "object":
            raise UnsupportedSchema(f'{path}: object keywords need "type": "object"')
        props = body.pop("properties", None) or {}
        out["properties"] = {n: _gemini_node(s, f"{path}.{n}") for n, s in props.items()}
    if "items" in body:
        if kind != "array" or not isinstance(body["items"], dict):
            raise UnsupportedSchema(f'{path}: items need "type": "array" and one schema')
        out["items"] = _gemini_node(body.pop("items"), f"{path}[]")
    out.update(body)
    out["type"] = kind.upper()
    if nullable:
        out["nullable"] = True
    return out


def _gemini_union(body: dict[str, Any], path: str) -> dict[str, Any]:
    """``anyOf`` alone (plus annotations): null branches become ``nullable``."""
    branches = body.pop("anyOf")
    if set(body) - {"description", "title", "default"} or not isinstance(branches, list):
        raise UnsupportedSchema(f"{path}: anyOf next to other keywords has no Gemini form")
    real = [b for b in branches if b != _NULL_BRANCH]
    adapted = [_gemini_node(b, f"{path}.anyOf[{i}]") for i, b in enumerate(real)]
    if not adapted:
        raise UnsupportedSchema(f"{path}: a schema that only accepts null has no Gemini form")
    out = {**adapted[0], **body} if len(adapted) == 1 else {"anyOf": adapted, **body}
    if len(real) < len(branches):
        out["nullable"] = True
    return out


_EMPTY_OBJECT_KEYS = frozenset(
    {"type", "properties", "required", "additionalProperties", "title", "description", "$schema"}
)


def takes_no_arguments(schema: Mapping[str, Any]) -> bool:
    """True for no schema and for a closed object schema without properties: a tool
    that takes no arguments (Gemini wants no ``parameters`` at all then)."""
    if not schema:
        return True
    return (
        schema.get("type") == "object"
        and not schema.get("properties")
        and not schema.get("required")
        and schema.get("additionalProperties", False) is False
        and set(schema) <= _EMPTY_OBJECT_KEYS
    )


def json_schema_from_gemini(node: Any) -> Any:
    """Read a Gemini ``parameters`` schema back as JSON Schema (objects closed)."""
    if not isinstance(node, Mapping):
        return node
    out = _map_subschemas(
        {k: v for k, v in node.items() if k != "nullable"}, json_schema_from_gemini
    )
    declared = out.get("type")
    if isinstance(declared, str):
        out["type"] = declared.lower()
    if out.get("type") == "object":
        out.setdefault("additionalProperties", False)
    if node.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if isinstance(out.get("enum"), list):
                out["enum"] = [*out["enum"], None]
        elif isinstance(out.get("anyOf"), list):
            out["anyOf"] = [*out["anyOf"], dict(_NULL_BRANCH)]
    return out
