"""Tool definitions holding a lone surrogate, through the agent loop on every adapter.

JSON lets text hold a lone surrogate (``"\\udc80"``), and so a plugin's description or
parameters schema can hold one: a description, a parameter's description, an enum value,
a default, a property name. UTF-8 cannot encode it, so every request carrying such a
definition failed to encode and the run ended (a schema holding one was not even
registered: jsonschema-rs refused it with a bare ``ValueError``). Each is sent as the six
characters ``\\udc80``, as the conversation and the instructions are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field
from tests.agent.scripted_server import ScriptedServer
from tests.agent.test_deadline import PROVIDERS, adapter, answer
from tests.json_strings import strings

from toolbridge import Tool, ToolContext, ToolRegistry, tool
from toolbridge.agent import AgentRunner, StopReason


@tool(read_only=True)
def lone_weather(city: Annotated[str, Field(description="a city, caf\udce9 or not")]) -> str:
    """The weather in caf\udce9 towns (a lone surrogate)."""
    return f"Sunny in {city}"


class LoneSchema(Tool):
    """A plugin whose schema holds a lone surrogate in every place text goes."""

    name = "lone_schema"
    description = "Picks a mode \ud800."
    parameters = {
        "type": "object",
        "properties": {
            "mode\udc80": {
                "type": "string",
                "description": "the mode \udc81",
                "enum": ["fast\udc82", "slow"],
                "default": "fast\udc82",
            },
        },
        "required": ["mode\udc80"],
        "additionalProperties": False,
    }
    read_only = True

    async def execute(self, **kwargs: Any) -> str:
        return repr(kwargs)


ESCAPED = [
    "The weather in caf\\udce9 towns (a lone surrogate).",
    "a city, caf\\udce9 or not",
    "Picks a mode \\ud800.",
    "mode\\udc80",
    "the mode \\udc81",
    "fast\\udc82",
]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_definitions_with_lone_surrogates_are_sent_escaped(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    server.add(answer(provider, "All good."))
    registry = ToolRegistry([lone_weather, LoneSchema()], context=ToolContext(workspace))
    runner = AgentRunner(adapter(provider, server.url), registry, instructions="Help \udc80.")
    result = await runner.run("hi")
    assert result.stop_reason is StopReason.FINAL and result.output == "All good."
    [body] = server.bodies()
    sent = set(strings(body, json_text=True))
    for text in ESCAPED:
        assert text in sent, (text, provider)
    assert all(text.encode("utf-8") for text in sent)  # the body was valid UTF-8 JSON


@tool(read_only=True)
def lone_described(city: str) -> str:
    """The weather in caf\udce9 towns, with a plain schema."""
    return f"Sunny in {city}"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_description_alone_with_a_lone_surrogate_is_sent_escaped(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    """The tool registers (its schema is plain); the request carrying it failed to encode."""
    server.add(answer(provider, "All good."))
    registry = ToolRegistry([lone_described], context=ToolContext(workspace))
    result = await AgentRunner(adapter(provider, server.url), registry).run("hi")
    assert result.stop_reason is StopReason.FINAL and result.output == "All good."
    [body] = server.bodies()
    assert "The weather in caf\\udce9 towns, with a plain schema." in set(
        strings(body, json_text=True)
    )


async def test_a_model_calls_the_escaped_tool_as_it_was_told(workspace: Path) -> None:
    """What the model is told is what is validated: the escaped property name and enum
    value it read are the arguments the registry takes."""
    registry = ToolRegistry([LoneSchema()], context=ToolContext(workspace))
    result = await registry.execute("lone_schema", {"mode\\udc80": "fast\\udc82"})
    assert not result.is_error, result.text
    assert result.text == repr({"mode\\udc80": "fast\\udc82"})
    refused = registry.prepare_call("lone_schema", {"mode\\udc80": "fast"})
    assert refused.error is not None  # told the values it may give, as JSON text
    assert json.dumps("fast\\udc82") in refused.error.render()


class LoneAnswer(BaseModel):
    """An answer whose schema holds a lone surrogate (a field's description)."""

    city: str = Field(description="a city, caf\udce9 or not")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_native_output_schema_with_a_lone_surrogate_is_sent_escaped(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    """The output type's schema, sent as the provider's native structured output (where it
    has one; the ``final_result`` tool elsewhere, a definition like any other), went out
    as it was: the request failed to encode."""
    server.add(answer(provider, '{"city": "Paris"}'))
    registry = ToolRegistry([], context=ToolContext(workspace))
    runner = AgentRunner(adapter(provider, server.url), registry, output_type=LoneAnswer)
    result = await runner.run("hi")
    assert result.stop_reason is StopReason.FINAL, result
    assert result.output_value == LoneAnswer(city="Paris")
    [body] = server.bodies()
    assert "a city, caf\\udce9 or not" in set(strings(body, json_text=True)), provider
