"""What an MCP server says about a tool, turned into toolbridge terms, or refused.

`input_schema` makes a server's ``inputSchema`` an object schema toolbridge can cast
and validate (a missing ``"type": "object"`` is added; anything that could make the
validator fetch a document from the network is refused). `tool_policy` turns the
tool's annotations into scheduling and approval flags.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import thaw

__all__ = ["ToolPolicy", "input_schema", "output_schema", "tool_policy"]

_KNOWN_DIALECTS = frozenset(
    f"{scheme}://json-schema.org/{path}{end}"
    for scheme in ("http", "https")
    for path in (
        "draft-04/schema",
        "draft-06/schema",
        "draft-07/schema",
        "draft/2019-09/schema",
        "draft/2020-12/schema",
    )
    for end in ("", "#")
)
_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def input_schema(raw: Any, *, owner: str) -> dict[str, Any]:
    """A plain, checked copy of an MCP tool's ``inputSchema`` with ``"type": "object"``.

    MCP requires an object schema, but servers in the wild omit ``type`` (`{}` or just
    ``properties``): that is normalised. A schema of another type, an unknown ``$schema``
    dialect or a reference to another document is refused with `ToolDefinitionError`.
    """
    if not isinstance(raw, Mapping):
        raise ToolDefinitionError(f"{owner}: inputSchema must be a JSON object")
    schema: dict[str, Any] = thaw(raw)
    declared = schema.get("type")
    if declared is None:
        schema["type"] = "object"
    elif declared != "object" and not (isinstance(declared, list) and declared == ["object"]):
        raise ToolDefinitionError(
            f'{owner}: inputSchema must describe an object ("type": "object"), got type '
            f"{declared!r}; tool arguments are always a JSON object"
        )
    else:
        schema["type"] = "object"
    schema.setdefault("properties", {})
    _check_self_contained(schema, owner)
    return schema


def output_schema(raw: Any, *, owner: str) -> dict[str, Any] | None:
    """A plain, checked copy of an ``outputSchema`` (None when the tool has none)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ToolDefinitionError(f"{owner}: outputSchema must be a JSON object")
    schema: dict[str, Any] = thaw(raw)
    _check_self_contained(schema, owner)
    return schema


def _check_self_contained(schema: dict[str, Any], owner: str) -> None:
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in _KNOWN_DIALECTS:
        raise ToolDefinitionError(
            f"{owner}: unknown JSON Schema dialect $schema={dialect!r}; toolbridge knows "
            "drafts 4, 6, 7, 2019-09 and 2020-12 and never fetches a schema from the network"
        )
    for reference in _references(schema):
        if not reference.startswith("#"):
            raise ToolDefinitionError(
                f"{owner}: the schema refers to another document ({reference!r}); only "
                "references inside the schema (starting with '#') are allowed, so that "
                "validation never fetches anything from the network"
            )


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in _REFERENCE_KEYS and isinstance(value, str):
                yield value
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Flags an MCP tool gets from its annotations and its server's trust."""

    read_only: bool
    requires_approval: bool
    idempotent: bool


def tool_policy(annotations: Any, *, trusted: bool, require_approval: bool) -> ToolPolicy:
    """Annotations as flags; an untrusted server's hints can only make policy stricter.

    Trusted: ``readOnlyHint`` makes the tool read-only (and so concurrency-safe); a
    ``destructiveHint`` on a tool that is not read-only needs approval. Untrusted: the
    tool is never read-only, and ``destructiveHint: true`` still needs approval.
    `require_approval` (from the config) puts every tool of the server behind approval.
    """
    read_only_hint = getattr(annotations, "read_only_hint", None) is True
    destructive_hint = getattr(annotations, "destructive_hint", None) is True
    idempotent = getattr(annotations, "idempotent_hint", None) is True
    read_only = trusted and read_only_hint
    destructive = destructive_hint and not read_only
    return ToolPolicy(
        read_only=read_only,
        requires_approval=require_approval or destructive,
        idempotent=idempotent,
    )
