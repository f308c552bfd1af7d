"""`ScriptedModel`: a model adapter that plays back turns you wrote, for tests, docs and
benches. It streams each turn's text and calls as a real adapter would, renders the
conversation through the OpenAI chat format (so the per-turn rendering cost is real),
and records every request it got.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from toolbridge.agent.events import ModelEvent, ModelResponse, TextDelta, ToolCallReady
from toolbridge.agent.messages import AssistantMessage, Usage
from toolbridge.agent.model import ModelRequest, NativeOutput, render_message
from toolbridge.formats import openai_chat

__all__ = ["ScriptedModel"]

DEFAULT_USAGE = Usage(10, 5, 0, 1)
"""What each scripted turn reports unless told otherwise."""

Turn = AssistantMessage | Callable[[ModelRequest], AssistantMessage]


class ScriptedModel:
    """Plays `turns` in order; a turn is an `AssistantMessage` or a function of the
    request that returns one. Running out of turns is an error that names the turn.

    `requests` keeps each request's rendered wire messages (a copy), `usage` is what
    every turn reports. With `native_output=True` it plays a provider with native
    structured output (the runner then asks for JSON text instead of adding the
    ``final_result`` tool); `outputs` keeps each request's `NativeOutput` (or None).
    """

    format = "openai_chat"

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        model: str = "scripted",
        usage: Usage = DEFAULT_USAGE,
        record: bool = True,
        native_output: bool = False,
    ) -> None:
        self.model = model
        self._turns = list(turns)
        self._next = 0
        self._usage = usage
        self._record = record
        self._native_output = native_output
        self.requests: list[list[dict[str, Any]]] = []
        self.outputs: list[NativeOutput | None] = []

    def supports_native_output(self, output: NativeOutput) -> bool:
        """As the model was made (`native_output`), whatever the schema."""
        return self._native_output

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        wire = request.cache.messages(
            self.format, request.messages, lambda m: render_message(m, self.format)
        )
        request.cache.definitions(self.format, request.tools, openai_chat.definitions)
        if self._record:
            self.requests.append(list(wire))
            self.outputs.append(request.output)
        if self._next >= len(self._turns):
            raise IndexError(
                f"ScriptedModel has {len(self._turns)} turns and was asked for turn "
                f"{self._next + 1}; script more turns or lower max_turns"
            )
        turn = self._turns[self._next]
        self._next += 1
        message = turn(request) if callable(turn) else turn
        if message.format is None:
            message = AssistantMessage(
                message.text,
                message.calls,
                message.parts,
                message.reasoning,
                self.format,
                self.model,
                message.finish_reason,
                message.truncated,
            )
        if message.text:
            yield TextDelta(message.text, request.turn)
        for call in message.calls:
            yield ToolCallReady(call, request.turn)
        yield ModelResponse(message, self._usage)
