"""Raw-text dialects: one fixture per case (the model's text, and what must come out)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ErrorKind, FunctionTool, ToolRegistry
from toolbridge.core.calls import decode_arguments
from toolbridge.formats.text import DIALECTS, detect_dialect, parse_text_calls

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(FIXTURES.glob("*/*.txt"))


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    return text, json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))


def test_every_dialect_has_fixtures() -> None:
    assert {p.parent.name for p in CASES} == set(DIALECTS)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_parses_to_expected_calls_and_text(path: Path) -> None:
    text, expected = _load(path)
    parsed = parse_text_calls(text, path.parent.name)
    assert parsed.text == expected["text"]
    assert len(parsed.problems) == expected["problems"], parsed.problems
    assert parsed.reasoning == expected.get("reasoning", "")
    assert len(parsed.calls) == len(expected["calls"])
    for call, want in zip(parsed.calls, expected["calls"], strict=True):
        assert call.name == want["name"]
        if "raw_arguments" in want:
            assert call.arguments == want["raw_arguments"]
        else:
            value = (
                decode_arguments(call.arguments)
                if isinstance(call.arguments, str)
                else call.arguments
            )
            assert value == want["arguments"]
        if "id" in want:
            assert call.id == want["id"]
            assert "generated_id" not in call.extra
        else:
            assert call.extra["generated_id"] is True
            if path.parent.name == "mistral":
                assert len(call.id) == 9 and call.id.isalnum()
            else:
                assert call.id.startswith("call_")
    assert len({call.id for call in parsed.calls}) == len(parsed.calls)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_auto_detection_reads_each_fixture_like_its_dialect(path: Path) -> None:
    text, _ = _load(path)
    auto, explicit = parse_text_calls(text, "auto"), parse_text_calls(text, path.parent.name)
    assert (auto.calls, auto.text, auto.problems, auto.reasoning, auto.spans) == (
        explicit.calls,
        explicit.text,
        explicit.problems,
        explicit.reasoning,
        explicit.spans,
    )
    detected = detect_dialect(text)
    assert detected in (path.parent.name, None)


def test_pythonic_code_is_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = f'[run(cmd=open({str(tmp_path / "pwned")!r}, "w").write("x"))]'
    parsed = parse_text_calls(text, "pythonic")
    assert parsed.calls == ()
    assert "not a literal" in parsed.problems[0]
    assert os.listdir(tmp_path) == []


def test_qwen3_coder_string_values_are_cast_by_the_registry() -> None:
    def read_file(path: str, limit: int = 10) -> str:
        return f"{path}:{limit}"

    registry = ToolRegistry([FunctionTool(read_file)])
    (call, _) = parse_text_calls(
        (FIXTURES / "qwen3_coder" / "two_functions.txt").read_text(), "qwen3_coder"
    ).calls
    prepared = registry.prepare_call(call.name, call.arguments)
    assert prepared.arguments == {"path": "src/app.py", "limit": 20}


def test_cut_off_text_call_reaches_the_model_as_a_truncation_error() -> None:
    def write_file(path: str, content: str) -> str:
        raise AssertionError("a truncated call must never run")

    registry = ToolRegistry([FunctionTool(write_file)])
    text = (FIXTURES / "mistral" / "cut_off_args_reach_the_registry_raw.txt").read_text()
    (call,) = parse_text_calls(text, "mistral").calls
    prepared = registry.prepare_call(call.name, call.arguments)
    assert prepared.error is not None
    assert prepared.error.kind is ErrorKind.ARGUMENTS_NOT_JSON
    assert "cut off" in prepared.error.message


def test_unknown_dialect_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown dialect 'qwen9'.*hermes"):
        parse_text_calls("x", "qwen9")


def test_text_without_calls_comes_back_whole_as_written() -> None:
    parsed = parse_text_calls("  The answer is [1, 2] (see above).\n\n")
    assert (parsed.calls, parsed.text, parsed.problems) == (
        (),
        "  The answer is [1, 2] (see above).\n\n",
        (),
    )
