"""Property tests: a value that already satisfies its schema comes back unchanged.

toolbridge refuses keys a schema does not declare unless it explicitly allows extras,
so these schemas say ``additionalProperties`` everywhere: hypothesis-jsonschema then
generates exactly the values toolbridge calls valid.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from toolbridge.core.schema import CompiledSchema

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "s": {"type": "string"},
            "b": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "u": {"type": ["string", "integer", "null"]},
            "o": {"anyOf": [{"type": "integer"}, {"type": "boolean"}, {"type": "string"}]},
            "nested": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "array"}},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
    {
        "type": "object",
        "$defs": {
            "Person": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
                "additionalProperties": False,
            }
        },
        "properties": {
            "people": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
            "lead": {"anyOf": [{"$ref": "#/$defs/Person"}, {"type": "null"}]},
            "free": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "additionalProperties": False,
    },
]


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_valid_values_are_returned_unchanged(data: st.DataObject) -> None:
    for schema in SCHEMAS:
        compiled = CompiledSchema(schema)
        value = data.draw(from_schema(schema))
        before = json.dumps(value, sort_keys=True)
        result = compiled.check(value)
        # an integral float at an integer node may become int: equal in JSON, no repair
        # otherwise; every other valid value must come back as the very same object
        assert _same(result.value, value)
        if not result.repairs:
            assert result.value is value
        assert json.dumps(value, sort_keys=True) == before  # input not mutated
        assert compiled.check(result.value).issues == ()


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_integer_strings_cast_exactly(n: int) -> None:
    compiled = CompiledSchema({"type": "object", "properties": {"v": {"type": "integer"}}})
    assert compiled.check({"v": str(n)}).value == {"v": n}


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_strings_round_trip(x: float) -> None:
    compiled = CompiledSchema({"type": "object", "properties": {"v": {"type": "number"}}})
    assert compiled.check({"v": repr(x)}).value["v"] == x
