"""Fuzz the argument boundary: `ToolRegistry.prepare_call`/`execute` and the replay repair.

Schemas come from a fixed list of varied, realistic shapes and from a generator;
inputs are values that satisfy the schema (hypothesis-jsonschema) and arbitrary
Python objects, JSON text (cut, spliced, with lone surrogates and huge numbers) and
bytes. The properties are the registry's documented contract:

- only the documented result: a `PreparedCall` whose error, if any, renders as a
  bounded ``Error: ...`` text; never an exception;
- the tool runs exactly when no error is reported;
- accepted arguments are valid against the schema and encode as strict UTF-8 JSON;
- the input is never mutated;
- a value that satisfies the schema comes back equal, and as the very same object
  when nothing was repaired.

``make fuzz`` runs the same tests with the long profile (see tests/fuzz/conftest.py).
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import math
import pickle
from collections.abc import Mapping
from typing import Any

import jsonschema_rs
import pydantic
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from tests.fuzz.conftest import FUZZ_SETTINGS

from toolbridge import (
    ErrorKind,
    PreparedCall,
    Tool,
    ToolDefinitionError,
    ToolRegistry,
    tool,
)
from toolbridge.core import jsondata
from toolbridge.core.calls import repair_arguments_for_replay
from toolbridge.core.frozen import thaw

# --- schemas -------------------------------------------------------------------------

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {}},
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 40},
            "start": {"type": "string", "format": "date-time"},
            "priority": {"enum": ["low", "normal", "high"]},
            "attendees": {
                "type": "array",
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
                    "required": ["name"],
                },
            },
        },
        "required": ["title"],
    },
    {
        "type": "object",
        "properties": {
            "w": {"type": "number"},
            "flag": {"type": "boolean"},
            "maybe": {"type": ["integer", "null"]},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 5}]},
            "one": {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "number"}}]},
            "const": {"const": 7},
        },
    },
    {
        "type": "object",
        "properties": {"free": {"type": "object"}, "any": {}, "list": {"type": "array"}},
        "additionalProperties": {"type": "integer"},
    },
    {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "maxItems": 3, "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["value"],
            }
        },
    },
    {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            },
            "pairs": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        },
        "patternProperties": {"^meta_": {"type": "string"}},
    },
]

_SCALAR_TYPES = ["string", "integer", "number", "boolean", "null"]


def _scalar_schema() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.sampled_from(_SCALAR_TYPES).map(lambda t: {"type": t}),
        st.lists(st.sampled_from(_SCALAR_TYPES), min_size=1, max_size=3, unique=True).map(
            lambda ts: {"type": ts}
        ),
        st.lists(st.integers(-3, 3) | st.sampled_from(["a", "b", "1"]), min_size=1, max_size=4)
        .map(lambda vs: list(dict.fromkeys(vs)))
        .map(lambda vs: {"enum": vs}),
        st.integers(0, 5).map(lambda n: {"type": "integer", "minimum": n}),
    )


def _node(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(["a", "b", "n", "text", "arguments", "x y"])
    return st.one_of(
        st.dictionaries(names, children, max_size=4).map(
            lambda props: {"type": "object", "properties": props}
        ),
        children.map(lambda items: {"type": "array", "items": items, "maxItems": 4}),
        st.lists(children, min_size=1, max_size=3).map(lambda bs: {"anyOf": bs}),
        children.map(lambda inner: {"anyOf": [inner, {"type": "null"}]}),
    )


generated_schemas = st.dictionaries(
    st.sampled_from(["a", "b", "n", "text", "arguments", "x y", "ø"]),
    st.recursive(_scalar_schema(), _node, max_leaves=8),
    max_size=5,
).map(lambda props: {"type": "object", "properties": props})


def closed(schema: Any) -> Any:
    """`schema` as toolbridge validates it: an object node with properties and nothing
    that admits other keys is closed (`additionalProperties: false`)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    opens = ("additionalProperties", "patternProperties", "unevaluatedProperties", "$ref")
    if "properties" in out and not any(k in out for k in opens):
        out["additionalProperties"] = False
    return out


class Recorder(Tool):
    """A tool over any schema that counts its runs."""

    name = "fuzzed"
    description = "counts its calls"

    def __init__(self, parameters: dict[str, Any]) -> None:
        self.parameters = parameters
        self.runs = 0

    async def execute(self, **kwargs: Any) -> Any:
        self.runs += 1
        return "ran"


_ORACLES: dict[str, Any] = {}


def _oracle(schema: dict[str, Any]) -> Any:
    """A validator of `schema` as toolbridge validates it (compiled once per schema)."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _ORACLES:
        _ORACLES[key] = jsonschema_rs.validator_for(closed(schema), validate_formats=True)
    return _ORACLES[key]


def registry_for(schema: dict[str, Any]) -> tuple[ToolRegistry, Recorder] | None:
    """A registry holding a `Recorder` for `schema`, or None when registration refuses it
    (with `ToolDefinitionError`, the only exception registration may raise)."""
    tool = Recorder(schema)
    try:
        return ToolRegistry([tool]), tool
    except ToolDefinitionError:
        return None


# --- inputs ----------------------------------------------------------------------------

_SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udc00b", "\ud83d", "\ude00x"])
texts = st.one_of(st.text(max_size=20), _SURROGATES, st.sampled_from(["1", "2.5", "yes", "{}"]))
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**300, max_value=10**320),
    # at and past the 4,300 digits Python reads and writes (built lazily: repr() of such
    # an integer raises, and hypothesis shows strategies by their repr)
    st.sampled_from([4299, 4300, -4301]).map(lambda e: 10 ** abs(e) * (1 if e > 0 else -1)),
    st.floats(),  # nan and infinities included
    st.sampled_from([0.0, -0.0, 1e308, 5e-324, 3.0]),
)
number_texts = st.sampled_from(
    ["1e400", "-1e400", "0e99999999999999999999", "1e-99999999999999999999", "1" * 400, "1.5"]
)
not_json = st.one_of(
    st.binary(max_size=8),
    st.sets(st.integers(), max_size=3),
    st.frozensets(st.text(max_size=3), max_size=2),
    st.builds(object),
    st.complex_numbers(allow_nan=True),
)
json_scalars = st.one_of(st.none(), st.booleans(), numbers, texts, number_texts)
keys = st.one_of(
    st.sampled_from(["a", "b", "n", "w", "text", "tree", "free", "arguments", "meta_x", "x y"]),
    st.text(max_size=8),
    _SURROGATES,
)
python_values = st.recursive(
    st.one_of(json_scalars, not_json),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(keys | st.integers(), children, max_size=4),
    ),
    max_leaves=16,
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=16,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """JSON text of an arbitrary value, then perhaps cut, spliced or made deep."""
    value = draw(st.dictionaries(keys, json_values, max_size=5) | json_values)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    mutation = draw(st.integers(0, 6))
    if mutation == 1 and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif mutation == 2:
        at = draw(st.integers(0, len(text)))
        splice = draw(number_texts | st.sampled_from(['"\\ud800"', "\\u", '"', ",", "NaN"]))
        text = text[:at] + splice + text[at:]
    elif mutation == 3:
        depth = draw(st.integers(200, 3_000))
        text = '{"a": ' + "[" * depth + "]" * depth * draw(st.integers(0, 1)) + "}"
    elif mutation == 4:
        text = json.dumps({"arguments": text})
    return text


raw_arguments = st.one_of(
    st.none(),
    json_texts(),
    json_texts().map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
    python_values,
    st.dictionaries(keys, python_values, max_size=6),
    st.dictionaries(keys, python_values, max_size=2).map(lambda d: {"arguments": d}),
)


# --- properties -------------------------------------------------------------------------


def check_contract(
    registry: ToolRegistry, tool: Recorder, schema: dict[str, Any], raw: Any, name: Any = "fuzzed"
) -> PreparedCall:
    """Prepare and execute `raw`; assert the documented contract; return the prepared call."""
    before = pickle.dumps(raw)
    prepared = registry.prepare_call(name, raw)
    assert isinstance(prepared, PreparedCall)
    assert (prepared.error is None) == (prepared.arguments is not None)
    if prepared.error is not None:
        assert isinstance(prepared.error.kind, ErrorKind)
        text = prepared.error.render()
        assert text.startswith("Error: ")
        assert len(text) < 5_000, text[:300]
    else:
        assert prepared.tool is tool
        encoded = json.dumps(prepared.arguments, allow_nan=False, ensure_ascii=False)
        encoded.encode("utf-8")  # no lone surrogate reaches a tool
        assert _oracle(schema).is_valid(prepared.arguments)
    runs = tool.runs
    result = asyncio.run(registry.execute(name, raw))
    assert result.is_error == (prepared.error is not None)
    assert tool.runs == runs + (prepared.error is None)
    assert pickle.dumps(raw) == before  # never mutated
    return prepared


@FUZZ_SETTINGS
@given(st.sampled_from(range(len(SCHEMAS))), raw_arguments)
def test_arbitrary_input_gets_the_documented_result(index: int, raw: Any) -> None:
    schema = SCHEMAS[index]
    built = registry_for(schema)
    assert built is not None
    check_contract(*built, schema, raw)


@FUZZ_SETTINGS
@given(st.one_of(st.none(), st.integers(), st.text(max_size=70), st.binary(max_size=4)))
def test_any_tool_name_gets_the_documented_result(name: Any) -> None:
    registry, tool = registry_for(SCHEMAS[1])  # type: ignore[misc]
    prepared = check_contract(registry, tool, SCHEMAS[1], '{"a": 1, "b": 2}', name)
    assert (prepared.error is None) == (name == "fuzzed")


def _unchanged(schema: dict[str, Any], value: Any) -> None:
    # hypothesis-jsonschema speaks draft 7 (no prefixItems): the validator is the oracle
    assume(_oracle(schema).is_valid(value))
    built = registry_for(schema)
    assert built is not None
    registry, tool = built
    prepared = check_contract(registry, tool, schema, value)
    assert prepared.error is None, prepared.error.render()  # type: ignore[union-attr]
    assert _same(prepared.arguments, value)
    if not prepared.repairs:
        assert prepared.arguments is value
    as_text = registry.prepare_call("fuzzed", json.dumps(value))
    assert as_text.error is None and _same(as_text.arguments, value)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (3.0 at an integer node becomes 3, a recorded repair)."""
    return _integral(a) == _integral(b)


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_integral(v) for v in value]
    return value


# hypothesis-jsonschema cannot resolve recursive references: the tree has its own values
VALUES = [(s, from_schema(closed(s))) for s in SCHEMAS if "$defs" not in s]


@FUZZ_SETTINGS
@given(st.data())
def test_values_that_satisfy_a_schema_come_back_unchanged(data: st.DataObject) -> None:
    schema, values = data.draw(st.sampled_from(VALUES))
    _unchanged(schema, data.draw(values))


trees = st.recursive(
    st.builds(lambda v: {"value": v}, st.integers()),
    lambda children: st.builds(
        lambda v, cs: {"value": v, "children": cs}, st.integers(), st.lists(children, max_size=3)
    ),
    max_leaves=20,
)


@FUZZ_SETTINGS
@given(trees)
def test_values_of_a_recursive_schema_come_back_unchanged(tree: dict[str, Any]) -> None:
    _unchanged(next(s for s in SCHEMAS if "$defs" in s), {"tree": tree})


# Each generated schema costs hypothesis-jsonschema a fresh compilation: fewer examples.
@settings(
    FUZZ_SETTINGS,
    max_examples=max(FUZZ_SETTINGS.max_examples // 6, 20),
)
@given(generated_schemas, st.data())
def test_generated_schemas_keep_the_contract(schema: dict[str, Any], data: st.DataObject) -> None:
    # Every generated schema is a valid tool schema by construction: a refusal is a
    # finding, not a draw to skip (skipping it hid how much was filtered).
    built = registry_for(schema)
    assert built is not None, f"a valid tool schema was refused: {schema}"
    registry, tool = built
    check_contract(registry, tool, schema, data.draw(raw_arguments))
    value = data.draw(from_schema(closed(schema)))
    _unchanged(schema, value)


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Point(pydantic.BaseModel):
    x: float
    y: float


def typed(when: datetime.datetime, level: Level, points: list[Point], tags: set[str]) -> int:
    """A function tool whose arguments convert to Python types after validation."""
    return len(points)


def _typed_registry() -> tuple[ToolRegistry, list[int]]:
    """A registry with `typed` as a function tool whose runs are counted (built once:
    building a function tool's pydantic schema costs more than a hundred calls)."""
    runs: list[int] = []

    async def counted(**kwargs: Any) -> int:
        runs.append(1)
        return typed(**kwargs)

    function_tool = tool(typed)
    function_tool.execute = counted  # type: ignore[method-assign]
    return ToolRegistry([function_tool]), runs


TYPED = _typed_registry()


@FUZZ_SETTINGS
@given(
    st.one_of(
        raw_arguments,
        st.fixed_dictionaries(
            {
                "when": st.sampled_from(["2026-01-01T00:00:00Z", "yesterday", "\ud800"]),
                "level": st.sampled_from(["low", "HIGH", 1]),
                "points": st.lists(st.fixed_dictionaries({"x": numbers, "y": json_scalars})),
                "tags": st.lists(texts, max_size=3),
            }
        ),
    )
)
def test_function_tools_keep_the_contract(raw: Any) -> None:
    """Conversion to Python types runs after validation and never raises either."""
    registry, runs = TYPED
    ran = len(runs)
    before = pickle.dumps(raw)
    prepared = registry.prepare_call("typed", raw)
    assert (prepared.error is None) == (prepared.arguments is not None)
    if prepared.error is not None:
        assert prepared.error.render().startswith("Error: ")
    result = asyncio.run(registry.execute("typed", raw))
    assert result.is_error == (prepared.error is not None)
    assert len(runs) == ran + (prepared.error is None)
    assert pickle.dumps(raw) == before


@FUZZ_SETTINGS
@given(st.one_of(json_texts(), st.text(), python_values))
def test_replay_repair_never_raises_and_returns_an_object(raw: Any) -> None:
    before = pickle.dumps(raw)
    repaired = repair_arguments_for_replay(raw)
    assert isinstance(repaired, dict)
    assert pickle.dumps(raw) == before


def test_the_closed_helper_matches_what_toolbridge_validates() -> None:
    """The fuzz oracle above must agree with the registry on unknown keys."""
    built = registry_for(SCHEMAS[1])
    assert built is not None
    registry, _ = built
    assert registry.prepare_call("fuzzed", {"a": 1, "b": 2, "c": 3}).error is not None
    assert not jsonschema_rs.is_valid(closed(SCHEMAS[1]), {"a": 1, "b": 2, "c": 3})
    assert math.isfinite(1.0) and thaw(SCHEMAS[1]) == SCHEMAS[1]


@FUZZ_SETTINGS
@given(st.one_of(python_values, json_values, st.dictionaries(keys, json_values)))
def test_the_fast_plain_check_agrees_with_the_detailed_walk(value: Any) -> None:
    detailed = list(jsondata._problems(value))
    if jsondata._plain(value):
        assert detailed == []
    elif detailed == [] and type(value) in (dict, list):
        # only a tuple inside sends plain data down the detailed walk
        assert _has_tuple(value)


def _has_tuple(value: Any) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, dict):
        return any(_has_tuple(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_tuple(v) for v in value)
    return False
