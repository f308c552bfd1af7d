"""Ollama's native ``/api/chat`` over the official ``ollama`` SDK (NDJSON streaming).

Definitions, the assistant turn (``thinking`` replayed), results and the stream go
through `toolbridge.formats.ollama`; this module calls the SDK, reads the display
deltas and usage (``prompt_eval_count`` / ``eval_count``), and maps the errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from toolbridge.agent.adapters._common import (
    Deltas,
    error_for_status,
    history,
    missing_sdk,
    sampling,
    stream_turn,
    tokens,
)
from toolbridge.agent.errors import ModelConnectionError, ModelError
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import Usage
from toolbridge.agent.model import ModelRequest, NativeOutput
from toolbridge.formats import ollama as ollama_format

__all__ = ["OllamaModel"]


def _deltas(data: dict[str, Any]) -> Deltas:
    message = data.get("message") or {}
    text = message.get("content") if isinstance(message, dict) else None
    thinking = message.get("thinking") if isinstance(message, dict) else None
    usage = None
    if data.get("done"):
        usage = Usage(tokens(data, "prompt_eval_count"), tokens(data, "eval_count"))
    return (
        text if isinstance(text, str) else "",
        thinking if isinstance(thinking, str) else "",
        usage,
    )


class OllamaModel:
    """A model served by Ollama. Pass `client` (an ``ollama.AsyncClient``) or `host`
    (default: the SDK's, ``OLLAMA_HOST`` or ``http://localhost:11434``). `think`
    is Ollama's thinking switch, sent when not None. Structured output is native:
    the schema as ``format``.
    """

    format = "ollama"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        host: str | None = None,
        think: bool | str | None = None,
    ) -> None:
        try:
            import httpx
            import ollama
        except ImportError:
            raise missing_sdk("ollama", "ollama") from None
        self._ollama = ollama
        self._transport_error = httpx.TransportError
        self.client = client if client is not None else ollama.AsyncClient(host=host)
        self.model = model
        self.think = think

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``AsyncClient.chat`` (rendered incrementally)."""
        messages = history(request, self.format)
        if request.instructions:
            messages.insert(0, {"role": "system", "content": request.instructions})
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        tools = request.cache.definitions(self.format, request.tools, ollama_format.definitions)
        if tools:
            kwargs["tools"] = tools
        if self.think is not None:
            kwargs["think"] = self.think
        if request.output is not None:
            kwargs["format"] = dict(request.output.schema)
        options = sampling(request.settings, max_tokens="num_predict")
        if options:
            kwargs["options"] = options
        kwargs.update(request.settings.extra)
        return kwargs

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_turn(
            self,
            request,
            deltas=_deltas,
            call=lambda: self.client.chat(**self.request_kwargs(request)),
            error=self._error,
        )

    def supports_native_output(self, output: NativeOutput) -> bool:
        """Every schema (``format`` takes JSON Schema as it is)."""
        return True

    def _error(self, exc: Exception) -> ModelError | None:
        if isinstance(exc, self._ollama.ResponseError):
            status = exc.status_code if exc.status_code and exc.status_code > 0 else None
            return error_for_status(status, exc.error, exc)
        if isinstance(exc, ConnectionError | self._transport_error):
            return ModelConnectionError(f"cannot reach Ollama: {exc}", cause=exc)
        return None
