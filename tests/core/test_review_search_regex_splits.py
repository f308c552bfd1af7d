"""Review: short bounded repeats in a row passed the backtracking check.

Only repeats of more than 64 counted, so ``\\w{0,60}`` five times and a class that never
matches searched for minutes (115 s over 50 tools) with the GIL held: the MCP server's
``search_tools`` and the agent's ``tool_search`` froze their whole process.
"""

from __future__ import annotations

import pytest

from toolbridge import tool
from toolbridge.core.tool import Tool
from toolbridge.core.tool_search import ToolIndex


def _tools() -> list[Tool]:
    made: list[Tool] = []
    for number in range(3):

        @tool(name=f"create_repository_webhook_configuration_{number}")
        def webhook(repository_administration_identifier: str) -> str:
            """Creates the webhook_configuration_for_repository_administration things."""
            return repository_administration_identifier

        made.append(webhook)
    return made


@pytest.mark.parametrize(
    "pattern",
    [r"\w{0,60}" * 5 + "[!?]", r"\w{0,60}\w{0,60}\w{0,60}[!?]", r".*\w{0,90}[!?]"],
)
def test_many_short_repeats_are_searched_as_words(pattern: str) -> None:
    assert ToolIndex.regex_of(pattern) is None
    assert isinstance(ToolIndex(_tools()).search(pattern), list)


@pytest.mark.parametrize(
    "pattern", [r"\w{0,60}\w{0,60}[!?]", r"^create_\w{1,20}_\d{1,3}$", r"webhook.*\d{1,3}"]
)
def test_a_few_short_repeats_are_still_a_regex(pattern: str) -> None:
    assert ToolIndex.regex_of(pattern) is not None


def test_short_repeats_still_find_tools() -> None:
    index = ToolIndex(_tools())
    assert index.search(r"^create_\w{1,40}_[12]$") == [
        "create_repository_webhook_configuration_1",
        "create_repository_webhook_configuration_2",
    ]
