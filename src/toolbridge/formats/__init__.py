"""Provider wire formats: one module per provider, each owning its whole wire: definitions
out, calls in (whole and streamed), the assistant turn and results back.

Every provider module has the same functions: ``definitions(tools)``,
``parse_definitions(defs)``, ``parse_response(payload)``, a stream adapter class,
``assistant_messages(parsed)`` and ``result_messages(outcomes)``;
`provider_format(name)` returns the module for a format name, as `detect_format` gives
it. `parse(payload)` takes any provider's whole response or list of stream events.
Shared, provider-free machinery: `assembler` (streamed calls), `history` (repair
engine), `wire` (typed readers: every parser raises only `FormatError`).
"""

from __future__ import annotations

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
from toolbridge.formats.parsing import (
    PROVIDER_FORMATS,
    assistant_messages,
    detect_stream_format,
    parse,
    provider_format,
)
from toolbridge.formats.schemas import UnsupportedSchema
from toolbridge.formats.streaming import (
    StreamAdapter,
    StreamResult,
    ToolCallAssembler,
    assemble,
    stream_adapter,
)
from toolbridge.formats.text import TextCalls, parse_text_calls
from toolbridge.formats.types import (
    NO_PARAMETERS,
    FormatError,
    FormatName,
    HistoryChange,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSpec,
    TurnPart,
)

__all__ = [
    "NO_PARAMETERS",
    "PROVIDER_FORMATS",
    "FormatError",
    "FormatName",
    "HistoryChange",
    "ParsedResponse",
    "StreamAdapter",
    "StreamResult",
    "TextCalls",
    "ToolCallAssembler",
    "ToolOutcomeLike",
    "ToolSpec",
    "TurnPart",
    "UnsupportedSchema",
    "anthropic",
    "assemble",
    "assistant_messages",
    "bedrock",
    "detect_format",
    "detect_stream_format",
    "gemini",
    "ollama",
    "openai_chat",
    "openai_responses",
    "parse",
    "parse_text_calls",
    "provider_format",
    "repair_history",
    "stream_adapter",
]
