"""Review: tool_search given a regular expression that backtracks for ever.

`re` holds the GIL while it matches, so the search tool's timeout (a thread the event
loop waits on) could never fire: one model-written pattern froze the whole process.
"""

from __future__ import annotations

import pytest

from toolbridge import tool
from toolbridge.core.tool import Tool
from toolbridge.core.tool_search import ToolIndex


def _tools() -> list[Tool]:
    made: list[Tool] = []
    for number in range(3):

        @tool(name=f"weather_{number}")
        def weather(city: str) -> str:
            """Read the weather report for a given city and return it as plain text now."""
            return city

        made.append(weather)
    return made


@pytest.mark.parametrize(
    "pattern",
    [
        r"^(\w+\s?)*$",
        r"(.*)*x",
        r"(a|aa)+$",
        r"(?:\w+,?)+;",
        r"\w*\w*\w*!",  # polynomial: 21 s over 200 tools
        r".*e.*!",
        r".{0,9999}e.*!",
    ],
)
def test_a_backtracking_regex_is_searched_as_words(pattern: str) -> None:
    assert ToolIndex.regex_of(pattern) is None
    # Before, this search ran for hours (2^words for the first pattern) holding the GIL.
    # Read as words, it still answers.
    assert isinstance(ToolIndex(_tools()).search(pattern), list)


@pytest.mark.parametrize("pattern", [r"issue|ticket", r"^weather_", r"weather.*city", r"x{2,}"])
def test_an_ordinary_regex_is_still_a_regex(pattern: str) -> None:
    assert ToolIndex.regex_of(pattern) is not None


def test_a_regex_still_finds_tools() -> None:
    assert ToolIndex(_tools()).search(r"^weather_[12]") == ["weather_1", "weather_2"]


@pytest.mark.parametrize("pattern", ["(" * 1000 + "a" + ")" * 1000, "a{99999999999}"])
def test_a_regex_too_deep_or_too_large_is_searched_as_words(pattern: str) -> None:
    """re raised RecursionError and OverflowError (not re.error), which reached the model
    as a crash of tool_search instead of a search."""
    assert ToolIndex.regex_of(pattern) is None
    assert isinstance(ToolIndex(_tools()).search(pattern), list)
