"""Hostile arguments (issues 15 and 8 §5): every one is a clear error naming the field.

Lone surrogates, overflowing numbers, numbers with absurd exponents, bytes, thousands
of unknown keys, data no JSON decoder makes, and the replay repair's deep nesting:
`prepare_call` returns an error result for each, never raises, and nothing runs.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

import pytest

from toolbridge import ErrorKind, Tool, ToolDefinitionError, ToolRegistry
from toolbridge.core.calls import repair_arguments_for_replay
from toolbridge.core.frozen import freeze
from toolbridge.core.jsondata import MAX_DEPTH
from toolbridge.core.schema import CompiledSchema


class Recorder(Tool):
    """Records every run, so a test can prove that nothing ran."""

    name = "rec"
    description = "records its calls"
    parameters = {
        "type": "object",
        "properties": {
            "w": {"type": "number"},
            "n": {"type": "integer"},
            "s": {"type": "string"},
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"label": {"type": "string"}}},
            },
            "free": {"type": "object"},
        },
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def execute(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return "ran"


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def registry(recorder: Recorder) -> ToolRegistry:
    return ToolRegistry([recorder])


async def refused(registry: ToolRegistry, recorder: Recorder, raw: Any) -> str:
    """The rendered error for `raw`, after checking both paths refuse it and nothing ran."""
    prepared = registry.prepare_call("rec", raw)
    assert prepared.error is not None and prepared.arguments is None
    result = await registry.execute("rec", raw)
    assert result.is_error and result.text.startswith("Error")
    assert recorder.calls == []
    return result.text


# --- numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["0e99999999999999999999", "1e-99999999999999999999", "-0E+99999999999999999999"]
)
async def test_a_number_string_with_a_huge_exponent_is_refused_not_raised(
    registry: ToolRegistry, recorder: Recorder, text: str
) -> None:
    message = await refused(registry, recorder, json.dumps({"w": text}))
    assert "at $.w" in message and "not of type" in message


def test_a_huge_exponent_is_never_cast_but_ordinary_exponents_are() -> None:
    schema = CompiledSchema({"type": "object", "properties": {"w": {"type": "number"}}})
    assert schema.check({"w": "1e-99999999999999999999"}).value == {"w": "1e-99999999999999999999"}
    assert schema.check({"w": "2.5e3"}).value == {"w": 2500.0}


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"w": 1e400}', "$.w"),
        ('{"items": [{"label": "a"}, {"label": -1e999}]}', "$.items[1].label"),
        ('{"free": {"deep": [1, 2, 1e400]}}', "$.free.deep[2]"),
        ({"w": math.inf}, "$.w"),
        ({"free": {"x": -math.inf}}, "$.free.x"),
    ],
)
async def test_a_number_that_overflows_is_refused_naming_the_field(
    registry: ToolRegistry, recorder: Recorder, raw: Any, path: str
) -> None:
    message = await refused(registry, recorder, raw)
    assert f"at {path}: the number" in message and "too large" in message
    assert registry.prepare_call("rec", raw).error.kind is ErrorKind.INVALID_ARGUMENTS  # type: ignore[union-attr]


async def test_nan_from_python_is_refused(registry: ToolRegistry, recorder: Recorder) -> None:
    message = await refused(registry, recorder, {"free": {"x": math.nan}})
    assert "at $.free.x: nan is not a number" in message


# --- text that is not Unicode ----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"s": "\\ud800"}', "$.s"),
        ('{"s": "ok \\udfff tail"}', "$.s"),
        ('{"items": [{"label": "\\uD83D"}]}', "$.items[0].label"),
        ('{"free": {"a": ["x", "\\ud800"]}}', "$.free.a[1]"),
        ({"s": "\ud800"}, "$.s"),
        ({"free": {"nested": {"deeper": "a\udc00"}}}, "$.free.nested.deeper"),
    ],
)
async def test_a_lone_surrogate_anywhere_is_refused_naming_the_field(
    registry: ToolRegistry, recorder: Recorder, raw: Any, path: str
) -> None:
    message = await refused(registry, recorder, raw)
    assert f"at {path}: the text holds a lone surrogate" in message
    assert "not valid Unicode" in message


async def test_a_lone_surrogate_in_a_key_is_refused(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    message = await refused(registry, recorder, '{"free": {"\\ud800": 1}}')
    assert "at $.free: the key '\\ud800' holds a lone surrogate" in message


async def test_a_surrogate_pair_is_a_character_and_runs(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    result = await registry.execute("rec", '{"s": "\\ud83d\\ude00", "free": {"k": "é"}}')
    assert not result.is_error
    assert recorder.calls == [{"s": "\N{GRINNING FACE}", "free": {"k": "é"}}]


# --- bytes ---------------------------------------------------------------------------


async def test_bytes_are_decoded_as_utf8(registry: ToolRegistry, recorder: Recorder) -> None:
    result = await registry.execute("rec", '{"s": "héllo", "n": "3"}'.encode())
    assert not result.is_error
    assert recorder.calls == [{"s": "héllo", "n": 3}]
    prepared = registry.prepare_call("rec", bytearray(b'{"w": 1.5}'))
    assert prepared.arguments == {"w": 1.5}


async def test_invalid_utf8_bytes_get_an_error_that_says_so(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    message = await refused(registry, recorder, b'{"s": "\xff\xfe"}')
    assert "not valid UTF-8" in message and "byte 7" in message
    prepared = registry.prepare_call("rec", b'{"s": "\xff"}')
    assert prepared.error is not None and prepared.error.kind is ErrorKind.ARGUMENTS_NOT_JSON


async def test_bytes_inside_the_arguments_are_not_json_data(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    message = await refused(registry, recorder, {"free": {"blob": b"\x00"}})
    assert "at $.free.blob: a Python bytes is not JSON data" in message


# --- unknown keys --------------------------------------------------------------------


async def test_thousands_of_unknown_keys_render_under_a_thousand_characters(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    raw = {f"unknown_key_number_{i}": i for i in range(5_000)}
    message = await refused(registry, recorder, raw)
    assert len(message) < 1_000
    assert "unknown keys 'unknown_key_number_0'" in message
    assert "and 4,997 more" in message
    assert "allowed keys: w, n, s, items, free" in message


async def test_unknown_keys_in_thousands_of_objects_stay_short(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    raw = {"items": [{"label": "x", f"extra{i}": 1} for i in range(3_000)]}
    message = await refused(registry, recorder, raw)
    assert len(message) < 1_000
    assert "at $.items[0]: unknown key 'extra0'" in message
    assert "unknown keys in 2,997 more objects" in message


async def test_long_unknown_keys_and_many_allowed_keys_stay_short() -> None:
    properties = {f"parameter_with_a_long_name_{i}": {"type": "string"} for i in range(200)}

    class Wide(Tool):
        name = "wide"
        description = "many parameters"
        parameters = {"type": "object", "properties": properties}

        async def execute(self, **kwargs: Any) -> Any:
            raise AssertionError("must not run")

    registry = ToolRegistry([Wide()])
    raw = {("k" * 5_000) + str(i): 1 for i in range(2_000)}
    result = await registry.execute("wide", raw)
    assert result.is_error and len(result.text) < 1_000
    assert "and 188 more" in result.text  # allowed keys named: the first 12


# --- data no JSON decoder makes -------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"free": {1: "x"}}, "at $.free: the key 1 is not text"),
        ({"free": {"s": {1, 2}}}, "at $.free.s: a Python set is not JSON data"),
        ({"items": [{"label": object()}]}, "at $.items[0].label: a Python object is not JSON"),
    ],
)
async def test_python_values_that_are_not_json_name_their_place(
    registry: ToolRegistry, recorder: Recorder, raw: Any, fragment: str
) -> None:
    assert fragment in await refused(registry, recorder, raw)


async def test_deep_or_cyclic_python_data_is_refused(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    assert "nest deeper than 128 levels" in await refused(registry, recorder, {"free": {"d": deep}})
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    assert "nest deeper than 128 levels" in await refused(registry, recorder, {"free": cycle})


async def test_deep_text_is_refused_the_same_as_deep_data(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    text = '{"free": {"d": ' + "[" * 300 + "]" * 300 + "}}"
    assert "nest deeper than 128 levels" in await refused(registry, recorder, text)
    shallow = '{"free": {"d": ' + "[" * 120 + "]" * 120 + "}}"
    assert registry.prepare_call("rec", shallow).error is None


@pytest.mark.parametrize("as_text", [True, False])
def test_the_depth_limit_is_exact_and_the_same_for_text_and_data(as_text: bool) -> None:
    registry = ToolRegistry([Recorder()])

    def nested(levels: int) -> Any:  # the arguments object itself is level 1
        value: Any = []
        for _ in range(levels - 3):
            value = [value]
        value = {"free": {"d": value}}
        return json.dumps(value) if as_text else value

    assert registry.prepare_call("rec", nested(MAX_DEPTH)).error is None
    error = registry.prepare_call("rec", nested(MAX_DEPTH + 1)).error
    assert error is not None and f"deeper than {MAX_DEPTH} levels" in error.render()


def test_data_deeper_than_the_validator_allows_is_an_error_not_a_crash() -> None:
    """jsonschema-rs refuses data 256 levels deep with ValueError (found by the fuzzer)."""

    class Closed(Tool):
        name = "closed"
        description = "takes no keys"
        parameters = {"type": "object", "properties": {}}

        async def execute(self, **kwargs: Any) -> Any:
            raise AssertionError("must not run")

    registry = ToolRegistry([Closed()])
    text = '{"a": ' + "[" * 254 + "]" * 254 + "}"
    error = registry.prepare_call("closed", text).error
    assert error is not None and error.kind is ErrorKind.INVALID_ARGUMENTS


# --- the replay path --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["[" * 2000, '[{"a":' * 300, '{"a":' * 5000, "{" * 100_000, "[" * 65 + "]" * 64],
)
def test_replay_repair_of_deep_or_cut_text_returns_an_empty_object(text: str) -> None:
    assert repair_arguments_for_replay(text) == {}


def test_replay_repair_still_repairs_ordinary_cut_text() -> None:
    nested = '{"a": ' * 20 + "1" + "}" * 19
    assert repair_arguments_for_replay(nested) == json.loads(nested + "}")
    assert repair_arguments_for_replay('{"path": "[not a bracket", "n": 2') == {
        "path": "[not a bracket",
        "n": 2,
    }
    # brackets inside a string that the cut left open are text, not nesting
    assert repair_arguments_for_replay('{"a": "' + "[" * 3000) == {"a": "[" * 3000}


# --- schemas that cannot be cast or validated ---------------------------------------------


@pytest.mark.parametrize(
    "defs",
    [
        {"A": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/A"}]}},
        {"A": {"$ref": "#/$defs/B"}, "B": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/A"}]}},
        {"A": {"allOf": [{"$ref": "#/$defs/A"}]}},
    ],
)
def test_a_pure_ref_cycle_is_refused_at_registration(defs: dict[str, Any]) -> None:
    class Cyclic(Tool):
        name = "cyclic"
        description = "a schema that only refers to itself"
        parameters = {
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/A"}},
            "$defs": defs,
        }

        async def execute(self, **kwargs: Any) -> Any:
            return None

    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        ToolRegistry([Cyclic()])


def test_a_ref_cycle_through_structure_is_fine() -> None:
    schema = CompiledSchema(
        {
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "$defs": {
                "Node": {
                    "anyOf": [
                        {"type": "integer"},
                        {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    ]
                }
            },
        }
    )
    assert schema.check({"tree": [["1"], 2]}).value == {"tree": [[1], 2]}


async def test_frozen_and_subclassed_containers_are_checked_too(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    raw = freeze({"free": {"x": math.inf}, "s": "ok"})
    assert "at $.free.x: the number inf is too large" in await refused(registry, recorder, raw)
    raw = OrderedDict(s="\ud800")
    assert "at $.s: the text holds a lone surrogate" in await refused(registry, recorder, raw)


def test_several_unknown_keys_each_get_their_nearest_allowed_key() -> None:
    schema = CompiledSchema(
        {"type": "object", "properties": {"query": {"type": "string"}, "limit": {}}}
    )
    (issue,) = schema.check({"querry": "x", "limitt": 1}).issues
    assert issue.path == "$"
    assert issue.message == (
        "unknown keys 'querry', 'limitt'; allowed keys: query, limit "
        "(did you mean 'query' for 'querry', 'limit' for 'limitt'?)"
    )


@pytest.mark.parametrize(
    ("raw", "path"), [({"w": 10**5000}, "$.w"), ({"free": {"x": [-(10**4300)]}}, "$.free.x[0]")]
)
async def test_an_integer_too_long_for_json_text_is_refused_naming_the_field(
    registry: ToolRegistry, recorder: Recorder, raw: Any, path: str
) -> None:
    message = await refused(registry, recorder, raw)
    assert f"at {path}: the integer has more than 4,300 digits" in message
    assert registry.prepare_call("rec", {"w": 10**4299}).error is None  # 4,300 digits


async def test_the_path_of_a_too_deep_value_is_shortened(
    registry: ToolRegistry, recorder: Recorder
) -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    message = await refused(registry, recorder, {"free": {"d": deep}})
    assert "at $.free.d[0][0][0][0][0][0]…(" in message
    assert len(message) < 400
