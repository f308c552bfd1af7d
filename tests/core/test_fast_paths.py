"""The fast paths of `prepare_call` answer exactly as the general ones do."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import jsonschema_rs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from toolbridge import ToolRegistry, tool
from toolbridge.core.casting import CastState
from toolbridge.core.jsondata import json_data_issues
from toolbridge.core.schema import Checked, CompiledSchema
from toolbridge.core.schema_issues import MAX_ISSUES, capped, castable, render_errors


@tool
def schedule_meeting(title: str) -> str:
    """Schedule."""
    return title


@tool
def schedule_meetings(title: str) -> str:
    """Schedule many."""
    return title


def test_a_remembered_unknown_tool_error_is_the_one_a_fresh_registry_writes() -> None:
    registry = ToolRegistry([schedule_meeting])
    first = registry.prepare_call("schedule_meting", {}).error
    again = registry.prepare_call("schedule_meting", {}).error
    fresh = ToolRegistry([schedule_meeting]).prepare_call("schedule_meting", {}).error
    assert first is not None and again is not None and fresh is not None
    assert again.render() == first.render() == fresh.render()
    assert "Did you mean 'schedule_meeting'?" in again.render()


def test_remembered_unknown_tool_errors_follow_every_change_of_tools() -> None:
    registry = ToolRegistry([schedule_meeting])
    assert registry.prepare_call("schedule_meetings", {}).error is not None
    registry.register(schedule_meetings)
    assert registry.prepare_call("schedule_meetings", {"title": "t"}).error is None
    error = registry.prepare_call("schedule_meetingz", {}).error
    assert error is not None and "'schedule_meetings'" in error.render()
    registry.unregister("schedule_meetings")
    error = registry.prepare_call("schedule_meetings", {}).error
    assert error is not None and "Did you mean 'schedule_meeting'?" in error.render()


def test_many_unknown_names_stay_bounded_and_correct() -> None:
    registry = ToolRegistry([schedule_meeting])
    for index in range(500):
        error = registry.prepare_call(f"other_{index}", {}).error
        assert error is not None and f"'other_{index}'" in error.render()
    assert len(registry._unknown_errors) <= 64
    long_name = "x" * 1_000
    error = registry.prepare_call(long_name, {}).error
    assert error is not None and long_name not in registry._unknown_errors


# --- CompiledSchema.check against the general order, written out ------------------------

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    {
        "type": "object",
        "$defs": {"Priority": {"enum": ["low", "normal", "high"]}},
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "start": {"type": "string", "format": "date-time"},
            "priority": {"$ref": "#/$defs/Priority"},
            "count": {"type": "number", "minimum": 0},
            "flags": {"type": "array", "items": {"type": "boolean"}},
            "who": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                    "required": ["name"],
                },
            },
            "note": {"type": ["string", "null"]},
        },
        "required": ["title", "start"],
    },
    {
        "type": "object",
        "properties": {
            "u": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            "extra": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "additionalProperties": False,
    },
    {  # no integer anywhere: "settled", valid values skip the cast pass
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "count": {"type": "number"},
            "flags": {"type": "array", "items": {"type": "boolean"}},
            "who": {"type": "object", "properties": {"name": {"type": "string"}}},
            "note": {"type": "string", "nullable": True},
        },
        "required": ["title"],
    },
]
_COMPILED = [CompiledSchema(schema) for schema in SCHEMAS]
assert _COMPILED[-1].settled

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([1.0, 2.5, -0.5]),
    st.sampled_from(
        ["", "1", "60", "1.5", "true", "yes", "x", "low", "urgent", "2026-05-04T15:30:00Z", "[1]"]
    ),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "age", "k"]), inner, max_size=3)
    ),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    ["a", "b", "title", "start", "priority", "count", "flags", "who", "note", "u", "extra", "zz"]
)


def general_check(compiled: CompiledSchema, value: Any) -> Checked:
    """The general order, written out: validate, errors (and whether a cast could help),
    then the cast pass; whatever shortcut `check` takes must answer the same."""
    validator = compiled._validator
    if compiled.settled:
        if validator.is_valid(value):
            return Checked(value, (), ())
        errors = list(itertools.islice(validator.iter_errors(value), MAX_ISSUES + 1))
        if not any(castable(error) for error in errors):
            return Checked(value, (), capped(list(render_errors(errors, set()))))
    state = CastState()
    new = value if compiled._caster is None else compiled._caster(value, (), state)
    repairs = tuple(state.repairs)
    if not state.unknown_paths and validator.is_valid(new):
        return Checked(new, repairs, ())
    return Checked(new, repairs, compiled._issues(new, state))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SCHEMAS))), st.dictionaries(_KEYS, _VALUES, max_size=5))
@example(0, {"a": 1.0})  # a cast that changes nothing a missing key is about
@example(0, {"a": "1", "b": "2"})
@example(1, {"title": "t", "start": "2026-05-04T15:30:00Z", "count": 2.0, "priority": "urgent"})
@example(1, {"title": "", "count": "1"})
@example(2, {"u": "true", "zz": 1})
@example(3, {"count": "2.5", "note": None})
@example(3, {"title": "t", "count": "2.5", "who": '{"name": 1}'})
def test_property_check_answers_as_the_general_order(index: int, value: dict[str, Any]) -> None:
    compiled = _COMPILED[index]
    fast = compiled.check(value, plain=True)
    general = general_check(compiled, value)
    assert fast == general
    assert (fast.value is value) == (general.value is value)
    if not fast.issues:  # jsonschema-rs, as the oracle, agrees with what runs
        oracle = jsonschema_rs.validator_for(SCHEMAS[index])
        assert oracle.is_valid(fast.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_valid_values_take_the_shortcut_unchanged(data: st.DataObject) -> None:
    index = data.draw(st.sampled_from(range(len(SCHEMAS))))
    schema = dict(SCHEMAS[index]) | {"additionalProperties": False}
    value = data.draw(from_schema(schema))
    checked = _COMPILED[index].check(value)
    if not checked.issues:
        assert checked == general_check(_COMPILED[index], value)


# --- the plain-data check of dict arguments: validator + marshal against the walk -------

TYPED: list[dict[str, Any]] = [
    {
        "type": "object",
        "$defs": {
            "Person": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "score": {"type": "number"}},
            },
            "Level": {"enum": ["low", "high"], "type": "string"},
        },
        "properties": {
            "title": {"type": "string"},
            "level": {"$ref": "#/$defs/Level"},
            "people": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "flag": {"type": "boolean"},
        },
    },
    {
        "type": "object",
        "properties": {
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            "n": {"type": "integer"},
        },
    },
]
_TYPED = [CompiledSchema(schema) for schema in TYPED]


class _Text(str):
    pass


class _Number(float):
    pass


_HOSTILE = st.one_of(
    st.sampled_from(
        [
            "\ud800",
            "a\udfffb",
            "\ud83d\ude00",
            "😀",
            "café",
            float("nan"),
            float("inf"),
            -float("inf"),
            2**64,
            Decimal("1.5"),
            b"bytes",
            bytearray(b"x"),
            {1, 2},
            frozenset({"a"}),
            (1, 2),
            ("a",),
            1j,
            ...,
            _Text("sub"),
            _Number(1.5),
            object(),
            True,
            None,
            0,
            32767,
            -1.5,
            "low",
            "x",
        ]
    ),
    st.text(max_size=5),
    st.integers(4298, 4301).map(lambda digits: 10**digits),  # around MAX_INT_DIGITS
    st.integers(4298, 4301).map(lambda digits: -(10**digits)),
    st.integers(),
    st.floats(),
)
_HOSTILE_VALUES = st.recursive(
    _HOSTILE,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["name", "score", "a", 1, None, 2.5, "\ud800", _Text("name")]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)


def walked_check(compiled: CompiledSchema, value: Any) -> Checked:
    """The general order: the Python walk over every value first, then `check`."""
    if found := json_data_issues(value):
        return Checked(value, (), capped(found))
    return compiled.check(value, plain=True)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(TYPED))),
    st.dictionaries(
        st.sampled_from(["title", "level", "people", "counts", "tags", "flag", "grid", "n"]),
        _HOSTILE_VALUES,
        max_size=4,
    ),
)
@example(0, {"title": "\ud800"})
@example(0, {"people": [{"name": "a", "score": float("nan")}]})
@example(0, {"counts": {"a": 10**4300}})
@example(0, {"counts": {1: 2}})
@example(0, {"tags": ("a", "b")})
@example(0, {"tags": {"a"}})
@example(0, {"people": [{"name": _Text("a")}]})
@example(0, {"people": [{"score": Decimal("1")}]})
@example(1, {"grid": [[1.5, float("inf")]]})
@example(1, {"grid": [[1.5, 2]], "n": 3.0})
def test_property_dict_arguments_are_refused_as_the_walk_refuses(
    index: int, value: dict[str, Any]
) -> None:
    compiled = _TYPED[index]
    assert compiled._typed
    fast = compiled.check(value)
    general = walked_check(compiled, value)
    assert fast == general or _both_nan_equal(fast, general)
    assert (fast.value is value) == (general.value is value)


def _both_nan_equal(first: Checked, second: Checked) -> bool:
    """NaN != NaN: compare what was said, when the values only differ by holding NaN."""
    return (first.repairs, first.issues) == (second.repairs, second.issues) and repr(
        first.value
    ) == repr(second.value)


def test_only_fully_typed_schemas_take_the_validator_for_the_walk() -> None:
    untyped = [
        {"type": "object"},  # any keys, any values
        {"type": "object", "properties": {"a": {}}},
        {"type": "object", "properties": {"a": {"type": "array"}}},  # untyped items
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "patternProperties": {"x": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"type": "object"}}, "additionalProperties": True},
        {  # recursive: nesting has no bound
            "type": "object",
            "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
            "properties": {"head": {"$ref": "#/$defs/N"}},
        },
    ]
    for schema in untyped:
        assert not CompiledSchema(schema)._typed, schema
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(128):  # with the object around it: 129 levels, one too many
        deep = {"type": "array", "items": deep}
    assert not CompiledSchema({"type": "object", "properties": {"a": deep}})._typed
    assert all(compiled._typed for compiled in _TYPED)
