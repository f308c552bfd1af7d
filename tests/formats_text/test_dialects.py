"""Dialect names as users know them, what is refused, and the one name check (issue 15)."""

from __future__ import annotations

import json

import pytest

from toolbridge.formats.text import (
    DIALECTS,
    UnknownDialect,
    detect_dialect,
    known_names,
    parse_text_calls,
    resolve_dialect,
)

# vLLM's --tool-call-parser names for the families toolbridge reads, and family names.
NAMES = {
    "hermes": "hermes",
    "qwen3": "hermes",
    "Qwen2.5": "hermes",
    "qwen3_coder": "qwen3_coder",
    "qwen3_xml": "qwen3_coder",
    "llama3_json": "llama3_json",
    "llama3.1": "llama3_json",
    "llama4_json": "llama3_json",
    "llama4": "pythonic",
    "llama4_pythonic": "pythonic",
    "pythonic": "pythonic",
    "mistral": "mistral",
    "magistral": "mistral",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v3",
    "DeepSeek-V3.1": "deepseek_v3",
    "deepseek_r1": "deepseek_v3",
    "kimi_k2": "kimi_k2",
    "openai": "harmony",
    "gpt-oss": "harmony",
    "harmony": "harmony",
    "functiongemma": "functiongemma",
}


@pytest.mark.parametrize(("name", "dialect"), NAMES.items())
def test_family_and_vllm_names_resolve(name: str, dialect: str) -> None:
    assert resolve_dialect(name).name == dialect
    assert parse_text_calls("hi", name).dialect == dialect


def test_every_dialect_is_a_known_name() -> None:
    assert set(DIALECTS) <= set(known_names())


def test_unknown_name_lists_every_known_one() -> None:
    with pytest.raises(UnknownDialect) as caught:
        parse_text_calls("x", "llama9")
    message = str(caught.value)
    assert "unknown dialect 'llama9'" in message
    assert all(name in message for name in known_names())
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["bedrock_converse", "Bedrock", "anthropic", "openai_chat"])
def test_a_provider_api_name_points_to_its_format_module(name: str) -> None:
    with pytest.raises(UnknownDialect, match=r"not a raw-text dialect.*toolbridge\.formats\."):
        parse_text_calls('{"output": {}}', name)


def test_text_that_is_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="expected the model's text as a str"):
        parse_text_calls(b"<tool_call>", "hermes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "dialect"),
    [
        ("<start_function_call>call:f{}<end_function_call>", "functiongemma"),
        ('<function=f>{"a": 1}</function>', "llama3_json"),
        ("<|python_tag|>print(1)", "llama3_json"),
        ("<tool_call><function=f></function></tool_call>", "qwen3_coder"),
        ("Done.</tool_call>", "hermes"),
    ],
)
def test_new_markers_are_detected(text: str, dialect: str) -> None:
    assert detect_dialect(text) == dialect


def test_auto_splits_reasoning_before_detecting() -> None:
    parsed = parse_text_calls(
        "<think>maybe [TOOL_CALLS]x[ARGS]{}</think>"
        "<start_function_call>call:ls{path:<escape>.<escape>}<end_function_call>"
    )
    assert parsed.dialect == "functiongemma"
    assert [(c.name, c.arguments) for c in parsed.calls] == [("ls", {"path": "."})]
    assert parsed.reasoning == "maybe [TOOL_CALLS]x[ARGS]{}"


# Issue 15: inputs that used to come back as calls with a broken name. Each is now a
# problem, through the one check every dialect's calls pass.
BROKEN_NAMES = [
    ("qwen3_coder", "<tool_call>\n<function=<function=a>\n</function>\n</tool_call>"),
    ("hermes", '<tool_call>{"name": "{\\"name\\":", "arguments": {}}</tool_call>'),
    ("hermes", '<tool_call>{"name": "", "arguments": {}}</tool_call>'),
    ("llama3_json", '{"name": "<function=a", "parameters": {}}'),
    ("llama3_json", "<function=>{}</function>"),
    ("harmony", "<|channel|>commentary to=functions. <|message|>{}<|call|>"),
    ("harmony", "<|channel|>commentary to=browser.search<|message|>{}<|call|>"),
    ("kimi_k2", "<|tool_call_begin|>functions.:0<|tool_call_argument_begin|>{}<|tool_call_end|>"),
    ("deepseek_v3", '<｜tool▁call▁begin｜>{"name":<｜tool▁sep｜>{}<｜tool▁call▁end｜>'),
    ("mistral", "[TOOL_CALLS]a b[ARGS]{}"),
    ("mistral", '[TOOL_CALLS][{"name": "functions.", "arguments": {}}]'),
    ("pythonic", "[functions.get(a=1)]"),
    ("functiongemma", "<start_function_call>call:{}<end_function_call>"),
]


@pytest.mark.parametrize(("dialect", "text"), BROKEN_NAMES)
def test_a_call_with_a_broken_name_is_a_problem_not_a_call(dialect: str, text: str) -> None:
    parsed = parse_text_calls(text, dialect)
    assert parsed.calls == ()
    assert len(parsed.problems) == 1
    assert "is not a tool name" in parsed.problems[0]


def test_python_tag_other_code_is_a_code_interpreter_call() -> None:
    (call,) = parse_text_calls("<|python_tag|>search.call(q='x')", "llama3.1").calls
    assert (call.name, call.arguments) == ("code_interpreter", {"code": "search.call(q='x')"})


def test_python_tag_builtin_with_code_in_its_arguments_is_a_problem() -> None:
    parsed = parse_text_calls("<|python_tag|>brave_search.call(query=input())", "llama3_json")
    assert parsed.calls == ()
    assert "not a literal" in parsed.problems[0]


def test_python_tag_json_that_is_not_a_call_is_a_problem() -> None:
    parsed = parse_text_calls('<|python_tag|>{"answer": 42}', "llama3_json")
    assert parsed.calls == ()
    assert 'expected a call {"name"' in parsed.problems[0]


def test_cut_off_function_tag_reaches_the_registry_raw() -> None:
    (call,) = parse_text_calls('<function=write>{"path": "a', "llama3_json").calls
    assert (call.name, call.arguments) == ("write", '{"path": "a')


def test_harmony_text_before_a_message_header_stays_text() -> None:
    parsed = parse_text_calls(
        "Hello <|start|>assistant<|channel|>final<|message|>Hi<|return|>", "harmony"
    )
    assert parsed.text == "Hello Hi"


def test_an_end_token_inside_a_json_string_belongs_to_the_call() -> None:
    # Found by the property test: the python-tag body used to end at the first
    # <|eom_id|>, even inside a JSON string, and the call was reported as cut off.
    text = '<|python_tag|>{"name": "f", "parameters": {"<|eom_id|>": "x"}}<|eom_id|>'
    parsed = parse_text_calls(text, "llama3_json")
    assert parsed.problems == ()
    assert [(call.name, call.arguments) for call in parsed.calls] == [("f", {"<|eom_id|>": "x"})]


@pytest.mark.parametrize(
    ("dialect", "text"),
    [
        ("auto", '<tool_call>{"name": "x", "arguments": {"</think>": null}}</tool_call>'),
        ("hermes", '<tool_call>{"name": "x", "arguments": {"</think>": null}}</tool_call>'),
        ("qwen3", '<tool_call>{"name": "x", "arguments": {"</think>": null}}</tool_call>'),
        ("mistral", '[TOOL_CALLS]x[ARGS]{"</think>": null}'),
    ],
)
def test_a_closing_think_tag_inside_a_call_is_an_argument_not_the_end_of_reasoning(
    dialect: str, text: str
) -> None:
    # Found by the property test: a call whose arguments hold "</think>" was cut there, as
    # if the reply had been reasoning (opening tag in the prompt) up to that point.
    parsed = parse_text_calls(text, dialect)
    (call,) = parsed.calls
    arguments = json.loads(call.arguments) if isinstance(call.arguments, str) else call.arguments
    assert (call.name, arguments) == ("x", {"</think>": None})
    assert parsed.problems == () and parsed.reasoning == ""


def test_reasoning_that_mentions_a_call_tag_still_ends_at_its_closing_tag() -> None:
    text = 'I will use <tool_call> soon.</think>\n<tool_call>{"name": "x", "arguments": {}}'
    text += "</tool_call>"
    parsed = parse_text_calls(text, "qwen3")
    assert [(call.name, call.arguments) for call in parsed.calls] == [("x", {})]
    assert parsed.reasoning == "I will use <tool_call> soon."


def test_a_call_written_inside_reasoning_is_still_never_read() -> None:
    text = 'Maybe <tool_call>{"name": "rm", "arguments": {}}</tool_call>? No.</think>\nDone.'
    parsed = parse_text_calls(text, "qwen3")
    assert parsed.calls == () and parsed.text == "Done."
