"""Schema-driven casting: conservative, lossless, union-aware, logged."""

from __future__ import annotations

from typing import Any

import pytest

from toolbridge.core.schema import CompiledSchema


def cast(schema: dict[str, Any], value: Any) -> Any:
    compiled = CompiledSchema({"type": "object", "properties": {"v": schema}, "required": ["v"]})
    return compiled.check({"v": value}).value["v"]


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "integer"}, "60", 60),
        ({"type": "integer"}, " 60 ", 60),
        ({"type": "integer"}, "-3", -3),
        ({"type": "integer"}, "+7", 7),
        ({"type": "integer"}, 3.0, 3),
        ({"type": "number"}, "1.5", 1.5),
        ({"type": "number"}, "2", 2),
        ({"type": "number"}, "-1e3", -1000.0),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "FALSE", False),
        ({"type": "boolean"}, "Yes", True),
        ({"type": "boolean"}, "no", False),
        ({"type": "boolean"}, "1", True),
        ({"type": "boolean"}, "0", False),
        ({"type": "string"}, 42, "42"),
        ({"type": "string"}, 1.5, "1.5"),
        ({"type": "object"}, '{"a": 1}', {"a": 1}),
        ({"type": "array"}, "[1, 2]", [1, 2]),
        ({"type": "array", "items": {"type": "integer"}}, '["1", "2"]', [1, 2]),
        ({"enum": [1, 2, 3]}, "2", 2),
        ({"type": "integer", "nullable": True}, "5", 5),
    ],
)
def test_casts_what_the_schema_asks_for(schema: dict[str, Any], value: Any, expected: Any) -> None:
    result = cast(schema, value)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, "1.5"),  # would lose the fraction
        ({"type": "integer"}, 1.5),
        ({"type": "integer"}, True),  # bool is not a number
        ({"type": "number"}, True),
        ({"type": "number"}, "nan"),
        ({"type": "number"}, "inf"),
        ({"type": "number"}, "-Infinity"),
        ({"type": "number"}, "1e999"),  # overflows to inf
        ({"type": "integer"}, "١٢"),  # non-ASCII digits
        ({"type": "boolean"}, 1),  # number -> bool never
        ({"type": "boolean"}, "maybe"),
        ({"type": "string"}, True),  # bool -> string never
        ({"type": "string"}, {"a": 1}),  # object -> string never (no Python repr)
        ({"type": "string"}, [1]),
        ({"type": "string"}, None),  # null -> "" never
        ({"type": "array"}, "x"),  # a single value never becomes [value]
        ({"type": "array"}, 5),
        ({"type": "object"}, "[1]"),  # JSON text of the wrong container
        ({"type": "object"}, '{"a": NaN}'),
        ({"type": "object"}, "{broken"),
    ],
)
def test_never_casts_lossy_or_ambiguous_values(schema: dict[str, Any], value: Any) -> None:
    result = cast(schema, value)
    assert result is value


def test_big_integers_stay_exact() -> None:
    big = 10**400
    assert cast({"type": "number"}, big) is big
    assert cast({"type": "integer"}, str(big)) == big
    assert isinstance(cast({"type": "number"}, str(big)), int)


def test_json_text_is_decoded_at_any_depth_then_cast() -> None:
    schema = {
        "type": "object",
        "properties": {
            "outer": {
                "type": "object",
                "properties": {
                    "inner": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}, "tags": {"type": "array"}},
                    }
                },
            }
        },
    }
    compiled = CompiledSchema(schema)
    raw = {"outer": '{"inner": "{\\"n\\": \\"5\\", \\"tags\\": \\"[1]\\"}"}'}
    result = compiled.check(raw)
    assert result.value == {"outer": {"inner": {"n": 5, "tags": [1]}}}
    assert [(r.path, r.action) for r in result.repairs] == [
        ("$.outer", "decode_json"),
        ("$.outer.inner", "decode_json"),
        ("$.outer.inner.n", "cast"),
        ("$.outer.inner.tags", "decode_json"),
    ]


def test_type_list_keeps_values_that_already_match() -> None:
    # nanobot's bug: ["string", "integer"] cast 7 to "7"
    assert cast({"type": ["string", "integer"]}, 7) == 7
    assert cast({"type": ["string", "integer"]}, "7") == "7"
    assert cast({"type": ["integer", "null"]}, None) is None
    assert cast({"type": ["integer", "null"]}, "4") == 4


def test_union_branch_is_taken_only_if_the_cast_value_validates() -> None:
    schema = {"anyOf": [{"type": "integer", "minimum": 10}, {"type": "boolean"}]}
    assert cast(schema, "12") == 12
    assert cast(schema, "1") is True  # "1" -> 1 fails minimum: integer branch refused
    assert cast(schema, "5") == "5"  # no branch validates: unchanged, validation reports it


def test_optional_from_pydantic_and_refs_are_followed() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            }
        },
        "properties": {
            "p": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
            "ps": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
        },
    }
    compiled = CompiledSchema(schema)
    result = compiled.check({"p": '{"x": "1", "y": 2}', "ps": [{"x": "3", "y": "4"}]})
    assert result.value == {"p": {"x": 1, "y": 2}, "ps": [{"x": 3, "y": 4}]}
    assert compiled.check(result.value).issues == ()


def test_all_of_pattern_and_additional_properties_and_prefix_items() -> None:
    schema = {
        "type": "object",
        "properties": {
            "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}]},
            "pat": {"type": "object", "patternProperties": {"^n_": {"type": "number"}}},
            "extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        },
    }
    compiled = CompiledSchema(schema)
    result = compiled.check(
        {
            "both": {"a": "1"},
            "pat": {"n_x": "2.5", "other": "2.5"},
            "extra": {"k": "true"},
            "pair": ["1", 2],
        }
    )
    assert result.value == {
        "both": {"a": 1},
        "pat": {"n_x": 2.5, "other": "2.5"},
        "extra": {"k": True},
        "pair": [1, "2"],
    }


def test_recursive_schema_casts_at_depth() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
            }
        },
        "properties": {"head": {"$ref": "#/$defs/Node"}},
    }
    compiled = CompiledSchema(schema)
    value = {"head": {"v": "1", "next": {"v": "2", "next": {"v": "3", "next": None}}}}
    assert compiled.check(value).value == {
        "head": {"v": 1, "next": {"v": 2, "next": {"v": 3, "next": None}}}
    }


def test_unchanged_input_is_returned_as_the_same_object() -> None:
    compiled = CompiledSchema(
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array"}}}
    )
    value = {"a": 1, "b": [1, 2]}
    result = compiled.check(value)
    assert result.value is value
    assert result.repairs == ()


def test_casting_never_mutates_the_input() -> None:
    compiled = CompiledSchema({"type": "object", "properties": {"a": {"type": "integer"}}})
    value = {"a": "1"}
    compiled.check(value)
    assert value == {"a": "1"}
