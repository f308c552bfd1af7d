"""`NativeOutput`'s forms of a schema, and choosing native output or the tool with the
scripted model (which plays a provider with or without native structured output)."""

from __future__ import annotations

import json
from typing import Literal, NotRequired

import pytest
from pydantic import BaseModel, Field
from tests.agent.sample_tools import get_weather
from typing_extensions import TypedDict

from toolbridge import ToolCallRequest
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    NativeOutput,
    ScriptedModel,
    StopReason,
    UserMessage,
)
from toolbridge.agent.output import OutputSpec


class Place(BaseModel):
    name: str
    kind: Literal["city", "town"]


class Forecast(BaseModel):
    place: Place
    high_c: int = Field(ge=-90, le=60)
    note: str | None


class WithDefault(BaseModel):
    city: str
    days: int = 3


class Cat(BaseModel):
    pet: Literal["cat"]


class Dog(BaseModel):
    pet: Literal["dog"]


class Owner(BaseModel):
    animal: Cat | Dog = Field(discriminator="pet")


def native(output_type: object) -> NativeOutput:
    return OutputSpec(output_type).native


def test_a_fully_required_model_has_a_strict_form() -> None:
    out = native(Forecast)
    assert out.name == "Forecast" and out.strict_problem is None
    strict = out.strict_schema
    assert strict is not None
    assert strict["additionalProperties"] is False
    place = strict["properties"]["place"]  # references inlined, as for tool definitions
    assert place["additionalProperties"] is False and place["required"] == ["name", "kind"]
    assert strict["properties"]["high_c"]["maximum"] == 60  # strict mode keeps bounds
    assert "additionalProperties" not in out.schema  # the full schema is untouched


def test_optional_fields_are_sent_non_strict() -> None:
    out = native(WithDefault)
    assert out.strict_schema is None
    assert out.strict_problem is not None and "days" in out.strict_problem
    assert out.closed_schema is not None  # Anthropic and Bedrock accept optional fields

    class Partial(TypedDict):
        city: str
        days: NotRequired[int]

    assert native(Partial).strict_schema is None


def test_the_closed_form_moves_unsupported_keywords_into_descriptions() -> None:
    closed = native(Forecast).closed_schema
    assert closed is not None
    high_c = closed["properties"]["high_c"]
    assert "minimum" not in high_c and "maximum" not in high_c
    assert high_c["description"] == "{maximum: 60, minimum: -90}"
    assert closed["$defs"]["Place"]["additionalProperties"] is False


def test_a_discriminated_union_is_any_of_when_closed_and_not_strict() -> None:
    out = native(Owner)
    assert out.strict_schema is None and "discriminator" in (out.strict_problem or "")
    closed = out.closed_schema
    assert closed is not None
    animal = closed["properties"]["animal"]
    assert "oneOf" not in animal and len(animal["anyOf"]) == 2
    assert "discriminator" in animal["description"]


def test_an_open_object_has_neither_form() -> None:
    out = native(dict[str, int])  # wrapped: {"result": {additionalProperties: int}}
    assert out.strict_schema is None and out.closed_schema is None
    assert "keys beyond its properties" in (out.closed_problem or "")
    assert out.name == "output"  # no title: a provider-safe default


def test_native_output_with_the_scripted_model() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(calls=(ToolCallRequest("c1", "get_weather", {"city": "Oslo"}),)),
            AssistantMessage(text='```json\n{"place": {"name": "Oslo"}}\n```'),
            AssistantMessage(text='{"place": {"name": "Oslo", "kind": "city"}, "high_c": 61}'),
            AssistantMessage(
                text='{"place": {"name": "Oslo", "kind": "city"}, "high_c": 9, "note": null}'
            ),
        ],
        native_output=True,
    )
    runner = AgentRunner(model, [get_weather], output_type=Forecast, output_retries=2)
    assert runner.registry.tool_names == ["get_weather"]
    result = runner.run_sync("Forecast for Oslo?")
    assert result.stop_reason is StopReason.FINAL
    assert result.output_value == Forecast(
        place=Place(name="Oslo", kind="city"), high_c=9, note=None
    )
    assert model.outputs == [runner.native_output] * 4
    feedback = [m.text for m in result.conversation if isinstance(m, UserMessage)][1:]
    assert len(feedback) == 2
    assert "not valid JSON" in feedback[0]
    assert "high_c: Input should be less than or equal to 60" in feedback[1]
    assert "note: Field required" in feedback[1]  # every problem, with its path
    assert json.loads(result.output) == result.output_value.model_dump()


def test_without_native_support_the_tool_is_used() -> None:
    final = ToolCallRequest(
        "f1", "final_result", {"place": {"name": "Oslo", "kind": "town"}, "high_c": 4, "note": "x"}
    )
    model = ScriptedModel([AssistantMessage(calls=(final,))])  # native_output=False
    runner = AgentRunner(model, output_type=Forecast)
    assert runner.native_output is None and runner.registry.tool_names == ["final_result"]
    result = runner.run_sync("?")
    assert result.output_value is not None and result.output_value.high_c == 4
    assert model.outputs == [None]

    with pytest.raises(ValueError, match="output_mode='native', but ScriptedModel"):
        AgentRunner(ScriptedModel([]), output_type=Forecast, output_mode="native")
    with pytest.raises(ValueError, match="output_mode must be"):
        AgentRunner(ScriptedModel([]), output_type=Forecast, output_mode="json")  # type: ignore[arg-type]


def test_output_mode_tool_with_a_native_model() -> None:
    model = ScriptedModel([], native_output=True)
    runner = AgentRunner(model, output_type=Forecast, output_mode="tool")
    assert runner.native_output is None and runner.registry.tool_names == ["final_result"]
    assert AgentRunner(model, output_type=Forecast).native_output is not None


@pytest.mark.parametrize(
    ("model", "native"),
    [
        ("claude-sonnet-4-5", True),
        ("claude-sonnet-4-5-20250929", True),
        ("claude-haiku-4-5", True),
        ("claude-opus-4-1-20250805", True),
        ("claude-opus-4-7", True),
        ("claude-sonnet-5", True),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("claude-sonnet-4-20250514", False),  # 4.0: no JSON outputs
        ("claude-opus-4-20250514", False),
        ("claude-3-7-sonnet-latest", False),
        ("claude-test", False),  # unknown: the tool works everywhere
        ("anthropic.claude-3-haiku-20240307-v1:0", False),
        ("meta.llama3-70b-instruct-v1:0", False),
    ],
)
def test_claude_models_with_json_outputs(model: str, native: bool) -> None:
    from toolbridge.agent.adapters._common import claude_has_json_outputs

    assert claude_has_json_outputs(model) is native


@pytest.mark.parametrize(
    ("model", "native"),
    [
        ("gemini-3-pro-preview", True),
        ("models/gemini-3-flash", True),
        ("gemini-2.5-flash", False),  # JSON answers and function calling do not mix before 3
        ("gemini-1.5-pro", False),
        ("my-tuned-model", False),
    ],
)
def test_gemini_models_with_native_output(model: str, native: bool) -> None:
    from google import genai

    from toolbridge.agent.adapters import GeminiModel

    adapter = GeminiModel(model, client=genai.Client(api_key="k"))
    spec = OutputSpec(dict[str, int])
    assert adapter.supports_native_output(spec.native) is native
