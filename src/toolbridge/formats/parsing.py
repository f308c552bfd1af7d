"""`parse`: one entry point for any provider output, whole or streamed.

A whole response (JSON text, a dict, an SDK object) goes to its provider's
`parse_response`; a list of stream events goes through its provider's stream adapter.
Both come back as the same `ParsedResponse`, parts and opaque items included, so the
code after it (run the calls, render the turn with `assistant_messages`) does not
care which one the model sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType, ModuleType
from typing import Any

from toolbridge.formats import (
    anthropic,
    bedrock,
    gemini,
    ollama,
    openai_chat,
    openai_responses,
)
from toolbridge.formats.assembler import stream_event
from toolbridge.formats.detect import detect_format
from toolbridge.formats.streaming import STREAM_FORMATS, stream_adapter
from toolbridge.formats.types import (
    FormatError,
    FormatName,
    ParsedResponse,
    ToolSource,
)
from toolbridge.formats.wire import load_json

__all__ = [
    "PROVIDER_FORMATS",
    "assistant_messages",
    "detect_stream_format",
    "parse",
    "provider_format",
]

PROVIDER_FORMATS: Mapping[str, ModuleType] = MappingProxyType(
    {
        "openai_chat": openai_chat,
        "openai_responses": openai_responses,
        "anthropic": anthropic,
        "gemini": gemini,
        "ollama": ollama,
        "bedrock": bedrock,
    }
)
"""Every provider module by format name: each has ``definitions``, ``parse_definitions``,
``parse_response``, ``assistant_messages``, ``result_messages`` and a stream adapter."""

_OPENAI = ("openai_chat", "openai_responses")
_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)
_BEDROCK_EVENTS = frozenset(
    {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop"}
)


def parse(
    payload: Any,
    format: str | None = None,
    *,
    tools: ToolSource | None = None,
    strict: bool | None = False,
    id_salt: str = "",
) -> ParsedResponse:
    """A provider's output as a `ParsedResponse`, whole response or list of stream events.

    `format` is a name of `PROVIDER_FORMATS`; None detects it (`detect_format` for a
    response, `detect_stream_format` for events). `tools` and `strict` are the ones
    the definitions were sent with: for the OpenAI formats they undo strict mode's
    forced nulls (see `openai_chat.restore_strict_arguments`); other formats ignore
    them. Events may be dicts, SDK objects or JSON text; OpenAI's ``"[DONE]"`` ends
    a stream. Raises only `FormatError`.
    """
    if format is not None:
        provider_format(format)  # an unknown name fails before the payload is read
    if isinstance(payload, str | bytes | bytearray):
        payload = load_json(payload, "the provider output")  # an array is a stream
    if _is_event_list(payload):
        events = list(payload)
        name = format or detect_stream_format(events)
        adapter = stream_adapter(name, id_salt=id_salt)
        for event in events:
            adapter.feed(event)
        parsed = adapter.result().parsed(raw=events)
        if tools is not None and name in _OPENAI:
            calls = openai_chat.restore_strict_arguments(parsed.calls, tools, strict=strict)
            parsed = dataclasses.replace(parsed, calls=calls)
        return parsed
    name = format or detect_format(payload)
    module = provider_format(name)
    if name in _OPENAI:
        parsed_response: ParsedResponse = module.parse_response(
            payload, tools=tools, strict=strict, id_salt=id_salt
        )
        return parsed_response
    whole: ParsedResponse = module.parse_response(payload, id_salt=id_salt)
    return whole


def assistant_messages(parsed: ParsedResponse, format: str) -> list[dict[str, Any]]:
    """The assistant turn of `parsed` in `format`'s request shape: text, calls and every
    opaque item the provider needs back (thought signatures, thinking blocks,
    reasoning items), ready to append to the conversation before the results."""
    rendered: list[dict[str, Any]] = provider_format(format).assistant_messages(parsed)
    return rendered


def detect_stream_format(events: Iterable[Any]) -> FormatName:
    """The provider format of a list of stream events, from the first event that tells."""
    for event in events:
        data = stream_event(event)
        if data is None:
            continue
        found = _event_format(data)
        if found is not None:
            return found
    raise FormatError(
        "cannot tell which provider these stream events are from; pass format= (one of "
        + ", ".join(STREAM_FORMATS)
        + ")"
    )


def _event_format(data: Mapping[str, Any]) -> FormatName | None:
    kind = data.get("type")
    if isinstance(data.get("choices"), list):
        return "openai_chat"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai_responses"
    if kind in _ANTHROPIC_EVENTS:
        return "anthropic"
    if isinstance(data.get("candidates"), list):
        return "gemini"
    if isinstance(data.get("message"), Mapping) and "done" in data:
        return "ollama"
    if any(key in data for key in _BEDROCK_EVENTS):
        return "bedrock"
    return None


def _is_event_list(payload: Any) -> bool:
    return isinstance(payload, list | tuple)


def provider_format(name: str) -> ModuleType:
    """The module of the provider format `name`; a clear error for an unknown one."""
    module = PROVIDER_FORMATS.get(name)
    if module is None:
        known = ", ".join(PROVIDER_FORMATS)
        raise FormatError(f"unknown provider format {name!r}; known formats: {known}")
    return module
