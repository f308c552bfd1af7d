"""OpenAI Responses over the official ``openai`` SDK.

Definitions, input items (reasoning items replayed as received, ``function_call``
items with their ``fc_`` ids), ``function_call_output`` items and the stream go through
`toolbridge.formats.openai_responses`; this module calls the SDK, reads the display
deltas and usage, and maps the errors. ``stateless=True`` sends ``store: false`` and
asks for encrypted reasoning content, which the next turn then replays.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from toolbridge.agent.adapters._common import (
    Deltas,
    error_for_status,
    history,
    sampling,
    stream_turn,
    tokens,
)
from toolbridge.agent.adapters._openai import json_schema_format, openai_client, openai_error
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.messages import Usage
from toolbridge.agent.model import ModelRequest, NativeOutput
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool_search import ToolSelection
from toolbridge.formats import openai_responses

__all__ = ["OpenAIResponsesModel"]

_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


def _deltas(data: dict[str, Any]) -> Deltas:
    kind = data.get("type")
    if kind == "response.output_text.delta":
        return str(data.get("delta") or ""), "", None
    if kind in _REASONING_DELTAS:
        return "", str(data.get("delta") or ""), None
    if kind in ("response.completed", "response.incomplete"):
        response = data.get("response") or {}
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict):
            return (
                "",
                "",
                Usage(
                    tokens(usage, "input_tokens"),
                    tokens(usage, "output_tokens"),
                    tokens(usage, "input_tokens_details", "cached_tokens"),
                    1,
                ),
            )
    if kind in ("response.failed", "error"):
        response = data.get("response") or {}
        error = (response.get("error") if isinstance(response, dict) else None) or data
        message = error.get("message") if isinstance(error, dict) else None
        raise error_for_status(None, str(message or "the response failed"), None)
    return "", "", None


_GPT = re.compile(r"(?<![a-z0-9])gpt-(\d+)(?:\.(\d+))?(?![\d.])")


def gpt_has_tool_search(model: str) -> bool:
    """Whether the GPT model named in `model` has the Responses API's ``tool_search``
    (GPT-5.4 and later). Elsewhere tool search is toolbridge's own ``tool_search`` tool."""
    found = _GPT.search(model.lower())
    if found is None:
        return False
    return (int(found.group(1)), int(found.group(2) or 0)) >= (5, 4)


class OpenAIResponsesModel:
    """A model behind the Responses API. Pass `client` (an ``openai.AsyncOpenAI``) or
    let it build one from the environment. Instructions go to ``instructions``.
    Structured output is native: ``text.format`` of type ``json_schema``.
    """

    format = "openai_responses"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        strict: bool | None = False,
        stateless: bool = False,
    ) -> None:
        self.client = openai_client(client, api_key=api_key, base_url=base_url)
        self.model = model
        self.strict = strict
        self.stateless = stateless

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``responses.create`` (rendered incrementally)."""
        items = history(request, self.format)
        kwargs: dict[str, Any] = {"model": self.model, "input": items, "stream": True}
        if request.instructions:
            kwargs["instructions"] = request.instructions
        tools = request.cache.definitions(
            (self.format, self.strict), request.tools, self._definitions
        )
        if tools:
            kwargs["tools"] = tools
        if self.stateless:
            kwargs["store"] = False
            kwargs["include"] = ["reasoning.encrypted_content"]
        if request.output is not None:
            kwargs["text"] = {
                "format": {"type": "json_schema", **json_schema_format(request.output)}
            }
        kwargs.update(sampling(request.settings, max_tokens="max_output_tokens"))
        kwargs.update(request.settings.extra)
        return kwargs

    def _definitions(self, tools: ToolRegistry | ToolSelection) -> list[dict[str, Any]]:
        """The ``tools`` array; under the API's own tool search, ``tool_search`` first,
        the deferred functions marked ``defer_loading`` and each MCP server's tools in
        one namespace named after the server."""
        definitions = openai_responses.definitions(tools, strict=self.strict)
        if not (isinstance(tools, ToolSelection) and tools.deferred):
            return definitions
        servers = {t.name: getattr(t, "mcp_server", None) for t in tools}
        groups = {name: server for name, server in servers.items() if isinstance(server, str)}
        return openai_responses.tool_search_definitions(definitions, tools.deferred, groups)

    def supports_tool_search(self) -> bool:
        """Whether the model has the API's ``tool_search`` tool: GPT-5.4 and later
        (`gpt_has_tool_search`)."""
        return gpt_has_tool_search(self.model)

    def supports_native_output(self, output: NativeOutput) -> bool:
        """Every schema: strict when it can be, ``strict: false`` otherwise."""
        return True

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return stream_turn(
            self,
            request,
            deltas=_deltas,
            call=lambda: self.client.responses.create(**self.request_kwargs(request)),
            error=openai_error,
        )
