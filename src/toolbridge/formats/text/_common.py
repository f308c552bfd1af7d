"""What every raw-text dialect shares: the result type, a string-aware JSON scanner,
and the collector that gives calls their stable ids and records what could not be read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolbridge.calls import ArgumentsDecodeError, ToolCallRequest, decode_arguments
from toolbridge.formats.call_ids import generated_call_id

__all__ = ["CallCollector", "TextCalls", "arguments_until", "scan_json", "skip_space"]

_SCANNER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class TextCalls:
    """Tool calls found in generated text, and what is left once they are cut out.

    `problems` names every call-shaped piece that could not be read as a call, and why;
    that piece stays in `text`. `reasoning` holds a model's separate thinking channel
    (gpt-oss ``analysis``) when the dialect has one.
    """

    calls: tuple[ToolCallRequest, ...]
    text: str
    problems: tuple[str, ...] = ()
    reasoning: str = ""


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def scan_json(text: str, pos: int) -> tuple[str, int] | None:
    """The exact text of the JSON value starting at `pos` (after spaces) and its end.

    The scan is string-aware, so an end tag inside a JSON string does not end the value.
    None when no complete JSON value starts there.
    """
    start = skip_space(text, pos)
    try:
        _, end = _SCANNER.raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError):
        return None
    return text[start:end], end


def arguments_until(text: str, pos: int, terminators: tuple[str, ...]) -> tuple[str, int]:
    """Argument text starting at `pos` and the position just after it.

    A complete JSON value is taken whole, so a terminator inside one of its strings does
    not cut it. Anything else (broken or cut-off JSON, or values run together like
    ``{..}{..}``) is returned raw, up to the first terminator, so that the registry
    reports it to the model instead of one part being run.
    """
    found = scan_json(text, pos)
    if found is not None:
        after = skip_space(text, found[1])
        if text.startswith(terminators, after) or not text.startswith(("{", "["), after):
            return found
    ends = [index for marker in terminators if (index := text.find(marker, pos)) != -1]
    end = min(ends, default=len(text))
    return text[pos:end].strip(), end


class CallCollector:
    """Collects one response's calls in order, giving id-less calls stable ids."""

    def __init__(self, id_salt: str = "", *, alphanumeric9_ids: bool = False) -> None:
        self._salt = id_salt
        self._alphanumeric9 = alphanumeric9_ids
        self.calls: list[ToolCallRequest] = []
        self.problems: list[str] = []

    def add(
        self,
        name: str,
        arguments: Any,
        call_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        *,
        id_basis: str | None = None,
    ) -> None:
        """Add a call; `arguments` stays raw (text or value) for the registry to judge.

        A generated id hashes `id_basis` (the call's own text, cheaper than re-encoding
        decoded arguments) or else the arguments, and is flagged with
        ``extra["generated_id"] = True``.
        """
        extra = dict(extra or {})
        if not call_id:
            extra["generated_id"] = True
            call_id = generated_call_id(
                len(self.calls),
                name,
                arguments if id_basis is None else id_basis,
                salt=self._salt,
                alphanumeric9=self._alphanumeric9,
            )
        self.calls.append(ToolCallRequest(call_id, name, arguments, extra))

    def add_object(self, json_text: str, where: str) -> bool:
        """Add a call written as ``{"name": …, "arguments"|"parameters": …}``.

        Returns False (and records a problem) when the text is not such an object.
        """
        try:
            value = decode_arguments(json_text)
        except ArgumentsDecodeError as exc:
            self.problem(f"{where}: the call's JSON is not valid: {exc}")
            return False
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            self.problem(f'{where}: expected an object with a string "name", got {json_text[:80]}')
            return False
        if "arguments" in value and "parameters" in value:
            self.problem(f'{where}: the call has both "arguments" and "parameters"; send one')
            return False
        arguments = value.get("arguments", value.get("parameters"))
        call_id = value.get("id") if isinstance(value.get("id"), str) else None
        self.add(value["name"], {} if arguments is None else arguments, call_id, id_basis=json_text)
        return True

    def problem(self, message: str) -> None:
        self.problems.append(message)

    def result(self, text: str, reasoning: str = "") -> TextCalls:
        return TextCalls(tuple(self.calls), text.strip(), tuple(self.problems), reasoning)
