"""Each format's definitions hold no lone surrogate: each is the six characters
``\\udc80``, escaped once per tool (not on every render), and a name holding one, which
a model could never call back, is refused naming the tool."""

from __future__ import annotations

import copy
import json
import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from tests.json_strings import strings

from toolbridge import Tool, ToolDefinitionError, ToolRegistry
from toolbridge.core.frozen import FrozenDict
from toolbridge.core.sendable import sendable_definition
from toolbridge.formats import anthropic, bedrock, gemini, ollama, openai_chat, openai_responses
from toolbridge.formats.types import ToolSpec, tool_specs


class Lone(Tool):
    name = "lone"
    description = "Picks caf\udce9 \ud800."
    parameters = {
        "type": "object",
        "properties": {
            "mode\udc80": {
                "type": "string",
                "description": "the mode \udc81",
                "enum": ["fast\udc82", "slow"],
                "default": "fast\udc82",
            },
            "items": {
                "type": "array",
                "items": {"type": "string", "description": "an item \udc83"},
            },
        },
        "required": ["mode\udc80"],
    }

    async def execute(self, **kwargs: Any) -> str:
        return "ok"


ESCAPED = {
    "Picks caf\\udce9 \\ud800.",
    "mode\\udc80",
    "the mode \\udc81",
    "fast\\udc82",
    "an item \\udc83",
}

FORMATS: dict[str, Callable[[Any], Any]] = {
    "openai_chat": openai_chat.definitions,
    "openai_chat strict": lambda tools: openai_chat.definitions(tools, strict=None),
    "openai_responses": openai_responses.definitions,
    "anthropic": anthropic.definitions,
    "gemini parameters": lambda tools: gemini.definitions(tools, json_schema=None),
    "gemini json schema": lambda tools: gemini.definitions(tools, json_schema=True),
    "ollama": ollama.definitions,
    "bedrock": bedrock.definitions,
    "registry": lambda tools: ToolRegistry(tools).get_definitions(),
}


@pytest.mark.parametrize("render", FORMATS.values(), ids=FORMATS.keys())
def test_every_format_sends_a_lone_surrogate_as_text(render: Callable[[Any], Any]) -> None:
    definitions = render([Lone()])
    json.dumps(definitions, ensure_ascii=False).encode("utf-8")  # no surrogate left
    sent = set(strings(definitions))
    assert sent >= ESCAPED


SPEC_FORMATS = {name: render for name, render in FORMATS.items() if name != "registry"}


@pytest.mark.parametrize("render", SPEC_FORMATS.values(), ids=SPEC_FORMATS.keys())
def test_a_tool_spec_is_escaped_too(render: Callable[[Any], Any]) -> None:
    spec = ToolSpec("spec", "A spec \udc80.", Lone.parameters)
    definitions = render([spec])
    json.dumps(definitions, ensure_ascii=False).encode("utf-8")
    assert "A spec \\udc80." in set(strings(definitions))


def test_a_clean_tool_is_sent_as_it_is() -> None:
    clean = Lone()
    clean.description = "Picks a mode."
    clean.parameters = FrozenDict({"type": "object", "properties": {}})
    [spec] = tool_specs([clean])
    assert spec.description is clean.description
    assert spec.parameters is clean.parameters  # nothing to escape: nothing copied


def test_a_definition_is_escaped_once_per_tool_until_the_tool_changes() -> None:
    lone = Lone()
    registry = ToolRegistry([lone])
    first = sendable_definition(lone)
    assert first.parameters["properties"]["mode\\udc80"]["enum"] == ["fast\\udc82", "slow"]
    assert sendable_definition(lone) is first
    [spec] = tool_specs(registry)
    assert spec.parameters is first.parameters  # each render reuses the escaped schema
    assert isinstance(first.parameters, FrozenDict)  # and cannot change it
    lone.description = "Now \udc84."
    changed = sendable_definition(lone)
    assert changed is not first and changed.description == "Now \\udc84."
    assert changed.parameters is first.parameters  # the same schema: not walked again


def test_a_definition_is_kept_on_its_tool_and_goes_with_it() -> None:
    lone = Lone()
    ToolRegistry([lone])  # registering freezes its parameters: its definition is made then
    first = sendable_definition(lone)
    ToolRegistry([lone]).get_definitions()  # another registry over the tool shares it
    assert sendable_definition(lone) is first
    copied = copy.copy(lone)  # a copy starts with the definition it was copied with...
    assert sendable_definition(copied) is first
    copied.description = "Copied \udc85."  # ...and changing it leaves the original's alone
    assert sendable_definition(copied).description == "Copied \\udc85."
    assert sendable_definition(lone) is first
    gone = weakref.ref(lone)
    del lone
    assert gone() is None  # the definition holds no reference back: freed with the tool


@dataclass(frozen=True, slots=True)
class Slotted:
    """A definition's parts in an object without a __dict__ (or a weak reference)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


def test_an_object_without_a_dict_gets_its_definition_each_time() -> None:
    slotted = Slotted("slotted", "A \udc80.", Lone.parameters)
    first = sendable_definition(slotted)
    assert first.description == "A \\udc80."
    assert first.parameters["required"] == ["mode\\udc80"]
    assert sendable_definition(slotted) == first


def test_the_registry_validates_the_schema_the_model_is_told() -> None:
    registry = ToolRegistry([Lone()])
    [definition] = registry.get_definitions()
    told = definition["function"]["parameters"]
    assert told == sendable_definition(registry.get("lone")).parameters  # type: ignore[arg-type]
    prepared = registry.prepare_call("lone", {"mode\\udc80": "slow"})
    assert prepared.error is None, prepared.error
    assert registry.prepare_call("lone", {"mode\\udc80": "fast"}).error is not None


def test_the_definitions_hash_is_of_what_is_sent() -> None:
    escaped = Lone()
    escaped.description = "Picks caf\\udce9 \\ud800."
    escaped.parameters = json.loads(json.dumps(sendable_definition(Lone()).parameters))
    assert ToolRegistry([Lone()]).definitions_hash == ToolRegistry([escaped]).definitions_hash


@pytest.mark.parametrize("name", ["read_\udc80file", "\ud800"])
def test_a_name_with_a_lone_surrogate_is_refused_naming_the_tool(name: str) -> None:
    tool = Lone()
    tool.name = name
    named = re.escape(repr(name))  # the name as the message writes it: '\\udc80' as text
    with pytest.raises(ToolDefinitionError, match=named):
        ToolRegistry([tool])
    for item in (tool, ToolSpec(name, "d")):
        for render in (openai_chat.definitions, anthropic.definitions, gemini.definitions):
            with pytest.raises(
                ToolDefinitionError, match=f"{named} holds a lone surrogate"
            ) as info:
                render([item])
            str(info.value).encode("utf-8")  # the message itself can be printed
