"""OpenAI Chat Completions over the official ``openai`` SDK (any OpenAI-compatible
``base_url``: vLLM, Ollama's /v1, LM Studio, llama.cpp server, OpenRouter).

Definitions, the assistant turn, results and the stream all go through
`toolbridge.formats.openai_chat`; this module only calls the SDK, reads the display
deltas and the usage, and maps the SDK's errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolbridge.agent.adapters._common import (
    Deltas,
    history,
    sampling,
    stream_turn,
    tokens,
)
from toolbridge.agent.adapters._openai import json_schema_format, openai_client, openai_error
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import Usage
from toolbridge.agent.model import ModelRequest, NativeOutput
from toolbridge.formats import openai_chat

__all__ = ["OpenAIChatModel"]


def _deltas(data: dict[str, Any]) -> Deltas:
    text, reasoning = "", ""
    for choice in data.get("choices") or ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            delta = choice.get("delta") or {}
            if isinstance(delta, dict):
                content = delta.get("content")
                text = content if isinstance(content, str) else ""
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                reasoning = thought if isinstance(thought, str) else ""
    return text, reasoning, _usage(data)


def _usage(data: Mapping[str, Any]) -> Usage | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    return Usage(
        tokens(usage, "prompt_tokens"),
        tokens(usage, "completion_tokens"),
        tokens(usage, "prompt_tokens_details", "cached_tokens"),
        1,
    )


class OpenAIChatModel:
    """A Chat Completions model. Pass `client` (an ``openai.AsyncOpenAI`` you built) or
    let it build one from the environment (``OPENAI_API_KEY``, `base_url`).

    `strict` is `openai_chat.definitions`' option. `system_role` is ``"system"`` or
    ``"developer"``. `max_tokens_param` names the output limit sent from
    `ModelSettings.max_tokens` (``max_tokens`` for servers that predate
    ``max_completion_tokens``). Structured output is native: ``response_format`` with a
    ``json_schema``, strict when strict mode can express the schema.
    """

    format = "openai_chat"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        strict: bool | None = False,
        system_role: str = "system",
        max_tokens_param: str = "max_completion_tokens",
        stream_usage: bool = True,
    ) -> None:
        self.client = openai_client(client, api_key=api_key, base_url=base_url)
        self.model = model
        self.strict = strict
        self.system_role = system_role
        self.max_tokens_param = max_tokens_param
        self.stream_usage = stream_usage

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create`` (rendered incrementally)."""
        messages = history(request, self.format)
        if request.instructions:
            messages.insert(0, {"role": self.system_role, "content": request.instructions})
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        if self.stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        tools = request.cache.definitions(
            (self.format, self.strict),
            request.tools,
            lambda registry: openai_chat.definitions(registry, strict=self.strict),
        )
        if tools:
            kwargs["tools"] = tools
        if request.output is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": json_schema_format(request.output),
            }
        kwargs.update(sampling(request.settings, max_tokens=self.max_tokens_param))
        kwargs.update(request.settings.extra)
        return kwargs

    def supports_native_output(self, output: NativeOutput) -> bool:
        """Every schema: strict when it can be, ``strict: false`` otherwise."""
        return True

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_turn(
            self,
            request,
            deltas=_deltas,
            call=lambda: self.client.chat.completions.create(**self.request_kwargs(request)),
            error=openai_error,
        )
