"""What real models send: null for an unset optional, OpenAPI's ``nullable``, tied names."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from toolbridge import ToolRegistry, tool
from toolbridge.core.naming import NameIndex
from toolbridge.core.schema import CompiledSchema


@tool
def search(query: str, limit: int = 10, since: str | None = None) -> str:
    """Search the notes."""
    return f"{query} {limit} {since}"


def test_null_for_an_optional_parameter_means_absent_and_is_logged() -> None:
    registry = ToolRegistry([search])
    prepared = registry.prepare_call("search", '{"query": "x", "limit": null}')
    assert prepared.error is None
    assert prepared.arguments == {"query": "x"}
    assert [(r.path, r.action, r.before) for r in prepared.repairs] == [
        ("$.limit", "drop_null", None)
    ]


def test_null_where_the_schema_allows_null_is_kept() -> None:
    registry = ToolRegistry([search])
    prepared = registry.prepare_call("search", '{"query": "x", "since": null}')
    assert prepared.arguments == {"query": "x", "since": None}
    assert prepared.repairs == ()


def test_null_for_a_required_parameter_stays_an_error() -> None:
    registry = ToolRegistry([search])
    error = registry.prepare_call("search", '{"query": null}').error
    assert error is not None and error.kind == "invalid_arguments"
    assert 'at $.query: null is not of type "string"' in error.render()


NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "meeting": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "room": {"type": "string"},
                "size": {"$ref": "#/$defs/Size"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["title"],
        }
    },
    "required": ["meeting"],
    "$defs": {"Size": {"type": "integer", "minimum": 1}},
}


def test_null_optional_in_a_nested_object_is_dropped_too() -> None:
    compiled = CompiledSchema(NESTED)
    sent = {"meeting": {"title": "t", "room": None, "size": None, "note": None}}
    checked = compiled.check(sent)
    assert checked.issues == ()
    assert checked.value == {"meeting": {"title": "t", "note": None}}
    assert [(r.location, r.action) for r in checked.repairs] == [
        (("meeting", "room"), "drop_null"),
        (("meeting", "size"), "drop_null"),  # through $ref: the validator decides
    ]
    assert sent["meeting"]["room"] is None  # the input is never mutated
    missing = compiled.check({"meeting": {"title": None}})
    assert [i.path for i in missing.issues] == ["$.meeting.title"]


NULLABLE: dict[str, Any] = {
    "type": "object",
    "$defs": {"Person": {"type": "object", "properties": {"name": {"type": "string"}}}},
    "properties": {
        "count": {"type": "integer", "nullable": True},
        "color": {"type": "string", "enum": ["red", "blue"], "nullable": True},
        "one": {"const": "x", "nullable": True},
        "who": {"$ref": "#/$defs/Person", "nullable": True},
        "lead": {"allOf": [{"$ref": "#/$defs/Person"}], "nullable": True},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}], "nullable": True},
    },
    "required": ["count", "color", "one", "who", "lead", "either"],
}


def test_nullable_true_lets_null_through_validation() -> None:
    compiled = CompiledSchema(NULLABLE)
    nulls = dict.fromkeys(NULLABLE["required"])
    checked = compiled.check(nulls)
    assert checked.issues == ()
    assert checked.value is nulls and checked.repairs == ()


def test_nullable_keeps_every_other_rule() -> None:
    compiled = CompiledSchema(NULLABLE)
    value = {
        "count": "3",
        "color": "green",
        "one": "y",
        "who": {"name": 1},
        "lead": 5,
        "either": "true",
    }
    checked = compiled.check(value)
    assert checked.value["count"] == 3 and checked.value["who"] == {"name": "1"}
    assert {i.path for i in checked.issues} == {"$.color", "$.one", "$.lead"}


def test_nullable_is_honoured_inside_defs_and_arrays() -> None:
    compiled = CompiledSchema(
        {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
            "$defs": {"N": {"type": "number", "nullable": True}},
        }
    )
    assert compiled.check({"items": [1, None, "2.5"]}).value == {"items": [1, None, 2.5]}
    assert compiled.check({"items": [1, None, "2.5"]}).issues == ()


OPTIONALS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "i": {"type": "integer"},
        "s": {"type": "string", "minLength": 1},
        "e": {"enum": ["a", "b"]},
        "n": {"type": ["number", "null"]},
        "o": {
            "type": "object",
            "properties": {"x": {"type": "boolean"}, "y": {"type": "integer", "nullable": True}},
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
_COMPILED = CompiledSchema(OPTIONALS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(from_schema(OPTIONALS))
def test_property_a_valid_value_comes_back_unchanged(value: dict[str, Any]) -> None:
    checked = _COMPILED.check(value)
    assert checked.issues == ()
    assert checked.value is value and checked.repairs == ()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(from_schema(OPTIONALS), st.sets(st.sampled_from(["i", "s", "e", "n"])))
def test_property_nulls_for_optionals_are_dropped_exactly(
    value: dict[str, Any], nulled: set[str]
) -> None:
    sent = value | dict.fromkeys(nulled)
    checked = _COMPILED.check(sent)
    assert checked.issues == ()
    kept_null = {k for k in nulled if k == "n"}  # "n" allows null: kept as sent
    expected = {k: v for k, v in value.items() if k not in nulled} | dict.fromkeys(kept_null)
    assert checked.value == expected
    assert sorted(r.location[0] for r in checked.repairs) == sorted(nulled - kept_null)


def test_tied_name_suggestions_list_every_tied_name() -> None:
    index = NameIndex(["read_file", "Read-File", "write_file"])
    assert index.suggest("READ_FILE") == ["read_file", "Read-File"]
    index = NameIndex(["get_data", "set_data", "zzz"])
    assert index.suggest("xet_data", 1) == ["get_data", "set_data"]


def test_unknown_tool_error_names_both_tied_tools() -> None:
    @tool
    def get_data(key: str) -> str:
        """Get."""
        return key

    @tool
    def set_data(key: str) -> str:
        """Set."""
        return key

    registry = ToolRegistry([get_data, set_data])
    error = registry.prepare_call("xet_data", {"key": "k"}).error
    assert error is not None
    assert "Did you mean 'get_data' or 'set_data'?" in error.render()


def test_unknown_key_error_names_both_tied_keys() -> None:
    compiled = CompiledSchema(
        {
            "type": "object",
            "properties": {"get_id": {"type": "string"}, "set_id": {"type": "string"}},
        }
    )
    (issue,) = compiled.check({"xet_id": "1"}).issues
    assert "(did you mean 'get_id' or 'set_id'?)" in issue.message
