"""What every SDK adapter shares: the error mapping and the stream-to-events driver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from toolbridge.agent.errors import (
    ContextLengthError,
    ModelAuthenticationError,
    ModelError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    RateLimitError,
)
from toolbridge.agent.events import (
    ModelEvent,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallReady,
)
from toolbridge.agent.messages import AssistantMessage, Usage
from toolbridge.formats.assembler import StreamAdapter
from toolbridge.formats.types import FormatError
from toolbridge.formats.wire import dumped

__all__ = ["Deltas", "StreamDriver", "drive", "error_for_status", "missing_sdk"]

Deltas = tuple[str, str, Usage | None]
"""What an event shows: answer text, reasoning text, and usage when it reports some."""

_CONTEXT_HINTS = (
    "context_length",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "input is too long",
)


def missing_sdk(package: str, extra: str) -> ImportError:
    return ImportError(
        f"this model adapter needs the {package!r} package: pip install 'toolbridge[{extra}]'"
    )


def error_for_status(status: int | None, message: str, cause: BaseException | None) -> ModelError:
    """The typed error for an HTTP status and the provider's message."""
    lowered = message.lower()
    cls: type[ModelError]
    if status == 429:
        cls = RateLimitError
    elif status in (401, 403):
        cls = ModelAuthenticationError
    elif status is not None and status >= 500:
        cls = ModelServerError
    elif any(hint in lowered for hint in _CONTEXT_HINTS):
        cls = ContextLengthError
    elif status is None:
        cls = ModelServerError
    else:
        cls = ModelRequestError
    where = f"HTTP {status}" if status is not None else "no HTTP status"
    return cls(f"the model call failed ({where}): {message}", status=status, cause=cause)


class StreamDriver:
    """Turns one turn's wire events into model events through a format's stream adapter.

    `feed(event)` takes an SDK event, dumps it once to wire JSON, lets `deltas` pick
    the display text, reasoning and usage out of it, and yields `ToolCallReady` for every call
    the format's adapter finished. `response()` builds the `AssistantMessage`.
    """

    def __init__(
        self,
        adapter: StreamAdapter,
        *,
        format: str,
        model: str,
        turn: int,
        deltas: Callable[[dict[str, Any]], Deltas],
    ) -> None:
        self.adapter = adapter
        self.format = format
        self.model = model
        self.turn = turn
        self._deltas = deltas
        self._reasoning: list[str] = []
        self.usage = Usage(requests=1)

    def feed(self, event: Any) -> list[ModelEvent]:
        data = dumped(event)
        if not isinstance(data, dict):
            raise ModelResponseError(f"the {self.format} stream sent a non-object event: {data!r}")
        out: list[ModelEvent] = []
        text, reasoning, usage = self._deltas(data)
        if usage is not None:  # later reports (Anthropic's message_delta) fill in fields
            old = self.usage
            self.usage = Usage(
                usage.input_tokens or old.input_tokens,
                usage.output_tokens or old.output_tokens,
                usage.cache_read_tokens or old.cache_read_tokens,
                1,
            )
        if reasoning:
            self._reasoning.append(reasoning)
            out.append(ReasoningDelta(reasoning, self.turn))
        if text:
            out.append(TextDelta(text, self.turn))
        try:
            calls = self.adapter.feed(data)
        except FormatError as exc:
            raise ModelResponseError(f"the {self.format} stream is malformed: {exc}") from exc
        out.extend(ToolCallReady(call, self.turn) for call in calls)
        return out

    def finish(self) -> list[ModelEvent]:
        out: list[ModelEvent] = [ToolCallReady(c, self.turn) for c in self.adapter.close()]
        result = self.adapter.result()
        message = AssistantMessage(
            text=result.text,
            calls=result.calls,
            parts=result.parts,
            reasoning="".join(self._reasoning),
            format=self.format,
            model=self.model,
            finish_reason=result.finish_reason,
            truncated=result.truncated,
        )
        out.append(ModelResponse(message, self.usage))
        return out


async def drive(driver: StreamDriver, stream: AsyncIterator[Any]) -> AsyncIterator[ModelEvent]:
    """Feed every event of `stream` to `driver` and yield what comes out."""
    async for event in stream:
        for out in driver.feed(event):
            yield out
    for out in driver.finish():
        yield out
