"""Definitions out: each provider's shape, accepted by its SDK types, and read back."""

from __future__ import annotations

import json
from typing import Any

import anthropic.types
import google.genai.types as genai
import ollama
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from toolbridge import ToolDefinitionError, ToolRegistry
from toolbridge.core.frozen import thaw
from toolbridge.formats import anthropic as anthropic_format
from toolbridge.formats import bedrock, gemini, openai_chat, openai_responses
from toolbridge.formats import ollama as ollama_format
from toolbridge.formats.schemas import takes_no_arguments
from toolbridge.formats.types import FormatError, ToolSpec


def _typed_dict(kind: Any, value: dict[str, Any]) -> None:
    """Validate against an SDK TypedDict and refuse keys it does not declare."""
    TypeAdapter(kind).validate_python(value)
    assert set(value) <= kind.__required_keys__ | kind.__optional_keys__


def _originals(registry: ToolRegistry) -> dict[str, Any]:
    return {tool.name: thaw(tool.parameters) for tool in registry}


def test_openai_chat_sends_schemas_as_they_are_by_default(registry: ToolRegistry) -> None:
    tools = openai_chat.definitions(registry)
    assert [t["function"]["parameters"] for t in tools] == list(_originals(registry).values())
    assert all(t["function"]["strict"] is False for t in tools)


def test_openai_chat_strict_where_exact(registry: ToolRegistry) -> None:
    tools = openai_chat.definitions(registry, strict=None)
    for item in tools:
        _typed_dict(ChatCompletionFunctionToolParam, item)
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    assert list(by_name) == registry.tool_names  # the registry's stable order
    read = by_name["read_file"]
    assert read["strict"] is True
    assert read["parameters"]["required"] == ["path", "limit", "encoding"]
    assert read["parameters"]["properties"]["limit"]["type"] == ["integer", "null"]
    assert read["parameters"]["additionalProperties"] is False
    assert by_name["tag"]["strict"] is False  # an open object cannot be strict
    assert by_name["tag"]["parameters"] == _originals(registry)["tag"]
    assert by_name["get_time"]["parameters"]["required"] == []


def test_strict_true_names_the_obstacle(registry: ToolRegistry) -> None:
    with pytest.raises(ToolDefinitionError, match=r"'tag' cannot use strict mode.*labels"):
        openai_chat.definitions(registry, strict=True)
    relaxed = openai_chat.definitions(registry, strict=False)
    assert [t["function"]["parameters"] for t in relaxed] == list(_originals(registry).values())
    assert all(t["function"]["strict"] is False for t in relaxed)


def test_responses_states_strict_on_every_tool(registry: ToolRegistry) -> None:
    assert all(t["strict"] is False for t in openai_responses.definitions(registry))
    tools = openai_responses.definitions(registry, strict=None)
    for item in tools:
        _typed_dict(FunctionToolParam, item)
        assert isinstance(item["strict"], bool)  # the API would read a missing one as true
    assert [t["strict"] for t in tools] == [True, True, False]
    specs = openai_responses.parse_definitions(tools)
    assert [s.name for s in specs] == registry.tool_names


def test_schema_unchanged_for_full_json_schema_providers(registry: ToolRegistry) -> None:
    originals = _originals(registry)
    anthropic_tools = anthropic_format.definitions(registry)
    for item in anthropic_tools:
        _typed_dict(anthropic.types.ToolParam, item)
    ollama_tools = ollama_format.definitions(registry)
    for item in ollama_tools:
        ollama.Tool.model_validate(item)
    bedrock_tools = bedrock.definitions(registry)
    for module, tools in (
        (anthropic_format, anthropic_tools),
        (ollama_format, ollama_tools),
        (bedrock, bedrock_tools),
    ):
        specs = module.parse_definitions(tools)
        assert {s.name: s.parameters for s in specs} == originals
        assert [s.description for s in specs][:2] == ["The time.", "Read a file."]
    assert bedrock_tools[0]["toolSpec"]["inputSchema"]["json"] == originals["get_time"]


def test_gemini_parameters_or_json_schema(registry: ToolRegistry) -> None:
    tools = gemini.definitions(registry)
    genai.Tool.model_validate_json(json.dumps(tools[0]))  # extra keys are refused there
    declarations = {d["name"]: d for d in tools[0]["functionDeclarations"]}
    read = declarations["read_file"]["parameters"]
    assert read["type"] == "OBJECT"
    assert read["properties"]["encoding"] == {"type": "STRING", "default": None, "nullable": True}
    assert "additionalProperties" not in json.dumps(read)
    assert declarations["tag"]["parametersJsonSchema"] == _originals(registry)["tag"]
    everything = gemini.definitions(registry, json_schema=True)[0]["functionDeclarations"]
    assert all(
        "parametersJsonSchema" in d
        for d in everything
        if not takes_no_arguments(_originals(registry)[d["name"]])
    )
    with pytest.raises(ToolDefinitionError, match="'tag' has no Gemini parameters form"):
        gemini.definitions(registry, json_schema=False)
    back = {s.name: s.parameters for s in gemini.parse_definitions(tools)}
    assert back["tag"] == _originals(registry)["tag"]
    assert back["read_file"]["properties"]["encoding"]["type"] == ["string", "null"]
    assert gemini.definitions([]) == []


def test_converting_between_providers_through_specs(registry: ToolRegistry) -> None:
    specs = anthropic_format.parse_definitions(anthropic_format.definitions(registry))
    assert openai_chat.definitions(specs) == openai_chat.definitions(registry)
    assert bedrock.definitions(specs) == bedrock.definitions(registry)


def test_bad_definitions_and_sources_are_refused() -> None:
    with pytest.raises(FormatError, match=r"tools\[0\]"):
        openai_chat.parse_definitions([{"type": "custom"}])
    with pytest.raises(TypeError, match="ToolRegistry or Tool/ToolSpec"):
        anthropic_format.definitions(["read_file"])  # type: ignore[list-item]
    spec = ToolSpec("x", "", {"type": "object", "properties": {}})
    assert anthropic_format.definitions([spec])[0]["input_schema"] == spec.parameters
