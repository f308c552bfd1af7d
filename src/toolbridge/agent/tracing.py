"""Optional OpenTelemetry spans for runs, after the GenAI semantic conventions.

``invoke_agent`` spans a run; each model turn is a ``chat {model}`` child with the
turn's token usage and finish reason; the executor's ``execute_tool {name}`` spans
nest under the run. Spans are started explicitly (never made current across a
``yield``, which would leak the context into the consumer of `stream()`); the run's
span is current only while the executor runs a batch. Without opentelemetry-api, or
while no SDK provider is configured, `run_tracer()` returns None and nothing is traced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from toolbridge.agent.messages import Usage

__all__ = ["RunTracer", "run_tracer"]

_T = TypeVar("_T")

TRACER_NAME = "toolbridge"

PROVIDER_NAMES = {
    "openai_chat": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "ollama": "ollama",
    "bedrock": "aws.bedrock",
}


class RunTracer:
    """Starts and ends the spans of one runner's runs."""

    def __init__(self, tracer: Any, trace: Any, context: Any) -> None:
        self._tracer = tracer
        self._trace = trace
        self._context = context

    def _attributes(self, operation: str, format: str, model: str) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": PROVIDER_NAMES.get(format, format),
            "gen_ai.request.model": model,
        }

    def start_run(self, format: str, model: str) -> Any:
        return self._tracer.start_span(
            "invoke_agent", attributes=self._attributes("invoke_agent", format, model)
        )

    def start_chat(self, run_span: Any, format: str, model: str) -> Any:
        parent = self._trace.set_span_in_context(run_span)
        return self._tracer.start_span(
            f"chat {model}", context=parent, attributes=self._attributes("chat", format, model)
        )

    def end(
        self,
        span: Any,
        usage: Usage | None = None,
        *,
        finish_reason: str | None = None,
        stop_reason: str | None = None,
        error: BaseException | None = None,
    ) -> None:
        if usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
        if stop_reason is not None:
            span.set_attribute("toolbridge.stop_reason", stop_reason)
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)[:200]))
        span.end()

    async def within(self, run_span: Any, work: Callable[[], Awaitable[_T]]) -> _T:
        """Await `work` with the run's span current (no yield happens in between)."""
        token = self._context.attach(self._trace.set_span_in_context(run_span))
        try:
            return await work()
        finally:
            self._context.detach(token)


def run_tracer(provider: Any = None) -> RunTracer | None:
    """A tracer on `provider` (default: the global one), or None when nothing would record."""
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None
    return RunTracer(trace.get_tracer(TRACER_NAME, tracer_provider=provider), trace, context)
