"""Optional OpenTelemetry spans for tool calls, after the GenAI semantic conventions.

One span per executed call, named ``execute_tool {tool name}``, with
``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and, on
failure, ``error.type`` (the `ErrorKind`). When opentelemetry-api is not installed,
`call_tracer()` returns None and the executor does no tracing work at all.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from toolbridge.core.errors import ErrorKind

__all__ = ["CallTracer", "call_tracer"]

TRACER_NAME = "toolbridge"


class CallTracer:
    """Starts and finishes the span of one tool call on an OpenTelemetry tracer."""

    def __init__(self, tracer: Any, status_error: Callable[[str], Any]) -> None:
        self._tracer = tracer
        self._status_error = status_error

    def span(self, tool_name: str, call_id: str) -> AbstractContextManager[Any]:
        return self._tracer.start_as_current_span(  # type: ignore[no-any-return]
            f"execute_tool {tool_name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool_name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
            },
            record_exception=False,
            set_status_on_exception=False,
        )

    def failed(self, span: Any, kind: ErrorKind, message: str) -> None:
        """Mark `span` as failed with the error kind (never the model text's traceback)."""
        span.set_attribute("error.type", kind.value)
        span.set_status(self._status_error(message))


def call_tracer(provider: Any = None) -> CallTracer | None:
    """A tracer on `provider` (default: the global one), or None when nothing would record.

    None without opentelemetry-api, and None while no SDK provider is configured: the
    API's no-op spans still cost microseconds per call. Configure OpenTelemetry before
    building the executor (or pass `provider`) to get spans.
    """
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None

    def status_error(message: str) -> Any:
        return trace.Status(trace.StatusCode.ERROR, message)

    return CallTracer(trace.get_tracer(TRACER_NAME, tracer_provider=provider), status_error)
