"""`detect_format`: which provider a response came from, by the keys each one documents.

Each test looks at keys no other provider uses at the top level of a response, so
the order only matters for hand-made payloads that mix them.
"""

from __future__ import annotations

from typing import Any

from toolbridge.formats.types import FormatError, FormatName
from toolbridge.formats.wire import as_payload

__all__ = ["detect_format"]


def detect_format(payload: Any) -> FormatName:
    """The format name (``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini``,
    ``ollama`` or ``bedrock``) of a response given as JSON text, dict or SDK object.
    Raises only `FormatError`; for stream events see `parsing.detect_stream_format`."""
    data = as_payload(payload, "provider")
    if isinstance(data.get("choices"), list):
        return "openai_chat"
    if data.get("object") == "response" or _is_response_output(data.get("output")):
        return "openai_responses"
    if isinstance(data.get("candidates"), list) or "promptFeedback" in data:
        return "gemini"
    output = data.get("output")
    if isinstance(output, dict) and isinstance(output.get("message"), dict):
        return "bedrock"
    if data.get("type") == "message" and isinstance(data.get("content"), list):
        return "anthropic"
    message = data.get("message")
    if isinstance(message, dict) and ("done" in data or "done_reason" in data):
        return "ollama"
    keys = ", ".join(sorted(data)[:8]) or "none"
    raise FormatError(
        f"cannot tell which provider this response is from (top-level keys: {keys}); "
        "expected an OpenAI chat completion or Responses object, an Anthropic message, a "
        "Gemini generateContent response, an Ollama /api/chat response or a Bedrock "
        "Converse response"
    )


def _is_response_output(output: Any) -> bool:
    return (
        isinstance(output, list)
        and bool(output)
        and all(isinstance(item, dict) and "type" in item for item in output)
    )
