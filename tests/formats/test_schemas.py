"""Schema adaptation keeps the meaning: checked on instances generated from the schemas."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from toolbridge import ToolRegistry
from toolbridge.formats import openai_chat
from toolbridge.formats.schemas import (
    UnsupportedSchema,
    drop_strict_nulls,
    gemini_parameters,
    inline_refs,
    json_schema_from_gemini,
    openai_strict,
)

_CLOSED = {"type": "object", "additionalProperties": False}
SCHEMAS: list[dict[str, Any]] = [
    {
        **_CLOSED,
        "properties": {
            "path": {"type": "string", "pattern": "^[a-z]+$"},
            "limit": {"type": "integer", "minimum": 1, "default": 10},
            "mode": {"enum": ["r", "w"]},
            "note": {"type": ["string", "null"]},
        },
        "required": ["path"],
    },
    {
        **_CLOSED,
        "properties": {
            "point": {"$ref": "#/$defs/Point", "description": "where"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "$defs": {
            "Point": {
                **_CLOSED,
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x"],
            }
        },
    },
    {
        **_CLOSED,
        "properties": {
            "value": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            "flag": {"type": "boolean"},
            "choice": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
        },
        "required": ["flag"],
    },
]
PROFILE = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _instances(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Valid instances; hypothesis-jsonschema rewrites the schema it gets, so give it a copy."""
    return from_schema(copy.deepcopy(schema))


def _fill_nulls(value: Any, schema: dict[str, Any]) -> Any:
    """What a model in strict mode sends for `value`: every optional key present, null."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for key, sub in schema["properties"].items():
            out[key] = _fill_nulls(out[key], sub) if key in out else None
        return out
    return value


@pytest.mark.parametrize("schema", SCHEMAS, ids=["optional", "refs", "unions"])
@PROFILE
@given(data=st.data())
def test_strict_mode_round_trip(schema: dict[str, Any], data: st.DataObject) -> None:
    original = jsonschema_rs.validator_for(schema)
    strict_schema = openai_strict(schema)
    strict = jsonschema_rs.validator_for(strict_schema)
    inlined = inline_refs(schema)
    sent = data.draw(_instances(schema))
    assert strict.is_valid(_fill_nulls(sent, inlined))  # every valid call stays expressible
    back = drop_strict_nulls(_fill_nulls(sent, inlined), schema)
    assert original.is_valid(back)
    forced = data.draw(_instances(strict_schema))
    assert original.is_valid(drop_strict_nulls(forced, schema))  # strict output always runs


@pytest.mark.parametrize("schema", SCHEMAS, ids=["optional", "refs", "unions"])
@PROFILE
@given(data=st.data())
def test_gemini_parameters_accept_the_same_instances(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    back = json_schema_from_gemini(gemini_parameters(schema))
    original = jsonschema_rs.validator_for(schema)
    adapted = jsonschema_rs.validator_for(back)
    assert adapted.is_valid(data.draw(_instances(schema)))
    assert original.is_valid(data.draw(_instances(back)))


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "properties": {"a": {}}}, "accepts any value"),
        ({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}, "minLength"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "open objects"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}, "'uri'"),
        (
            {"type": "object", "properties": {"n": {"$ref": "#"}}},
            "recursive",
        ),
    ],
)
def test_strict_mode_refuses_what_it_cannot_express(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsupportedSchema, match=reason):
        openai_strict(schema)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "properties": {"a": {"const": 3}}}, "strings only"),
        ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "several"),
        ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}, "'oneOf'"),
        ({"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 0}}}, "ex"),
        ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "pattern"),
    ],
)
def test_gemini_refuses_what_parameters_cannot_express(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsupportedSchema, match=reason):
        gemini_parameters(schema)


def test_ref_siblings_that_interact_become_all_of() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/Closed", "properties": {"b": {"type": "string"}}}},
        "$defs": {"Closed": {"type": "object", "additionalProperties": False}},
    }
    inlined = inline_refs(schema)
    assert "allOf" in inlined["properties"]["p"]  # merging would have allowed "b"
    assert not jsonschema_rs.is_valid(inlined, {"p": {"b": "x"}})
    assert not jsonschema_rs.is_valid(schema, {"p": {"b": "x"}})


def test_parse_response_undoes_strict_nulls(registry: ToolRegistry) -> None:
    def response(arguments: str, name: str = "read_file") -> dict[str, Any]:
        call = {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}

    forced = json.dumps({"path": "a", "limit": None, "encoding": None})
    (call,) = openai_chat.parse_response(response(forced), tools=registry, strict=None).calls
    assert call.arguments == {"path": "a", "encoding": None}  # limit's default applies
    prepared = registry.prepare_call(call.name, call.arguments)
    assert prepared.ok and prepared.arguments == {"path": "a", "encoding": None}
    plain = '{"path": "a", "limit": 3, "encoding": null}'
    strict_parse = {"tools": registry, "strict": None}
    assert openai_chat.parse_response(response(plain), **strict_parse).calls[0].arguments == plain
    cut = '{"path": "a", "limit": nu'
    assert openai_chat.parse_response(response(cut), **strict_parse).calls[0].arguments == cut
    untouched = openai_chat.parse_response(response(forced), tools=registry, strict=False)
    assert untouched.calls[0].arguments == forced
    open_tool = '{"labels": null}'
    parsed = openai_chat.parse_response(response(open_tool, "tag"), **strict_parse)
    assert parsed.calls[0].arguments == open_tool  # sent with strict: false, so no undo
