"""Streamed tool calls by format name: `stream_adapter(format)` and `assemble(format, events)`.

The assembler itself lives in `toolbridge.formats.assembler` (provider-free); each
provider module owns its adapter (`openai_chat.OpenAIChatStream`, ...). This module
only maps format names to adapters and keeps the adapters importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from toolbridge.formats.anthropic import AnthropicStream
from toolbridge.formats.assembler import DONE, StreamAdapter, StreamResult, ToolCallAssembler
from toolbridge.formats.bedrock import BedrockStream
from toolbridge.formats.gemini import GeminiStream
from toolbridge.formats.ollama import OllamaStream
from toolbridge.formats.openai_chat import OpenAIChatStream
from toolbridge.formats.openai_responses import OpenAIResponsesStream
from toolbridge.formats.types import FormatError

__all__ = [
    "DONE",
    "STREAM_FORMATS",
    "AnthropicStream",
    "BedrockStream",
    "GeminiStream",
    "OllamaStream",
    "OpenAIChatStream",
    "OpenAIResponsesStream",
    "StreamAdapter",
    "StreamResult",
    "ToolCallAssembler",
    "assemble",
    "stream_adapter",
]

STREAM_FORMATS: Mapping[str, Callable[..., StreamAdapter]] = MappingProxyType(
    {
        "openai_chat": OpenAIChatStream,
        "openai_responses": OpenAIResponsesStream,
        "anthropic": AnthropicStream,
        "gemini": GeminiStream,
        "ollama": OllamaStream,
        "bedrock": BedrockStream,
    }
)


def stream_adapter(format: str, *, id_salt: str = "") -> StreamAdapter:
    """A fresh adapter for a provider format name (the names of `toolbridge.formats`)."""
    factory = STREAM_FORMATS.get(format)
    if factory is None:
        known = ", ".join(STREAM_FORMATS)
        raise FormatError(f"unknown stream format {format!r}; use one of: {known}")
    return factory(id_salt=id_salt)


def assemble(format: str, events: Iterable[Any], *, id_salt: str = "") -> StreamResult:
    """Feed a whole recorded stream through the format's adapter and return the result.

    Events are dicts, SDK models or JSON text; OpenAI's ``"[DONE]"`` sentinel ends the
    stream. Raises only `FormatError` for events of the wrong shape.
    """
    adapter = stream_adapter(format, id_salt=id_salt)
    for event in events:
        adapter.feed(event)
    return adapter.result()
