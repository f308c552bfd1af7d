"""The model side of a run: `ModelAdapter` (one streamed turn in, typed events out), the
request it gets, and the incremental renderer every adapter uses.

An adapter owns its SDK client and nothing else; per-run data (the rendered history,
the rendered tool definitions) lives in the request's `RenderCache`, which the runner
makes once per run. So one adapter serves many runs at once, and a turn renders only
the messages added since the previous turn.

An adapter whose provider constrains answers to a JSON Schema declares it with
``supports_native_output(output) -> bool`` and renders `ModelRequest.output` into its
provider's request option; the runner asks through `native_output_supported`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultsMessage,
    UserMessage,
)
from toolbridge.agent.native_output import NativeOutput
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool_search import ToolSelection
from toolbridge.formats import provider_format

__all__ = [
    "ModelAdapter",
    "ModelRequest",
    "ModelSettings",
    "NativeOutput",
    "RenderCache",
    "native_output_supported",
    "render_message",
]

Wire = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-request settings every adapter understands; `extra` goes to the SDK call as is."""

    max_tokens: int | None = None
    temperature: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class RenderCache:
    """The wire form of a conversation's prefix, kept between the turns of one run.

    The conversation only grows at the end, so the cache checks that the last message it
    rendered is still in its place (identity, O(1)) and renders only what follows. Any
    other change (a different format, an edited history) renders everything again.
    `rendered` counts the messages rendered so far, for tests and benches.
    """

    def __init__(self) -> None:
        self._key: Any = None
        self._messages: list[Message] = []
        self._wire: list[Wire] = []
        self._definitions: tuple[Any, list[Wire]] | None = None
        self.rendered = 0

    def messages(
        self, key: Any, messages: Sequence[Message], render: Callable[[Message], list[Wire]]
    ) -> list[Wire]:
        """The wire messages for `messages`; `key` names the rendering (format, options).

        The returned list is the cache's own: copy it before changing it.
        """
        done = len(self._messages)
        if (
            key != self._key
            or len(messages) < done
            or (done and messages[done - 1] is not self._messages[done - 1])
        ):
            self._key, self._messages, self._wire, done = key, [], [], 0
        for message in messages[done:]:
            self._wire.extend(render(message))
            self._messages.append(message)
            self.rendered += 1
        return self._wire

    def definitions(
        self,
        key: Any,
        registry: ToolRegistry | ToolSelection,
        render: Callable[[ToolRegistry | ToolSelection], list[Wire]],
    ) -> list[Wire]:
        """The provider's tools array, rendered again only when the tools sent changed."""
        full_key = (key, registry.definitions_hash)
        if self._definitions is None or self._definitions[0] != full_key:
            self._definitions = (full_key, render(registry))
        return self._definitions[1]


@dataclass(slots=True)
class ModelRequest:
    """One model turn: the instructions, the conversation so far, the tools, settings.

    `turn` and `id_salt` go into the call ids an adapter generates when its provider
    sends none.
    """

    instructions: str | None
    messages: Sequence[Message]
    tools: ToolRegistry | ToolSelection
    """The tools to send: a registry, or under tool search the run's `ToolSelection`."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    cache: RenderCache = field(default_factory=RenderCache)
    turn: int = 1
    id_salt: str = ""
    """Mixed into generated call ids (with the turn) so they are unique to the run."""
    output: NativeOutput | None = None
    """The schema the answer must follow, through the provider's native structured output
    (set only for an adapter whose ``supports_native_output`` accepted it)."""


@runtime_checkable
class ModelAdapter(Protocol):
    """A model behind one provider's SDK: stream one turn as typed events.

    `stream` yields `TextDelta`, `ReasoningDelta` and `ToolCallReady` as they come
    and ends with exactly one `ModelResponse`; it raises a `ModelError` subclass when
    the provider fails. `format` is the `toolbridge.formats` name of its wire.

    Optional: ``supports_native_output(output: NativeOutput) -> bool``, True when the
    adapter renders `ModelRequest.output` as its provider's structured-output option
    (an adapter without it gets a ``final_result`` tool instead).
    """

    format: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


def native_output_supported(model: object, output: NativeOutput) -> bool:
    """Whether `model` can constrain its answer to `output` natively (its optional
    ``supports_native_output`` method says so)."""
    check = getattr(model, "supports_native_output", None)
    return callable(check) and bool(check(output))


def _plain_user(format: str, text: str) -> Wire:
    if format == "gemini":
        return {"role": "user", "parts": [{"text": text}]}
    if format == "bedrock":
        return {"role": "user", "content": [{"text": text}]}
    return {"role": "user", "content": text}


def render_message(message: Message, format: str) -> list[Wire]:
    """One neutral message in `format`'s request shape, through `toolbridge.formats`.

    A system message inside the conversation becomes a ``system`` message where the
    wire has one (OpenAI chat, Responses, Ollama) and a user message otherwise;
    adapters put the run's instructions where their provider wants them.
    """
    if isinstance(message, UserMessage):
        return [_plain_user(format, message.text)]
    if isinstance(message, SystemMessage):
        if format in ("openai_chat", "openai_responses", "ollama"):
            return [{"role": "system", "content": message.text}]
        return [_plain_user(format, message.text)]
    module = provider_format(format)
    if isinstance(message, AssistantMessage):
        rendered: list[Wire] = module.assistant_messages(message.parsed(format))
        return rendered
    if isinstance(message, ToolResultsMessage):
        results: list[Wire] = module.result_messages(message.results)
        return results
    raise TypeError(f"not a conversation message: {type(message).__name__}")
