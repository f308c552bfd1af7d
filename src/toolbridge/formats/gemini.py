"""Google Gemini (REST shape, camelCase): ``functionDeclarations`` out, ``functionCall``
parts in, ``functionResponse`` parts back.

A schema that fits Gemini's ``parameters`` subset exactly is sent as ``parameters``;
any other goes as ``parametersJsonSchema`` unchanged (see `toolbridge.formats.schemas`),
so no schema is ever loosened to fit. Gemini often sends calls without an id: those
get a generated one (marked ``extra["generated_id"]``) and their responses carry no
id, matching by name and order as Gemini expects. A part's thought signature is kept
in ``extra["thought_signature"]``. A ``MALFORMED_FUNCTION_CALL`` finish comes back
as `ParsedResponse.finish_reason` with its message in `ParsedResponse.text`, so the
caller can ask the model again instead of failing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from toolbridge.calls import ToolCallRequest
from toolbridge.errors import ToolDefinitionError
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.schemas import UnsupportedSchema, gemini_parameters, json_schema_from_gemini
from toolbridge.formats.types import (
    FormatError,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    ToolSpec,
    as_payload,
    result_parts,
    tool_specs,
)
from toolbridge.schema import EMPTY_OBJECT_SCHEMA, thaw
from toolbridge.tool import ImageBlock, JsonBlock

__all__ = ["definitions", "parse_definitions", "parse_response", "result_messages"]

logger = logging.getLogger(__name__)

TRUNCATION_REASONS = frozenset({"MAX_TOKENS"})


def definitions(tools: ToolSource, *, json_schema: bool | None = None) -> list[dict[str, Any]]:
    """The ``tools`` array: one tool holding every function declaration (none: empty).

    ``json_schema=None`` uses ``parameters`` where the schema fits it exactly and
    ``parametersJsonSchema`` elsewhere; ``True`` always sends ``parametersJsonSchema``;
    ``False`` requires ``parameters`` (a `ToolDefinitionError` says why it cannot).
    """
    declarations = [_declaration(spec, json_schema) for spec in tool_specs(tools)]
    return [{"functionDeclarations": declarations}] if declarations else []


def _declaration(spec: ToolSpec, json_schema: bool | None) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": spec.name, "description": spec.description}
    if json_schema is not True:
        try:
            declaration["parameters"] = gemini_parameters(spec.parameters)
            return declaration
        except UnsupportedSchema as exc:
            if json_schema is False:
                raise ToolDefinitionError(
                    f"tool {spec.name!r} has no Gemini parameters form: {exc}; pass "
                    "json_schema=None to send it as parametersJsonSchema"
                ) from None
            logger.debug("tool %r sent as parametersJsonSchema: %s", spec.name, exc)
    declaration["parametersJsonSchema"] = thaw(spec.parameters)
    return declaration


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back; ``parameters`` become JSON Schema again."""
    specs = []
    for index, tool in enumerate(tools):
        for declaration in tool.get("functionDeclarations") or []:
            name = declaration.get("name")
            if not isinstance(name, str):
                raise FormatError(f"tools[{index}] has a function declaration without a name")
            if "parametersJsonSchema" in declaration:
                parameters = declaration["parametersJsonSchema"]
            elif "parameters" in declaration:
                parameters = json_schema_from_gemini(declaration["parameters"])
            else:
                parameters = EMPTY_OBJECT_SCHEMA
            specs.append(ToolSpec(name, declaration.get("description") or "", parameters))
    return specs


def parse_response(payload: Any, *, candidate: int = 0, id_salt: str = "") -> ParsedResponse:
    """A ``generateContent`` response -> text (thoughts left out) and function calls."""
    data = as_payload(payload, "Gemini")
    candidates = data.get("candidates")
    if not candidates:
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict) and "blockReason" in feedback:
            reason = feedback["blockReason"]
            return ParsedResponse("", (), reason, False, data)
        raise FormatError('a Gemini response needs a "candidates" list')
    if not isinstance(candidates, list) or candidate >= len(candidates):
        raise FormatError(f"the response has no candidate {candidate}")
    chosen = candidates[candidate]
    content = chosen.get("content") if isinstance(chosen, dict) else None
    parts = content.get("parts") if isinstance(content, dict) else None
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for index, part in enumerate(parts or []):
        if not isinstance(part, dict):
            raise FormatError(f"parts[{index}] is not an object")
        if isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        call = part.get("functionCall")
        if isinstance(call, dict):
            calls.append(_call(call, part.get("thoughtSignature"), len(calls), id_salt))
    finish = chosen.get("finishReason")
    if finish == "MALFORMED_FUNCTION_CALL" and not texts and chosen.get("finishMessage"):
        texts.append(str(chosen["finishMessage"]))
    return ParsedResponse(
        text="".join(texts),
        calls=tuple(calls),
        finish_reason=finish,
        truncated=finish in TRUNCATION_REASONS,
        raw=data,
    )


def _call(call: Mapping[str, Any], signature: Any, position: int, salt: str) -> ToolCallRequest:
    extra = {"thought_signature": signature} if signature else None
    name, arguments = call.get("name", ""), call.get("args")
    return tool_call(call.get("id"), name, arguments, position, extra, salt=salt)


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One user message of ``functionResponse`` parts (none: empty).

    ``response`` is always an object: ``{"output": ...}`` on success and
    ``{"error": ...}`` on failure, as Gemini's documentation asks; a single JSON
    result is sent as its value, images as ``inlineData`` parts of the response.
    """
    parts = [{"functionResponse": _function_response(o)} for o in outcomes]
    return [{"role": "user", "parts": parts}] if parts else []


def _function_response(outcome: ToolOutcomeLike) -> dict[str, Any]:
    call, result = outcome.call, outcome.result
    content = result.content
    images = [p for p in result_parts(result) if isinstance(p, ImageBlock)]
    value: Any
    if not isinstance(content, str) and len(content) == 1 and isinstance(content[0], JsonBlock):
        value = content[0].value
    else:
        texts = [p.text for p in result_parts(result) if not isinstance(p, ImageBlock)]
        value = "\n".join(texts) or f"({len(images)} image(s) attached)"
    response: dict[str, Any] = {
        "name": call.name,
        "response": {"error" if result.is_error else "output": value},
    }
    if not call.extra.get("generated_id"):
        response = {"id": call.id, **response}
    if images:
        response["parts"] = [
            {"inlineData": {"mimeType": image.media_type, "data": image.base64}} for image in images
        ]
    return response
