"""OpenTelemetry spans of a run: invoke_agent > chat {model} / execute_tool {name}."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.agent import sample_tools

from toolbridge import ToolCallRequest
from toolbridge.agent import (
    AssistantMessage,
    ModelRequest,
    RateLimitError,
    ScriptedModel,
    Usage,
)


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, exporter


def test_spans_nest_and_carry_usage(workspace: Path) -> None:
    tracer_provider, exporter = provider()
    call = ToolCallRequest("c1", "get_weather", '{"city": "Oslo"}')
    model = ScriptedModel(
        [AssistantMessage(calls=(call,)), AssistantMessage(text="Sunny.")],
        usage=Usage(7, 3, 0, 1),
    )
    runner = sample_tools.runner(model, workspace, tracer_provider=tracer_provider)
    runner.run_sync("Weather?")
    spans = exporter.get_finished_spans()
    names = sorted(span.name for span in spans)
    assert names == ["chat scripted", "chat scripted", "execute_tool get_weather", "invoke_agent"]
    agent = next(s for s in spans if s.name == "invoke_agent")
    assert agent.attributes is not None
    assert agent.attributes["gen_ai.usage.input_tokens"] == 14
    assert agent.attributes["toolbridge.stop_reason"] == "final"
    assert agent.attributes["gen_ai.provider.name"] == "openai"
    for span in spans:
        if span is not agent:
            assert span.parent is not None and span.parent.span_id == agent.context.span_id
    chat = next(s for s in spans if s.name == "chat scripted")
    assert chat.attributes is not None and chat.attributes["gen_ai.usage.output_tokens"] == 3


def test_a_failed_model_call_marks_the_spans(workspace: Path) -> None:
    tracer_provider, exporter = provider()

    def fail(request: ModelRequest) -> AssistantMessage:
        raise RateLimitError("slow down", status=429)

    runner = sample_tools.runner(ScriptedModel([fail]), workspace, tracer_provider=tracer_provider)
    with pytest.raises(RateLimitError):
        runner.run_sync("hi")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent", "chat scripted"}
    for span in spans.values():
        assert span.attributes is not None
        assert span.attributes["error.type"] == "RateLimitError"
