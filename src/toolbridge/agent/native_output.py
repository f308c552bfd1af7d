"""`NativeOutput`: the run's answer schema as the providers' native structured output
takes it, in the three forms their rules need.

One neutral value, made once per runner: the full JSON Schema (Gemini, Ollama, and
OpenAI when strict mode cannot express it), the OpenAI strict form (every object closed
and every property required, only the keywords strict mode supports) and the closed
form Anthropic and Bedrock take (every object closed; keywords their grammar compiler
does not support are moved into the description, since the answer is validated
client-side anyway). A form that cannot express the schema without changing what it
accepts is None, with the reason. Each adapter renders its provider's request option
from this value; it must not change the mappings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolbridge.core.sendable import sendable, sendable_text
from toolbridge.formats.schemas import UnsupportedSchema, openai_strict

__all__ = ["NativeOutput"]

Schema = dict[str, Any]

_CLOSED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "allOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
    }
)
"""The keywords Anthropic's (and Bedrock's) JSON outputs accept as they are; ``format``
and ``minItems`` are accepted only for some values (below)."""

_CLOSED_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


class _Inexpressible(Exception):
    """A schema a form cannot express; the message says why."""


def _each_subschema(node: Schema, convert: Callable[[Any], Any]) -> Schema:
    """`node` with `convert` applied to each of its direct subschemas."""
    out = dict(node)
    for key in ("properties", "$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {name: convert(sub) for name, sub in out[key].items()}
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [convert(sub) for sub in out[key]]
    if isinstance(out.get("items"), dict):
        out["items"] = convert(out["items"])
    return out


def _transform(schema: Any, rule: Callable[[Schema], Schema]) -> Any:
    """`schema` with `rule` applied to every subschema, innermost first."""
    if not isinstance(schema, dict):
        return schema
    return rule(_each_subschema(schema, lambda sub: _transform(sub, rule)))


def _close(node: Schema) -> None:
    """Close an object schema (``additionalProperties: false``), or raise if it is open."""
    if node.get("type") != "object" and "properties" not in node:
        return
    extra = node.get("additionalProperties", False)
    if extra is not False:
        raise _Inexpressible(
            "an object in the schema allows keys beyond its properties (a dict or "
            "extra='allow' model)"
        )
    node["additionalProperties"] = False


def _every_property_required(node: Schema) -> Schema:
    """Refuse optional properties: strict mode would make them required and nullable, and
    pydantic would then get null where it expects the field's default."""
    if "properties" in node:
        optional = sorted(set(node["properties"]) - set(node.get("required", ())))
        if optional:
            raise _Inexpressible(
                f"strict mode requires every property; optional: {', '.join(optional)}"
            )
    return node


def _strict_form(schema: Schema) -> tuple[Schema | None, str | None]:
    """OpenAI's strict form (the tool definitions' own converter), when every property is
    required; else None and why."""
    every, problem = _form(schema, _every_property_required)
    if every is None:
        return None, problem
    try:
        return openai_strict(every), None
    except UnsupportedSchema as exc:
        return None, str(exc)


def _closed_rule(node: Schema) -> Schema:
    if "oneOf" in node and "anyOf" not in node:  # validated client-side as oneOf anyway
        node["anyOf"] = node.pop("oneOf")
    _close(node)
    moved = {
        key: node.pop(key)
        for key in list(node)
        if key not in _CLOSED_KEYWORDS
        and not (key == "format" and node[key] in _CLOSED_FORMATS)
        and not (key == "minItems" and node[key] in (0, 1))
    }
    if moved:
        note = "{" + ", ".join(f"{key}: {json.dumps(value)}" for key, value in moved.items()) + "}"
        description = node.get("description")
        node["description"] = f"{description}\n\n{note}" if description else note
    return node


def _form(schema: Schema, rule: Callable[[Schema], Schema]) -> tuple[Schema | None, str | None]:
    try:
        return _transform(schema, rule), None
    except _Inexpressible as exc:
        return None, str(exc)


@dataclass(frozen=True, slots=True)
class NativeOutput:
    """The answer's JSON Schema for a provider's native structured output.

    `schema` is the full schema (an object at the root). `strict_schema` is its OpenAI
    strict form, None when strict mode cannot express it (`strict_problem` says why);
    `closed_schema` is the form with every object closed and unsupported keywords moved
    into descriptions (Anthropic, Bedrock), None when an object is open
    (`closed_problem`).
    """

    name: str
    schema: Mapping[str, Any]
    description: str | None = None
    strict_schema: Mapping[str, Any] | None = None
    strict_problem: str | None = None
    closed_schema: Mapping[str, Any] | None = None
    closed_problem: str | None = None

    @classmethod
    def from_schema(
        cls, schema: Mapping[str, Any], *, name: str | None = None, description: str | None = None
    ) -> NativeOutput:
        """The three forms of `schema`; `name` defaults to its title (a provider-safe name).
        Sent as it can be: each lone surrogate (a field's description, say) written as the
        six characters ``\\udc80``, as tool definitions are (`core.sendable`)."""
        full = dict(sendable(schema))
        description = sendable_text(description) if description is not None else None
        strict, strict_problem = _strict_form(full)
        closed, closed_problem = _form(full, _closed_rule)
        title = name or str(full.get("title") or "output")
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64] or "output"
        return cls(safe, full, description, strict, strict_problem, closed, closed_problem)
