"""Anthropic Messages over the official ``anthropic`` SDK.

Definitions, the assistant turn (thinking and redacted-thinking blocks replayed with
their signatures), results and the stream go through `toolbridge.formats.anthropic`;
this module calls the SDK, reads the display deltas and usage, and maps the errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from toolbridge.agent.adapters._common import (
    Deltas,
    claude_has_json_outputs,
    claude_has_tool_search,
    history,
    missing_sdk,
    stainless_error,
    stream_turn,
    tokens,
)
from toolbridge.agent.errors import ModelAuthenticationError, ModelError
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import Usage
from toolbridge.agent.model import ModelRequest, NativeOutput
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool_search import ToolSelection
from toolbridge.formats import anthropic as anthropic_format

__all__ = ["AnthropicModel"]

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires an output limit; this one applies when `ModelSettings` has none."""


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    return Usage(
        tokens(usage, "input_tokens"),
        tokens(usage, "output_tokens"),
        tokens(usage, "cache_read_input_tokens"),
        1,
    )


def _deltas(data: dict[str, Any]) -> Deltas:
    kind = data.get("type")
    if kind == "content_block_delta":
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta":
            return str(delta.get("text") or ""), "", None
        if delta.get("type") == "thinking_delta":
            return "", str(delta.get("thinking") or ""), None
    elif kind == "message_start":
        message = data.get("message") or {}
        return "", "", _usage(message.get("usage") if isinstance(message, dict) else None)
    elif kind == "message_delta":
        return "", "", _usage(data.get("usage"))
    return "", "", None


def _definitions(tools: ToolRegistry | ToolSelection) -> list[dict[str, Any]]:
    """The ``tools`` array; under Anthropic's own tool search, its server tool first and
    the deferred definitions marked ``defer_loading``."""
    definitions = anthropic_format.definitions(tools)
    if isinstance(tools, ToolSelection) and tools.deferred:
        return anthropic_format.tool_search_definitions(
            definitions, tools.deferred, tools.native_search
        )
    return definitions


def _with_beta(headers: Any, beta: str) -> dict[str, Any]:
    """`headers` (the caller's ``extra_headers``, if any) with `beta` added to the
    comma-separated ``anthropic-beta`` header, once."""
    merged = dict(headers or {})
    present = [b.strip() for b in str(merged.get("anthropic-beta") or "").split(",") if b.strip()]
    if beta not in present:
        present.append(beta)
    merged["anthropic-beta"] = ",".join(present)
    return merged


class AnthropicModel:
    """A Claude model. Pass `client` (an ``anthropic.AsyncAnthropic`` you built) or let it
    build one from the environment (``ANTHROPIC_API_KEY``). The run's instructions go
    to ``system``; `ModelSettings.extra` passes options such as ``thinking`` as is.
    Structured output is native (``output_config.format``, JSON outputs) when every
    object in the schema is closed; keywords JSON outputs does not support are moved
    into descriptions (the answer is still validated against them).
    """

    format = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        try:
            import anthropic
        except ImportError:
            raise missing_sdk("anthropic", "anthropic") from None
        self._anthropic = anthropic
        if client is None:
            try:
                client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url)
            except anthropic.AnthropicError as exc:
                raise ModelAuthenticationError(
                    f"cannot make an Anthropic client: {exc} (set ANTHROPIC_API_KEY or pass "
                    "client=)"
                ) from None
            if client.api_key is None and client.auth_token is None:  # the SDK would only
                raise ModelAuthenticationError(  # fail at the first request, with a TypeError
                    "cannot make an Anthropic client: no API key (set ANTHROPIC_API_KEY or "
                    "ANTHROPIC_AUTH_TOKEN, or pass api_key= or client=)"
                )
        self.client = client
        self.model = model
        self.max_tokens = max_tokens

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``messages.create`` (rendered incrementally)."""
        messages = history(request, self.format)
        settings = request.settings
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "stream": True,
        }
        if request.instructions:
            kwargs["system"] = request.instructions
        tools = request.cache.definitions(self.format, request.tools, _definitions)
        if tools:
            kwargs["tools"] = tools
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        kwargs.update(settings.extra)
        if isinstance(request.tools, ToolSelection) and request.tools.deferred:
            kwargs["extra_headers"] = _with_beta(kwargs.get("extra_headers"), self._search_beta())
        output = request.output
        if output is not None and output.closed_schema is not None:
            kwargs["output_config"] = {
                **kwargs.get("output_config", {}),  # effort from `extra` stays
                "format": {"type": "json_schema", "schema": output.closed_schema},
            }
        return kwargs

    def _search_beta(self) -> str:
        """The tool-search beta of the client's platform: Vertex AI and Bedrock have their
        own value for the same server tool."""
        sdk = self._anthropic
        cloud = (sdk.AsyncAnthropicVertex, sdk.AsyncAnthropicBedrock)
        if isinstance(self.client, cloud):
            return anthropic_format.TOOL_SEARCH_BETA_CLOUD
        return anthropic_format.TOOL_SEARCH_BETA

    def supports_tool_search(self) -> bool:
        """Whether the model has Anthropic's tool-search server tool (the Claude 4.5
        generation on, `claude_has_tool_search`)."""
        return claude_has_tool_search(self.model)

    def supports_native_output(self, output: NativeOutput) -> bool:
        """Schemas whose objects can all be closed (JSON outputs requires it), on models
        that have JSON outputs (`claude_has_json_outputs`)."""
        return output.closed_schema is not None and claude_has_json_outputs(self.model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_turn(
            self,
            request,
            deltas=_deltas,
            call=lambda: self.client.messages.create(**self.request_kwargs(request)),
            error=self._error,
        )

    def _error(self, exc: Exception) -> ModelError | None:
        return stainless_error(exc, self._anthropic, "the Anthropic API")
