"""Hooks that fail are isolated, events describe every call, spans follow GenAI conventions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolbridge import (
    ErrorKind,
    NetworkViolation,
    Tool,
    ToolCallRequest,
    ToolRegistry,
    ToolResult,
    tool,
)
from toolbridge.core.registry import PreparedCall
from toolbridge.execution.executor import (
    EventType,
    OutcomeStatus,
    ToolEvent,
    ToolExecutor,
    ToolOutcome,
)
from toolbridge.execution.hooks import ExecutorHook


@pytest.fixture
def tools(registry: ToolRegistry) -> ToolRegistry:
    @tool(read_only=True)
    def greet(name: str) -> str:
        return f"hello {name}"

    @tool
    def explode() -> str:
        raise RuntimeError("kaboom")

    registry.register(greet)
    registry.register(explode)
    return registry


class Recorder(ExecutorHook):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before_call(self, call: ToolCallRequest, prepared: PreparedCall) -> None:
        self.seen.append(f"before {call.id}")

    async def after_call(self, outcome: ToolOutcome) -> None:
        self.seen.append(f"after {outcome.call.id} {outcome.status}")

    async def on_error(self, outcome: ToolOutcome) -> None:
        self.seen.append(f"error {outcome.call.id} {outcome.kind}")


class Broken(ExecutorHook):
    async def before_call(self, call: ToolCallRequest, prepared: PreparedCall) -> None:
        raise RuntimeError("before hook bug")

    async def after_call(self, outcome: ToolOutcome) -> None:
        raise RuntimeError("after hook bug")

    async def on_error(self, outcome: ToolOutcome) -> None:
        raise RuntimeError("on_error hook bug")


async def test_a_hook_that_raises_is_logged_and_the_batch_goes_on(
    tools: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    executor = ToolExecutor(tools, hooks=[Broken(), recorder])
    outcomes = await executor.run(
        [
            ToolCallRequest("a", "greet", {"name": "ada"}),
            ToolCallRequest("b", "explode", {}),
            ToolCallRequest("c", "nope", {}),
        ]
    )

    assert [o.status for o in outcomes] == [
        OutcomeStatus.OK,
        OutcomeStatus.ERROR,
        OutcomeStatus.ERROR,
    ]
    assert outcomes[0].result.text == "hello ada"
    # a and b run alone in order; c failed in preparation, before anything ran
    assert recorder.seen == [
        "after c error",
        "error c unknown_tool",
        "before a",
        "after a ok",
        "before b",
        "after b error",
        "error b execution_error",
    ]
    for bug in ("before hook bug", "after hook bug", "on_error hook bug"):
        assert bug in caplog.text


async def test_a_policy_violation_from_a_before_hook_refuses_the_call(
    tools: ToolRegistry,
) -> None:
    class NoExternalNames(ExecutorHook):
        async def before_call(self, call: ToolCallRequest, prepared: PreparedCall) -> None:
            if "http" in str(prepared.arguments):
                raise NetworkViolation("names may not be URLs", target="http")

    executor = ToolExecutor(tools, hooks=[NoExternalNames()])
    [refused, allowed] = await executor.run(
        [
            ToolCallRequest("a", "greet", {"name": "http://x"}),
            ToolCallRequest("b", "greet", {"name": "bob"}),
        ]
    )
    assert refused.kind is ErrorKind.NETWORK_VIOLATION and "hard boundary" in refused.result.text
    assert allowed.ok


async def test_a_tool_after_execute_that_raises_keeps_the_result(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    class Sloppy(Tool):
        name = "sloppy"

        async def execute(self, **kwargs: Any) -> str:
            return "fine"

        async def after_execute(self, args: Mapping[str, Any], result: ToolResult) -> None:
            raise OSError("cleanup failed")

    registry.register(Sloppy())
    [outcome] = await ToolExecutor(registry).run([ToolCallRequest("a", "sloppy", {})])
    assert outcome.ok and outcome.result.text == "fine"
    assert "cleanup failed" in caplog.text


async def test_events_describe_each_call_and_give_the_reference_summaries(
    tools: ToolRegistry,
) -> None:
    events: list[ToolEvent] = []

    def broken_listener(event: ToolEvent) -> None:
        raise RuntimeError("listener bug")

    executor = ToolExecutor(tools, listeners=[broken_listener, events.append])
    await executor.run(
        [ToolCallRequest("a", "greet", {"name": "ada"}), ToolCallRequest("b", "explode", {})]
    )

    assert [(e.type, e.call.id) for e in events] == [
        (EventType.CALL_STARTED, "a"),
        (EventType.CALL_FINISHED, "a"),
        (EventType.CALL_STARTED, "b"),
        (EventType.CALL_FINISHED, "b"),
    ]
    assert events[1].summary() == {"name": "greet", "status": "ok", "detail": "9 characters"}
    assert events[3].summary()["status"] == "error"
    assert "RuntimeError: kaboom" in events[3].detail
    assert events[3].duration is not None and events[3].duration >= 0
    assert events[3].outcome is not None and events[3].outcome.kind is ErrorKind.EXECUTION_ERROR


class ListenerBug(BaseException):
    """Not an `Exception`: `emit` lets it through, as it does a stop."""


async def test_a_call_the_executor_fails_on_still_gets_its_finished_event(
    tools: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    # Whatever goes wrong in a call's path becomes its outcome (here a listener raising a
    # BaseException of its own at the call's start); the listeners that saw it start see
    # it finish, as every other call: a progress display would wait for it forever.
    events: list[ToolEvent] = []

    def listener(event: ToolEvent) -> None:
        events.append(event)
        if event.type is EventType.CALL_STARTED and event.call.id == "a":
            raise ListenerBug("listener bug")

    @tool(read_only=True)
    async def hello(name: str) -> str:
        return f"hello {name}"

    tools.register(hello)
    executor = ToolExecutor(tools, listeners=[listener])
    calls = [ToolCallRequest(name, "hello", {"name": name}) for name in "ab"]
    outcomes = await executor.run(calls)
    for call in calls:  # (the two run together: their events interleave)
        assert [e.type for e in events if e.call.id == call.id] == [
            EventType.CALL_STARTED,
            EventType.CALL_FINISHED,
        ], call.id
    finished = [e for e in events if e.type is EventType.CALL_FINISHED and e.call.id == "a"]
    assert finished[0].outcome is outcomes[0]
    assert outcomes[0].kind is ErrorKind.EXECUTION_ERROR
    assert "ListenerBug" in outcomes[0].result.text
    assert outcomes[1].ok
    assert "the executor failed on call 'a'" in caplog.text


async def test_stream_yields_events_as_calls_start_and_finish(tools: ToolRegistry) -> None:
    executor = ToolExecutor(tools)
    seen = [
        (event.type, event.call.id, event.status)
        async for event in executor.stream(
            [ToolCallRequest("a", "greet", {"name": "x"}), ToolCallRequest("b", "nope", {})]
        )
    ]
    assert seen == [
        (EventType.CALL_FINISHED, "b", OutcomeStatus.ERROR),
        (EventType.CALL_STARTED, "a", None),
        (EventType.CALL_FINISHED, "a", OutcomeStatus.OK),
    ]


async def test_spans_follow_the_genai_conventions(tools: ToolRegistry) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    executor = ToolExecutor(tools, tracer_provider=provider)
    await executor.run(
        [ToolCallRequest("a", "greet", {"name": "ada"}), ToolCallRequest("b", "explode", {})]
    )

    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"execute_tool greet", "execute_tool explode"}
    ok, failed = spans["execute_tool greet"], spans["execute_tool explode"]
    assert ok.attributes is not None and failed.attributes is not None
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "greet"
    assert ok.attributes["gen_ai.tool.call.id"] == "a"
    assert "error.type" not in ok.attributes
    assert failed.attributes["error.type"] == "execution_error"
    assert failed.status.status_code is StatusCode.ERROR
