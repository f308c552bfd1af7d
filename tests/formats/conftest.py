"""Fixtures for the provider-format tests: outcomes, a small registry, the JSON cases."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from toolbridge import ImageBlock, JsonBlock, TextBlock, ToolCallRequest, ToolRegistry, ToolResult
from toolbridge import tool as make_tool

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@dataclass(frozen=True)
class Outcome:
    """What the executor hands to `result_messages`: the call and its result."""

    call: ToolCallRequest
    result: ToolResult


@pytest.fixture
def make_outcome() -> type[Outcome]:
    return Outcome


@pytest.fixture
def outcomes() -> list[Outcome]:
    """A success, an error, a JSON result and an image result, in call order."""
    return [
        Outcome(ToolCallRequest("call_1", "read_file", '{"path": "a"}'), ToolResult("hello")),
        Outcome(
            ToolCallRequest("call_2", "sleep", "{}"),
            ToolResult.error("sleep failed: too long"),
        ),
        Outcome(
            ToolCallRequest("call_3", "stat", "{}"),
            ToolResult([JsonBlock({"size": 3, "name": "a"})]),
        ),
        Outcome(
            ToolCallRequest("call_4", "screenshot", "{}"),
            ToolResult([TextBlock("the screen"), ImageBlock(PNG, "image/png")]),
        ),
    ]


@pytest.fixture
def registry() -> ToolRegistry:
    """Tools whose schemas exercise the adaptations: optional, nullable, enum, open."""

    @make_tool
    def read_file(path: str, limit: int = 10, encoding: str | None = None) -> str:
        """Read a file."""
        return path

    @make_tool
    def get_time() -> str:
        """The time."""
        return "now"

    @make_tool
    def tag(labels: dict[str, str]) -> str:
        """Open object: cannot be strict."""
        return ""

    return ToolRegistry([read_file, get_time, tag])
