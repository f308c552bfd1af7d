"""Regressions found in review of the core: each test failed before its fix."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from toolbridge import (
    ErrorKind,
    Tool,
    ToolContext,
    ToolLoader,
    ToolRegistry,
    tool,
)
from toolbridge.core.frozen import FrozenDict
from toolbridge.core.schema import CompiledSchema


class Schema(Tool):
    def __init__(self, name: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.parameters = parameters

    async def execute(self, **kwargs: Any) -> Any:
        return kwargs


def test_objects_without_properties_stay_free_form() -> None:
    registry = ToolRegistry(
        [
            Schema("headers", {"type": "object", "properties": {"h": {"type": "object"}}}),
            Schema("anything", {"type": "object"}),
        ]
    )
    assert registry.prepare_call("headers", {"h": {"Accept": "text/html"}}).ok
    assert registry.prepare_call("anything", {"free": 1, "form": [2]}).ok


@pytest.mark.parametrize(
    "arguments",
    [
        {1: "x"},
        {("t",): 2},
        {"s": {1, 2}},
        {"s": b"1"},
        {"s": 10**5000},
    ],
)
async def test_data_no_json_decoder_makes_is_an_error_not_an_exception(arguments: Any) -> None:
    registry = ToolRegistry(
        [Schema("s", {"type": "object", "properties": {"s": {"type": "string"}}})]
    )
    result = await registry.execute("s", arguments)
    assert result.is_error and result.error_kind is ErrorKind.INVALID_ARGUMENTS


async def test_a_hundred_thousand_levels_of_dict_is_an_error_not_an_exception() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):
        node["s"] = {}
        node = node["s"]
    recursive = {
        "type": "object",
        "$defs": {"node": {"type": "object", "properties": {"s": {"$ref": "#/$defs/node"}}}},
        "properties": {"s": {"$ref": "#/$defs/node"}},
    }
    result = await ToolRegistry([Schema("s", recursive)]).execute("s", deep)
    assert result.is_error and result.error_kind is ErrorKind.INVALID_ARGUMENTS


def test_an_anchor_ref_is_not_read_as_the_root() -> None:
    schema = CompiledSchema(
        {
            "type": "object",
            "$defs": {"text": {"$anchor": "str", "type": "string"}},
            "properties": {"s": {"$ref": "#str"}, "n": {"type": "integer"}},
        }
    )
    value = {"s": '{"a": 1}', "n": 5}
    assert schema.check(value).value == value
    assert schema.check(value).issues == ()


def test_an_untyped_node_keeps_json_text_that_is_valid_as_it_is() -> None:
    schema = CompiledSchema(
        {
            "type": "object",
            "properties": {
                "cfg": {"properties": {"a": {"type": "integer"}}},
                "n": {"type": "integer"},
            },
        }
    )
    value = {"cfg": '{"a": 1}', "n": 5}
    assert schema.check(value).value == value


class Inner(BaseModel):
    a: int


async def test_optional_models_refuse_unknown_keys_like_plain_ones() -> None:
    @tool
    async def f(m: Inner | None = None, n: Inner | None = None) -> str:
        return "ran"

    result = await ToolRegistry([f]).execute("f", {"m": {"a": 1, "evil": 2}})
    assert result.is_error and "evil" in result.text


def test_the_arguments_envelope_is_kept_where_the_schema_takes_any_key() -> None:
    open_schema = {"type": "object", "additionalProperties": {"type": "string"}}
    prepared = ToolRegistry([Schema("o", open_schema)]).prepare_call("o", {"arguments": "hello"})
    assert prepared.arguments == {"arguments": "hello"} and prepared.repairs == ()


class MyContext(ToolContext):
    pass


async def test_a_context_subclass_is_injected_never_a_parameter(tmp_path: Path) -> None:
    @tool
    async def where(ctx: MyContext, q: str) -> str:
        return str(ctx.workspace)

    assert list(where.parameters["properties"]) == ["q"]
    registry = ToolRegistry([where], context=ToolContext(workspace=tmp_path))
    forged = await registry.execute("where", {"q": "x", "ctx": {"workspace": "/etc"}})
    assert forged.is_error


def test_a_function_attribute_named_like_a_tool_field_changes_nothing() -> None:
    def f(a: int) -> int:
        return a

    f.name = "hijacked name"  # type: ignore[attr-defined]
    f.parameters = {"type": "object"}  # type: ignore[attr-defined]
    made = tool(f)
    assert made.name == "f" and "a" in made.parameters["properties"]


async def test_a_sync_function_returning_a_coroutine_is_awaited() -> None:
    async def inner() -> str:
        return "awaited"

    @tool
    def wrapper() -> Any:
        return inner()

    result = await ToolRegistry([wrapper]).execute("wrapper", {})
    assert result.text == "awaited"


class Picky(BaseModel):
    v: int

    @field_validator("v")
    @classmethod
    def check(cls, value: int) -> int:
        raise TypeError("v must be prime")


async def test_a_validator_raising_type_error_is_invalid_arguments() -> None:
    @tool
    async def pick(p: Picky) -> str:
        return "ran"

    result = await ToolRegistry([pick]).execute("pick", {"p": {"v": 4}})
    assert result.is_error and result.error_kind is ErrorKind.INVALID_ARGUMENTS


def test_decimal_text_that_a_float_cannot_hold_is_not_cast() -> None:
    schema = CompiledSchema({"type": "object", "properties": {"x": {"type": "number"}}})
    assert schema.check({"x": "0.10000000000000000001"}).value == {"x": "0.10000000000000000001"}
    assert schema.check({"x": "0.1"}).value == {"x": 0.1}
    assert schema.check({"x": "1.50"}).value == {"x": 1.5}


def test_registration_freezes_the_schema_it_validates_with() -> None:
    parameters = {"type": "object", "properties": {"a": {"type": "integer"}}}
    registered = Schema("frozen", parameters)
    registry = ToolRegistry([registered])
    assert isinstance(registered.parameters, FrozenDict)
    parameters["properties"]["b"] = {"type": "string"}  # the caller's dict, not the tool's
    assert "b" not in registry.get_definitions()[0]["function"]["parameters"]["properties"]


def test_a_tool_the_registry_refuses_is_skipped_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "tbtest_badtools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(
        textwrap.dedent(
            """
            from toolbridge import Tool

            class BadName(Tool):
                name = "bad name"

            class BadSchema(Tool):
                name = "bad_schema"
                parameters = {"type": "string"}

            class Good(Tool):
                name = "good"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        loader = ToolLoader(package="tbtest_badtools", group="toolbridge_test.none")
        registry = loader.registry()
        assert registry.tool_names == ["good"]
        assert len(loader.skipped) == 2
    finally:
        for name in list(sys.modules):
            if name.startswith("tbtest_badtools"):
                del sys.modules[name]
