"""What a schema's keywords say, read without validating: pointers, nesting, null.

Static questions the schema compiler and `CompiledSchema` ask of a schema document: the
node at a JSON pointer, whether a property's schema refuses null, how deep a value a
fully typed schema admits can nest (`typed_depth`), and the rewrite that lets OpenAPI's
``nullable: true`` accept null in the validator too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Keywords that combine schemas (a node with one is not settled by its own keywords).
COMPOSITION = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")


def at_pointer(document: Any, pointer: str) -> Any:
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
        *COMPOSITION,
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


def typed_depth(schema: Any, root: dict[str, Any], refs: frozenset[str]) -> int | None:
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
        target = at_pointer(root, ref[1:])
        return typed_depth(target, root, refs | {ref})
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
        below = [typed_depth(child, root, refs) for child in children]
        if any(level is None for level in below):
            return None
        depth = 1 + max((level for level in below if level is not None), default=0)
    if "array" in types:
        items = typed_depth(schema.get("items"), root, refs)
        if items is None:
            return None
        depth = max(depth, 1 + items)
    return depth


def refuses_null(schema: Any) -> bool | None:
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
    if any(k in schema for k in COMPOSITION) or "$ref" in schema:
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


def allow_null_where_nullable(schema: dict[str, Any]) -> None:
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


def escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
