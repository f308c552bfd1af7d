"""Fuzz: every raw-text dialect over arbitrary text and over mutated realistic replies.

Properties, for every input and dialect (and ``auto``):
- the parser never raises;
- the spans tile the input, the text and the reasoning are exactly their spans, there
  is one call span per call, and framing (markup) holds only the dialect's tokens;
- every call has a tool name and arguments that are what the text said: a JSON value
  (the registry refuses any but an object), or raw text found in the call's own span;
- reasoning never yields calls: wrapping a reply in a think block leaves no call.

``TOOLBRIDGE_FUZZ=long`` runs each target with the long budget (see conftest).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.conftest import FUZZ_SETTINGS

from toolbridge.core.registry import TOOL_NAME_PATTERN
from toolbridge.formats.text import DIALECTS, TextCalls, parse_text_calls

FIXTURES = Path(__file__).parent.parent / "formats_text" / "fixtures"
REPLIES = sorted(
    (path.parent.name, path.read_text(encoding="utf-8")) for path in FIXTURES.glob("*/*.txt")
)

MARKERS = [
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<function=f>",
    "</function>",
    "<parameter=a>",
    "</parameter>",
    "<think>",
    "</think>",
    "[THINK]",
    "[/THINK]",
    "<|python_tag|>",
    "<|eom_id|>",
    "<|python_start|>",
    "<|python_end|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "</s>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|call|>",
    "<|end|>",
    " to=functions.",
    "<start_function_call>",
    "<end_function_call>",
    "call:f{",
    "<escape>",
    '{"name": "f", "arguments": {',
    '{"name":',
    "functions.",
    "brave_search.call(",
    "[f(a=1)",
    "```json\n",
    "{",
    "}",
    "[",
    "]",
    '"',
    ";",
    ",",
    ":",
    "\n",
]

# Framing tokens each dialect may put in a markup span (plus whitespace and the
# punctuation of call lists); anything else there would be text the parser hid.
_TOKENS = {
    "hermes": ["<tool_call>", "</tool_call>", "<|im_end|>", "<|endoftext|>"],
    "qwen3_coder": ["<|im_end|>", "<|endoftext|>"],
    "llama3_json": ["<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|end_of_text|>"],
    "pythonic": [
        "<|python_start|>",
        "<|python_end|>",
        "<|eot|>",
        "<|eom|>",
        "<|eot_id|>",
        "<|eom_id|>",
    ],
    "mistral": ["[TOOL_CALLS]", "</s>"],
    "deepseek_v3": [
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜end▁of▁sentence｜>",
    ],
    "kimi_k2": [
        "<|tool_calls_section_begin|>",
        "<|tool_call_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_section_end|>",
        "<|im_end|>",
    ],
    "functiongemma": ["<start_function_response>", "<end_of_turn>", "<eos>"],
}
_REASONING_TAGS = ["<think>", "</think>", "[THINK]", "[/THINK]"]
_PUNCTUATION = re.compile(r"[\s\[\],;]*")

texts = st.lists(st.text(max_size=12) | st.sampled_from(MARKERS), max_size=24).map("".join)
dialects = st.sampled_from(["auto", *DIALECTS])


def check(text: str, dialect: str) -> TextCalls:
    """Parse and assert every property that holds for any input."""
    parsed = parse_text_calls(text, dialect)
    spans = parsed.spans
    assert [s.start for s in spans] == [0, *(s.end for s in spans)][: len(spans)], spans
    assert (spans[-1].end if spans else 0) == len(text)
    assert all(s.start < s.end for s in spans)
    assert parsed.text == "".join(text[s.start : s.end] for s in spans if s.kind == "text")
    assert parsed.reasoning == "".join(
        text[s.start : s.end] for s in spans if s.kind == "reasoning"
    )
    call_spans = [s for s in spans if s.kind == "call"]
    assert len(call_spans) == len(parsed.calls)
    for call, span in zip(parsed.calls, call_spans, strict=True):
        _check_call(call.name, call.arguments, text[span.start : span.end])
    assert len({call.id for call in parsed.calls}) == len(parsed.calls)
    if parsed.dialect in _TOKENS:
        for span in spans:
            if span.kind == "markup":
                _check_markup(text[span.start : span.end], parsed.dialect)
    return parsed


def _check_call(name: str, arguments: Any, source: str) -> None:
    assert isinstance(name, str) and TOOL_NAME_PATTERN.match(name), name
    if isinstance(arguments, str):  # raw text, or a JSON string value inside the call
        written = (json.dumps(arguments)[1:-1], json.dumps(arguments, ensure_ascii=False)[1:-1])
        assert arguments in source or any(w in source for w in written), (arguments, source)
    else:  # a JSON value as written; the registry refuses anything but an object
        json.dumps(arguments, allow_nan=False)
        if name == "code_interpreter" and isinstance(arguments, dict) and name not in source:
            assert arguments["code"] in source
            return
    assert name in source or name == "code_interpreter", (name, source)


def _check_markup(markup: str, dialect: str) -> None:
    for token in (*_TOKENS[dialect], *_REASONING_TAGS):
        markup = markup.replace(token, "")
    if dialect == "pythonic":
        markup = re.sub(r"#[^\r\n]*", "", markup)
    assert _PUNCTUATION.fullmatch(markup), (dialect, markup)


@FUZZ_SETTINGS
@given(text=texts, dialect=dialects)
def test_arbitrary_text_never_raises_and_is_accounted_for(text: str, dialect: str) -> None:
    check(text, dialect)


@st.composite
def mutated_replies(draw: st.DrawFn) -> tuple[str, str]:
    """A realistic reply (a fixture) with a few cuts, copies and inserted markers."""
    dialect, text = draw(st.sampled_from(REPLIES))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        to = draw(st.integers(at, min(len(text), at + 40)))
        operation = draw(st.sampled_from(["cut", "delete", "insert", "copy"]))
        if operation == "cut":
            text = text[:at]
        elif operation == "delete":
            text = text[:at] + text[to:]
        elif operation == "insert":
            text = text[:at] + draw(st.sampled_from(MARKERS) | st.text(max_size=6)) + text[at:]
        else:
            text = text[:to] + text[at:to] + text[to:]
    return dialect, text


@FUZZ_SETTINGS
@given(reply=mutated_replies(), auto=st.booleans())
def test_mutated_replies_never_raise_and_are_accounted_for(
    reply: tuple[str, str], auto: bool
) -> None:
    dialect, text = reply
    check(text, "auto" if auto else dialect)


@FUZZ_SETTINGS
@given(reply=mutated_replies(), closed=st.booleans())
def test_reasoning_never_yields_calls(reply: tuple[str, str], closed: bool) -> None:
    """A whole reply moved into a think block gives no call, cut off or not."""
    _, text = reply
    thinking = text
    while "</think>" in thinking or "[/THINK]" in thinking:  # a removal can make a new one
        thinking = thinking.replace("</think>", "").replace("[/THINK]", "")
    for name in ("hermes", "qwen3_coder", "deepseek_v3", "kimi_k2", "mistral", "auto"):
        wrapped = f"<think>{thinking}</think>The answer." if closed else f"<think>{thinking}"
        parsed = check(wrapped, name)
        assert parsed.calls == ()
        assert parsed.reasoning == thinking
        assert parsed.text == ("The answer." if closed else "")


@FUZZ_SETTINGS
@given(reply=mutated_replies())
def test_a_think_block_in_front_changes_nothing_else(reply: tuple[str, str]) -> None:
    """Splitting the reasoning off first leaves the reply's own reading unchanged."""
    dialect, text = reply
    if dialect not in ("hermes", "qwen3_coder", "deepseek_v3", "kimi_k2"):
        return
    if "<think>" in text or "</think>" in text:
        return
    plain = parse_text_calls(text, dialect)
    thought = check(f"<think>plan</think>{text}", dialect)
    assert thought.reasoning == "plan"
    assert [(c.id, c.name, c.arguments) for c in thought.calls] == [
        (c.id, c.name, c.arguments) for c in plain.calls
    ]
    assert thought.text == plain.text.lstrip() or thought.text == plain.text
    assert len(thought.problems) == len(plain.problems)
