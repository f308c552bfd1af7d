"""Parsing provider responses: every fixture, checked against the provider's SDK type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic.types
import botocore.session
import google.genai.types as genai
import ollama
import openai.types.chat
import openai.types.responses
import pytest
from botocore.model import Shape
from botocore.parsers import create_parser
from botocore.validate import ParamValidator

from toolbridge.formats import anthropic as anthropic_format
from toolbridge.formats import bedrock, gemini, openai_chat, openai_responses
from toolbridge.formats import ollama as ollama_format
from toolbridge.formats.call_ids import generated_call_id
from toolbridge.formats.detect import detect_format
from toolbridge.formats.types import FormatError

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_cases() -> list[Any]:
    """One case per JSON file in fixtures/<provider>/."""
    cases = []
    for path in sorted(FIXTURES.glob("*/*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        cases.append(pytest.param(path.parent.name, case, id=f"{path.parent.name}/{path.stem}"))
    return cases


MODULES: dict[str, Any] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic_format,
    "gemini": gemini,
    "ollama": ollama_format,
    "bedrock": bedrock,
}
_BEDROCK = botocore.session.get_session().get_service_model("bedrock-runtime")
_CONVERSE = _BEDROCK.operation_model("Converse").output_shape


def _enum_errors(value: Any, shape: Shape, where: str) -> list[str]:
    """Values outside an enum of botocore's model (its validator checks types only)."""
    if shape.type_name == "structure" and isinstance(value, dict):
        members = shape.members  # type: ignore[attr-defined]
        return [
            error
            for key, item in value.items()
            if key in members
            for error in _enum_errors(item, members[key], f"{where}.{key}")
        ]
    if shape.type_name == "list" and isinstance(value, list):
        member = shape.member  # type: ignore[attr-defined]
        return [e for i, v in enumerate(value) for e in _enum_errors(v, member, f"{where}[{i}]")]
    allowed = getattr(shape, "enum", None)  # string shapes only
    if allowed and value not in allowed:
        return [f"{where}: {value!r} is not one of {allowed}"]
    return []


def bedrock_converse(payload: dict[str, Any]) -> dict[str, Any]:
    """A Converse response checked against botocore's own service model, as boto3 checks
    a request (types, required and unknown members) plus its enums, then read by botocore's
    parser into what ``client.converse()`` returns."""
    report = ParamValidator().validate(payload, _CONVERSE)
    errors = [report.generate_report()] if report.has_errors() else []
    errors += _enum_errors(payload, _CONVERSE, "response")
    if errors:
        raise ValueError("not a Converse response: " + "; ".join(errors))
    body = {"body": json.dumps(payload).encode(), "headers": {}, "status_code": 200}
    parsed: dict[str, Any] = create_parser(_BEDROCK.metadata["protocol"]).parse(body, _CONVERSE)
    parsed.pop("ResponseMetadata")
    return parsed


SDK_TYPES: dict[str, Any] = {
    "openai_chat": openai.types.chat.ChatCompletion.model_validate,
    "openai_responses": openai.types.responses.Response.model_validate,
    "anthropic": anthropic.types.Message.model_validate,
    "gemini": lambda data: genai.GenerateContentResponse.model_validate_json(json.dumps(data)),
    "ollama": ollama.ChatResponse.model_validate,
    "bedrock": bedrock_converse,
}


@pytest.mark.parametrize(("provider", "case"), fixture_cases())
def test_fixture_parses_as_expected(provider: str, case: dict[str, Any]) -> None:
    parsed = MODULES[provider].parse_response(case["payload"])
    expect = case["expect"]
    assert parsed.text == expect["text"]
    assert parsed.finish_reason == expect["finish_reason"]
    assert parsed.truncated is expect["truncated"]
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        (c["name"], c["arguments"]) for c in expect["calls"]
    ]
    for position, (call, wanted) in enumerate(zip(parsed.calls, expect["calls"], strict=True)):
        if wanted["id"] is None:  # generated: the same id the streaming assembler gives
            assert call.id == generated_call_id(position, call.name, call.arguments)
            assert call.extra["generated_id"] is True
        else:
            assert call.id == wanted["id"]
        for key, value in wanted.get("extra", {}).items():
            assert call.extra[key] == value
    assert detect_format(case["payload"]) == provider


@pytest.mark.parametrize(("provider", "case"), fixture_cases())
def test_fixture_matches_the_provider_sdk_type(provider: str, case: dict[str, Any]) -> None:
    validate = SDK_TYPES[provider]
    payload = case["payload"]
    if not case["sdk_valid"]:
        # A compatible server's deviation: the SDK refuses the payload as it is, and takes
        # it once the one member the fixture names is mended, so the rest is checked too.
        with pytest.raises(ValueError):
            validate(payload)
        mend = case["sdk_valid_with"]
        payload = json.loads(json.dumps(payload))
        *path, last = mend["at"]
        holder = payload
        for step in path:
            holder = holder[step]
        holder[last] = mend["value"]
    model = validate(payload)
    reparsed = MODULES[provider].parse_response(model)  # an SDK object parses the same way
    assert reparsed.calls == MODULES[provider].parse_response(payload).calls


def test_parsing_is_stable_and_ids_are_unique() -> None:
    payload = {
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "t", "arguments": {}}}] * 3,
        },
        "done": True,
    }
    first = ollama_format.parse_response(payload)
    again = ollama_format.parse_response(json.dumps(payload))
    assert [c.id for c in first.calls] == [c.id for c in again.calls]
    assert len({c.id for c in first.calls}) == 3
    salted = ollama_format.parse_response(payload, id_salt="turn-2")
    assert {c.id for c in salted.calls}.isdisjoint(c.id for c in first.calls)


def test_arguments_are_never_repaired() -> None:
    broken = '{"a": 1}{"a": 2}'
    call = {"id": "c", "type": "function", "function": {"name": "t", "arguments": broken}}
    payload = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [call],
                },
            }
        ]
    }
    assert openai_chat.parse_response(payload).calls[0].arguments == broken


@pytest.mark.parametrize(
    ("provider", "payload", "message"),
    [
        ("openai_chat", {"choices": []}, "non-empty"),
        ("openai_responses", {"output": {}}, "response.output must be an array, got an object"),
        ("anthropic", {"content": "text"}, "message.content must be an array, got a string"),
        ("gemini", {"candidates": [{}], "x": 1}, None),
        ("bedrock", {"output": {}}, "output.message.content"),
        ("ollama", {"done": True}, '"message" object'),
    ],
)
def test_malformed_payloads_say_what_is_wrong(
    provider: str, payload: dict[str, Any], message: str | None
) -> None:
    if message is None:  # a candidate without content: no text, no calls, no crash
        assert MODULES[provider].parse_response(payload).calls == ()
        return
    with pytest.raises(FormatError, match=message):
        MODULES[provider].parse_response(payload)


def test_invalid_json_text_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="not valid JSON"):
        anthropic_format.parse_response('{"content": [')


def test_detect_format_refuses_unknown_payloads() -> None:
    with pytest.raises(FormatError, match="top-level keys: foo"):
        detect_format({"foo": 1})
