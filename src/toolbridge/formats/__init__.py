"""Provider wire formats: one module per provider, each with definitions out, calls in
(whole and streamed) and results back.

Every provider module has the same four functions: ``definitions(tools)``,
``parse_definitions(defs)``, ``parse_response(payload)`` and ``result_messages(outcomes)``;
`provider_format(name)` returns the module for a format name, as `detect_format` gives it.
"""

from __future__ import annotations

from types import ModuleType

from toolbridge.formats import (
    anthropic,
    bedrock,
    gemini,
    ollama,
    openai_chat,
    openai_responses,
)
from toolbridge.formats.detect import detect_format
from toolbridge.formats.history import repair_history
from toolbridge.formats.schemas import UnsupportedSchema
from toolbridge.formats.streaming import StreamResult, ToolCallAssembler, assemble, stream_adapter
from toolbridge.formats.text import TextCalls, parse_text_calls
from toolbridge.formats.types import (
    FormatError,
    FormatName,
    HistoryChange,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSpec,
)

__all__ = [
    "PROVIDER_FORMATS",
    "FormatError",
    "FormatName",
    "HistoryChange",
    "ParsedResponse",
    "StreamResult",
    "TextCalls",
    "ToolCallAssembler",
    "ToolOutcomeLike",
    "ToolSpec",
    "UnsupportedSchema",
    "anthropic",
    "assemble",
    "bedrock",
    "detect_format",
    "gemini",
    "ollama",
    "openai_chat",
    "openai_responses",
    "parse_text_calls",
    "provider_format",
    "repair_history",
    "stream_adapter",
]

PROVIDER_FORMATS: dict[str, ModuleType] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
    "ollama": ollama,
    "bedrock": bedrock,
}


def provider_format(name: str) -> ModuleType:
    """The module of the provider format `name`; a clear error for an unknown one."""
    try:
        return PROVIDER_FORMATS[name]
    except KeyError:
        known = ", ".join(PROVIDER_FORMATS)
        raise FormatError(f"unknown provider format {name!r}; known formats: {known}") from None
