"""Properties: whatever the arguments hold (end tags and markers included), each dialect
gives back exactly the arguments that were written."""

from __future__ import annotations

import json
import keyword
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.formats.text import parse_text_calls

MARKERS = [
    "</tool_call>",
    "<tool_call>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|call|>",
    "<|end|>",
    "<|tool_call_end|>",
    "<｜tool▁call▁end｜>",
    "```",
    "}",
    '"',
    "\\",
]
strings = (
    st.text(max_size=12)
    | st.sampled_from(MARKERS)
    | st.lists(st.sampled_from(MARKERS), max_size=3).map("".join)
)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(strings, children, max_size=3)
    ),
    max_leaves=10,
)
arguments = st.dictionaries(strings, values, max_size=4)

WRITERS: dict[str, Callable[[str], str]] = {
    "hermes": lambda a: f'Text.\n<tool_call>\n{{"name": "f", "arguments": {a}}}\n</tool_call>',
    "llama3_json": lambda a: f'<|python_tag|>{{"name": "f", "parameters": {a}}}',
    "mistral": lambda a: f"[TOOL_CALLS]f[ARGS]{a}",
    "deepseek_v3": lambda a: (
        f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{a}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    ),
    "kimi_k2": lambda a: (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        f"<|tool_call_argument_begin|>{a}<|tool_call_end|><|tool_calls_section_end|>"
    ),
    "harmony": lambda a: (
        f"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{a}<|call|>"
    ),
}


def _value(arguments: Any) -> Any:
    return json.loads(arguments) if isinstance(arguments, str) else arguments


@settings(max_examples=120, deadline=None)
@given(arguments=arguments, ensure_ascii=st.booleans())
def test_json_dialects_give_back_exactly_the_written_arguments(
    arguments: dict[str, Any], ensure_ascii: bool
) -> None:
    written = json.dumps(arguments, ensure_ascii=ensure_ascii)
    for dialect, write in WRITERS.items():
        parsed = parse_text_calls(write(written), dialect)
        assert parsed.problems == (), dialect
        (call,) = parsed.calls
        assert call.name == "f", dialect
        assert _value(call.arguments) == arguments, dialect


identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


@settings(max_examples=120, deadline=None)
@given(arguments=st.dictionaries(identifiers, values, max_size=4))
def test_pythonic_calls_give_back_the_written_literals(arguments: dict[str, Any]) -> None:
    written = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    parsed = parse_text_calls(f"[f({written}), g()]", "pythonic")
    assert parsed.problems == ()
    assert [c.name for c in parsed.calls] == ["f", "g"]
    assert parsed.calls[0].arguments == arguments
