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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import thaw
from toolbridge.core.tool import ImageBlock, JsonBlock
from toolbridge.formats.assembler import StreamAdapter
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.repair import MISSING_RESULT, HistoryShape, Messages, repair
from toolbridge.formats.schemas import (
    UnsupportedSchema,
    gemini_parameters,
    json_schema_from_gemini,
    takes_no_arguments,
)
from toolbridge.formats.types import (
    NO_PARAMETERS,
    FormatError,
    HistoryChange,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    ToolSpec,
    TurnPart,
    argument_object,
    result_parts,
    tool_specs,
    turn_parts,
)
from toolbridge.formats.wire import (
    as_payload,
    definition_items,
    opt_bool,
    opt_id,
    opt_list,
    opt_obj,
    opt_str,
    req_obj,
)

__all__ = [
    "HISTORY",
    "GeminiStream",
    "assistant_messages",
    "definitions",
    "parse_definitions",
    "parse_response",
    "repair_history",
    "result_blocks",
    "result_messages",
]

logger = logging.getLogger(__name__)

TRUNCATION_REASONS = frozenset({"MAX_TOKENS"})
_T = TypeVar("_T")


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
    if takes_no_arguments(spec.parameters):
        return declaration  # Gemini answers an empty OBJECT schema with a 400
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
    """Read a ``tools`` array back; ``parameters`` become JSON Schema again, and a
    declaration without either key is a tool with `NO_PARAMETERS`. Raises only
    `FormatError`."""
    specs = []
    for index, tool in enumerate(definition_items(tools)):
        where = f"tools[{index}]"
        declarations = opt_list(tool, "functionDeclarations", where) or []
        for number, declaration in enumerate(declarations):
            at = f"{where}.functionDeclarations[{number}]"
            req_obj(declaration, at)
            name = opt_str(declaration, "name", at)
            if not name:
                raise FormatError(f"{at} has no name")
            as_json = opt_obj(declaration, "parametersJsonSchema", at)
            as_gemini = opt_obj(declaration, "parameters", at)
            if as_json is not None:
                parameters: Mapping[str, Any] = as_json
            elif as_gemini is not None:
                parameters = json_schema_from_gemini(as_gemini)
            else:
                parameters = NO_PARAMETERS
            description = opt_str(declaration, "description", at) or ""
            specs.append(ToolSpec(name, description, parameters))
    return specs


def parse_response(payload: Any, *, candidate: int = 0, id_salt: str = "") -> ParsedResponse:
    """A ``generateContent`` response -> text (thoughts left out) and function calls.

    Thought parts and text parts' thought signatures are kept in
    `ParsedResponse.parts`, to be sent back as they came. Raises only `FormatError`
    for a payload of the wrong shape.
    """
    data = as_payload(payload, "Gemini")
    candidates = opt_list(data, "candidates", "response")
    if not candidates:
        feedback = opt_obj(data, "promptFeedback", "response")
        reason = opt_str(feedback, "blockReason", "promptFeedback") if feedback else None
        if reason is not None:
            return ParsedResponse("", (), reason, False, data, parts=())
        raise FormatError('a Gemini response needs a "candidates" list')
    if not 0 <= candidate < len(candidates):
        raise FormatError(f"the response has no candidate {candidate}")
    where = f"candidates[{candidate}]"
    chosen = req_obj(candidates[candidate], where)
    content = opt_obj(chosen, "content", where)
    raw_parts = (opt_list(content, "parts", f"{where}.content") if content else None) or []
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    parts: list[TurnPart] = []
    for index, part in enumerate(raw_parts):
        at = f"{where}.content.parts[{index}]"
        req_obj(part, at)
        text = opt_str(part, "text", at)
        call = opt_obj(part, "functionCall", at)
        signature = opt_str(part, "thoughtSignature", at)
        if call is not None:
            parts.append(TurnPart("call", len(calls)))
            calls.append(_call(call, signature, len(calls), id_salt, f"{at}.functionCall"))
        elif text is not None and not opt_bool(part, "thought", at):
            texts.append(text)
            extra = {"thoughtSignature": signature} if signature else {}
            parts.append(TurnPart("text", text, extra))
        else:
            parts.append(TurnPart("opaque", part))
    finish = opt_str(chosen, "finishReason", where)
    message = opt_str(chosen, "finishMessage", where)
    if finish == "MALFORMED_FUNCTION_CALL" and not texts and message:
        texts.append(message)
    return ParsedResponse(
        text="".join(texts),
        calls=tuple(calls),
        finish_reason=finish,
        truncated=finish in TRUNCATION_REASONS,
        raw=data,
        parts=tuple(parts),
    )


def _call(
    call: Mapping[str, Any], signature: str | None, position: int, salt: str, where: str
) -> ToolCallRequest:
    extra = {"thought_signature": signature} if signature else None
    name = opt_str(call, "name", where) or ""
    call_id = opt_id(call, "id", where)
    return tool_call(call_id, name, call.get("args"), position, extra, salt=salt)


def assistant_messages(parsed: ParsedResponse) -> list[dict[str, Any]]:
    """The turn as one ``role: model`` content: thought parts as received, text parts
    with their signatures, ``functionCall`` parts with theirs (generated ids left out)."""
    parts: list[dict[str, Any]] = []
    for part in turn_parts(parsed):
        if part.kind == "opaque":
            parts.append(thaw(part.value))
        elif part.kind == "text":
            parts.append({"text": part.value, **thaw(part.extra)})
        else:
            parts.append(_wire_call(parsed.calls[part.value]))
    return [{"role": "model", "parts": parts}]


def _wire_call(call: ToolCallRequest) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name}
    if call.arguments is not None:  # a call that came without args is replayed without
        function["args"] = argument_object(call)
    if not call.extra.get("generated_id"):
        function = {"id": call.id, **function}
    part: dict[str, Any] = {"functionCall": function}
    if isinstance(call.extra.get("thought_signature"), str):
        part["thoughtSignature"] = call.extra["thought_signature"]
    return part


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One user message of ``functionResponse`` parts (none: empty).

    ``response`` is always an object: ``{"output": ...}`` on success and
    ``{"error": ...}`` on failure, as Gemini's documentation asks; a single JSON
    result is sent as its value, images as ``inlineData`` parts of the response.
    """
    parts = result_blocks(outcomes)
    return [{"role": "user", "parts": parts}] if parts else []


def result_blocks(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """The ``functionResponse`` parts, in call order, for callers building their own
    content (the name every provider module uses for "results without the message")."""
    return [{"functionResponse": _function_response(o)} for o in outcomes]


# The image types Gemini reads (no GIF): others are named in the text instead of
# failing the whole request.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})


def _function_response(outcome: ToolOutcomeLike) -> dict[str, Any]:
    call, result = outcome.call, outcome.result
    content = result.content
    parts = result_parts(result)
    images = [p for p in parts if isinstance(p, ImageBlock) and p.media_type in _IMAGE_TYPES]
    value: Any
    if not isinstance(content, str) and len(content) == 1 and isinstance(content[0], JsonBlock):
        value = content[0].value
    else:
        texts = [
            p.text
            if not isinstance(p, ImageBlock)
            else f"[an image of type {p.media_type}, which Gemini does not take, was left out]"
            for p in parts
            if not (isinstance(p, ImageBlock) and p.media_type in _IMAGE_TYPES)
        ]
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


class GeminiStream(StreamAdapter):
    """Gemini ``streamGenerateContent`` chunks: each ``functionCall`` part arrives whole.

    A part's thought signature is kept in ``extra["thought_signature"]``; it must be
    sent back with the call. Thought parts and signed text parts are kept in the
    turn's parts, as the whole-response parser keeps them. Gemini says ``STOP``
    whether or not it called tools. The google-genai SDK's snake_case dicts are read
    too.
    """

    TRUNCATION_REASONS = TRUNCATION_REASONS

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        finished: list[ToolCallRequest] = []
        candidates = opt_list(data, "candidates", "chunk") or ()
        for candidate in candidates[:1]:
            where = "chunk.candidates[0]"
            req_obj(candidate, where)
            content = opt_obj(candidate, "content", where) or {}
            for index, part in enumerate(opt_list(content, "parts", f"{where}.content") or ()):
                at = f"{where}.content.parts[{index}]"
                finished.extend(self._part(req_obj(part, at), at))
            reason = _either(candidate, "finishReason", "finish_reason", where, opt_str)
            if reason:
                self.finish_reason = reason
                finished.extend(self.finish_all())
        return finished

    def _part(self, part: Mapping[str, Any], where: str) -> list[ToolCallRequest]:
        call = _either(part, "functionCall", "function_call", where, opt_obj)
        signature = _either(part, "thoughtSignature", "thought_signature", where, opt_str)
        text = opt_str(part, "text", where)
        if call is not None:
            at = f"{where}.functionCall"
            arguments = call.get("args")
            return [
                self.add_whole_call(
                    call_id=opt_id(call, "id", at),
                    name=opt_str(call, "name", at) or "",
                    arguments={} if arguments is None else arguments,
                    extra={"thought_signature": signature} if signature else {},
                )
            ]
        if text is not None and not opt_bool(part, "thought", where):
            if text or signature:
                self.add_text(text, {"thoughtSignature": signature} if signature else None)
        elif text is not None or signature:
            self.add_opaque(thaw(part))
        return []


def _either(
    data: Mapping[str, Any],
    camel: str,
    snake: str,
    where: str,
    read: Callable[[Mapping[str, Any], str, str], _T | None],
) -> _T | None:
    """REST JSON uses camelCase, the google-genai SDK's dicts use snake_case."""
    value = read(data, camel, where)
    return value if value is not None else read(data, snake, where)


# --- history -------------------------------------------------------------------------


def _gemini_result(call_id: Any, name: str) -> dict[str, Any]:
    response = {"name": name, "response": {"error": MISSING_RESULT}}
    return {
        "functionResponse": {"id": call_id, **response} if isinstance(call_id, str) else response
    }


HISTORY = HistoryShape(
    _gemini_result,
    "functionCall",
    "functionResponse",
    result_id="id",
    result_name="name",
    arguments="args",
    content="parts",
    assistant="model",
    ids=False,
)
"""Where this format keeps calls and results in a stored history: ``functionCall`` parts in
``model`` contents, ``functionResponse`` parts after them, answering by name in order
where there are no ids."""


def repair_history(messages: Sequence[Mapping[str, Any]]) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of a stored history in this format, and what was changed (see
    `toolbridge.formats.repair`). Raises only `FormatError`."""
    return repair(messages, HISTORY)
