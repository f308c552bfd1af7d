# ruff: noqa: E501  (wire payloads read better one per line)
"""Fuzz the provider formats with mutated realistic payloads (issue 15).

Every target starts from the recorded fixtures of tests/formats and tests/formats_stream
and mutates them: a value anywhere replaced by arbitrary JSON (deep nesting included),
a key removed, a known key added where it does not belong. Properties:

- `parse_response`, `parse_definitions`, the stream adapters and `repair_history`
  return or raise `FormatError`, nothing else;
- the input is never modified;
- re-chunking a stream (a text or argument delta split in two events) never changes
  what it assembles to.

``TOOLBRIDGE_FUZZ=long`` runs the long profile (see conftest.py).
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.conftest import FUZZ_SETTINGS

from toolbridge.formats import (
    PROVIDER_FORMATS,
    FormatError,
    ToolSpec,
    assemble,
    repair_history,
)

TESTS = Path(__file__).resolve().parent.parent
PROVIDERS = sorted(PROVIDER_FORMATS)


def _responses(provider: str) -> list[Any]:
    folder = TESTS / "formats" / "fixtures" / provider
    cases = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    return [case["payload"] for case in cases]


def _streams(provider: str) -> list[list[Any]]:
    folder = TESTS / "formats_stream" / "fixtures" / provider
    return [
        [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
        for p in sorted(folder.glob("*.jsonl"))
    ]


SPECS = [
    ToolSpec(
        "read_file",
        "Read a file.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": ["integer", "null"]}},
            "required": ["path"],
        },
    ),
    ToolSpec("get_time", "The time."),
    ToolSpec("tag", "Tag.", {"type": "object", "properties": {"t": {"enum": ["a", 1]}}}),
]


def _keys(value: Any, into: set[str]) -> set[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            into.add(key)
            _keys(item, into)
    elif isinstance(value, list):
        for item in value:
            _keys(item, into)
    return into


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `value` (the root excluded), at most 10 steps long."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict | list) and len(prefix) < 10:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            out.append((*prefix, key))
            out.extend(_paths(item, (*prefix, key)))
    return out


def _deep(depth: int) -> Any:
    value: Any = "x"
    for number in range(depth):
        value = [value] if number % 2 else {"a": value}
    return value


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
) | st.sampled_from([300, 2000]).map(_deep) | st.sampled_from([[None], {}, [], "", -1, 1.5, ["stop"]]).map(copy.deepcopy)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, value: Any, vocabulary: frozenset[str]) -> Any:
    """`value` deep-copied with one to three mutations at drawn places."""
    data = copy.deepcopy(value)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        if not paths:
            return draw(JSON)
        path = draw(st.sampled_from(paths))
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(JSON)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "delete":
            parent.pop(path[-1])
        else:
            target = parent[path[-1]]
            if isinstance(target, dict):
                target[draw(st.sampled_from(sorted(vocabulary)))] = draw(JSON)
            elif isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), draw(JSON))
    return data


def _snapshot(value: Any) -> list[Any]:
    """The value as a flat list of tokens, without recursion (values nest 2,000 deep)."""
    tokens: list[Any] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            tokens.append(("{", len(node)))
            for key, item in node.items():
                tokens.append(key)
                stack.append(item)
        elif isinstance(node, list):
            tokens.append(("[", len(node)))
            stack.extend(node)
        else:
            tokens.append((type(node).__name__, node))
    return tokens


def _only_format_errors(work: Any, argument: Any) -> None:
    before = _snapshot(argument)
    with contextlib.suppress(FormatError):
        work(argument)
    assert _snapshot(argument) == before, "the input was modified"


# --- whole responses ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parse_response_raises_only_format_error(provider: str) -> None:
    module: ModuleType = PROVIDER_FORMATS[provider]
    seeds = _responses(provider)
    vocabulary = frozenset(_keys(seeds, set()))

    @FUZZ_SETTINGS
    @given(st.sampled_from(seeds).flatmap(lambda seed: mutated(seed, vocabulary)))
    def run(payload: Any) -> None:
        _only_format_errors(module.parse_response, payload)
        if isinstance(payload, dict):  # the JSON text of it behaves the same way
            try:
                text = json.dumps(payload)
            except (ValueError, RecursionError):
                return
            _only_format_errors(module.parse_response, text)

    run()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parse_definitions_raises_only_format_error(provider: str) -> None:
    module: ModuleType = PROVIDER_FORMATS[provider]
    seed = module.definitions(SPECS)
    assert [spec.name for spec in module.parse_definitions(seed)] == [s.name for s in SPECS]
    vocabulary = frozenset(_keys(seed, set()))

    @FUZZ_SETTINGS
    @given(mutated(seed, vocabulary))
    def run(tools: Any) -> None:
        _only_format_errors(module.parse_definitions, tools)

    run()


# --- streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_adapters_raise_only_format_error(provider: str) -> None:
    seeds = _streams(provider)
    vocabulary = frozenset(_keys(seeds, set()))

    @FUZZ_SETTINGS
    @given(st.sampled_from(seeds).flatmap(lambda seed: mutated(seed, vocabulary)))
    def run(events: Any) -> None:
        if not isinstance(events, list):
            events = [events]
        _only_format_errors(lambda evs: assemble(provider, evs), events)

    run()


def _split_events(provider: str, event: Any, cut: float) -> list[Any] | None:
    """The event as two events whose text or argument deltas add up to the original's;
    None when this event carries no delta that can be split that way."""

    def halves(text: Any) -> tuple[str, str] | None:
        if not isinstance(text, str) or len(text) < 2:
            return None
        at = max(1, min(len(text) - 1, int(len(text) * cut)))
        return text[:at], text[at:]

    first = copy.deepcopy(event)
    if provider == "openai_chat":
        choices = first.get("choices") or []
        if len(choices) != 1 or choices[0].get("finish_reason"):
            return None
        choice = choices[0]
        delta = choice.get("delta") or {}
        fragments = delta.get("tool_calls") or []
        if delta.get("content") and not fragments:
            split = halves(delta["content"])
            if split is None:
                return None
            delta["content"] = split[0]
            second_delta: dict[str, Any] = {"content": split[1]}
        elif len(fragments) == 1 and "index" in fragments[0] and not delta.get("content"):
            function = fragments[0].get("function") or {}
            split = halves(function.get("arguments"))
            if split is None:
                return None
            function["arguments"] = split[0]
            more = {"index": fragments[0]["index"], "function": {"arguments": split[1]}}
            second_delta = {"tool_calls": [more]}
        else:
            return None
        return [first, {"choices": [{"index": choice.get("index", 0), "delta": second_delta}]}]
    if provider in ("anthropic", "openai_responses", "bedrock"):
        holder, key = None, ""
        if provider == "anthropic" and first.get("type") == "content_block_delta":
            holder = first["delta"]
            key = next((k for k in ("text", "partial_json", "thinking") if k in holder), "")
        elif provider == "openai_responses" and str(first.get("type")).endswith(".delta"):
            holder, key = first, "delta"
        elif provider == "bedrock" and "contentBlockDelta" in first:
            delta = first["contentBlockDelta"]["delta"]
            holder, key = (delta, "text") if "text" in delta else (delta.get("toolUse"), "input")
        split = halves(holder.get(key)) if holder is not None and key else None
        if split is None or holder is None:
            return None
        second = copy.deepcopy(first)
        holder[key] = split[0]
        target = second
        for step in _path_to(first, holder):
            target = target[step]
        target[key] = split[1]
        return [first, second]
    if provider == "ollama":
        message = first.get("message") or {}
        if first.get("done") or message.get("tool_calls"):
            return None
        split = halves(message.get("content"))
        if split is None:
            return None
        message["content"] = split[0]
        return [first, {"message": {"role": "assistant", "content": split[1]}, "done": False}]
    if provider == "gemini":
        candidates = first.get("candidates") or []
        if len(candidates) != 1 or candidates[0].get("finishReason"):
            return None
        parts = (candidates[0].get("content") or {}).get("parts") or []
        if len(parts) != 1 or set(parts[0]) != {"text"}:
            return None
        split = halves(parts[0]["text"])
        if split is None:
            return None
        parts[0]["text"] = split[0]
        return [
            first,
            {"candidates": [{"content": {"role": "model", "parts": [{"text": split[1]}]}}]},
        ]
    return None


def _path_to(root: Any, target: Any) -> list[Any]:
    """The keys leading from `root` to the object `target` (by identity)."""
    if root is target:
        return []
    items = (
        root.items()
        if isinstance(root, dict)
        else enumerate(root)
        if isinstance(root, list)
        else ()
    )
    for key, item in items:
        if isinstance(item, dict | list):
            found = _path_to(item, target)
            if found is not None and (found or item is target):
                return [key, *found]
    return []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rechunking_never_changes_the_result(provider: str) -> None:
    seeds = _streams(provider)

    @FUZZ_SETTINGS
    @given(
        st.sampled_from(seeds),
        st.lists(st.tuples(st.integers(0, 1000), st.floats(0.01, 0.99)), max_size=8),
    )
    def run(events: list[Any], cuts: list[tuple[int, float]]) -> None:
        expected = assemble(provider, events)
        chunked = list(events)
        for where, cut in cuts:
            index = where % len(chunked)
            split = _split_events(provider, chunked[index], cut)
            if split is not None:
                chunked[index : index + 1] = split
        assert assemble(provider, chunked) == expected

    run()


def test_rechunking_splits_something_in_every_provider() -> None:
    """The splitter is not vacuous: each provider has a fixture event it can split."""
    for provider in PROVIDERS:
        events = [event for stream in _streams(provider) for event in stream]
        assert any(_split_events(provider, event, 0.5) for event in events), provider


# --- history -------------------------------------------------------------------------------

HISTORIES: dict[str, list[dict[str, Any]]] = {
    "openai_chat": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{"}},
        ]},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
    ],
    "ollama": [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
        {"role": "tool", "tool_name": "f", "content": "one"},
        {"role": "tool", "tool_name": "f", "content": "again"},
    ],
    "openai_responses": [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": ""},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c9", "output": "orphan"},
    ],
    "anthropic": [
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "g", "input": "{\"a\""},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x"}]},
        {"role": "user", "content": "more"},
    ],
    "bedrock": [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "b1", "name": "f", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "b1", "content": [{"text": "ok"}]}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "b1", "content": [{"text": "dup"}]}}]},
    ],
    "gemini": [
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": 1}}}]},
        {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": "g"}}]},
    ],
}  # fmt: skip


@pytest.mark.parametrize("format", sorted(HISTORIES))
def test_repair_history_raises_only_format_error(format: str) -> None:
    seed = HISTORIES[format]
    repair_history(seed, format)
    vocabulary = frozenset(_keys(seed, set()))

    @FUZZ_SETTINGS
    @given(mutated(seed, vocabulary))
    def run(history: Any) -> None:
        _only_format_errors(lambda h: repair_history(h, format), history)

    run()
