"""A regular expression with a literal in every match is tried only on the tools that
hold the literal: the same tools come back, in the same order, as a full scan gives."""

from __future__ import annotations

import itertools
import re

import pytest

from toolbridge import Tool
from toolbridge.core import tool_search
from toolbridge.core.tool_search import ToolIndex

SERVERS = ["github", "slack", "jira", "stripe"]
VERBS = ["get", "list", "create", "delete", "merge", "close"]
NOUNS = ["issue", "pull_request", "channel", "invoice", "payment", "ticket"]


def catalog() -> list[Tool]:
    tools = []
    for server, verb, noun in itertools.product(SERVERS, VERBS, NOUNS):
        made = Tool()
        made.name = f"{server}_{verb}_{noun}"
        made.description = f"{verb.title()} a {noun.replace('_', ' ')} in {server.title()}."
        made.parameters = {
            "type": "object",
            "properties": {"id": {"type": "string", "description": f"The {noun} id."}},
        }
        tools.append(made)
    return tools


PATTERNS = [
    "^github_.*issue",
    "merge_pull_request$",
    "slack_.*channel",
    "^jira",
    "invoice.*id",
    r"close_\w+$",
    "(invoice|payment)",  # no top-level literal: the full scan
    "^stripe_(get|list)_",
    "nothing_here_.*",
]


@pytest.mark.parametrize("query", PATTERNS)
@pytest.mark.parametrize("limit", [1, 3, 8, 50])
def test_the_literal_prefilter_finds_what_a_full_scan_finds(
    query: str, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = ToolIndex(catalog())
    pattern = ToolIndex.regex_of(query)
    assert pattern is not None
    filtered = index.search_regex(pattern, limit)
    monkeypatch.setattr(tool_search, "_required_literal", lambda _pattern: "")
    assert filtered == index.search_regex(pattern, limit)


def test_the_required_literal_is_the_longest_top_level_run() -> None:
    literal = tool_search._required_literal
    assert literal(re.compile("^github_.*issue")) == "github_"
    assert literal(re.compile("merge_pull_request$")) == "merge_pull_request"
    assert literal(re.compile("(invoice|payment)")) == ""
    assert literal(re.compile("a?b")) == "b"  # an optional character is not required
    assert literal(re.compile("issue", re.IGNORECASE)) == ""  # case-folded: not a plain find


def test_a_match_never_spans_two_tools() -> None:
    first, second = Tool(), Tool()
    first.name, first.description = "alpha", "ends with marker"
    second.name, second.description = "beta", "starts plain"
    index = ToolIndex([first, second])
    pattern = ToolIndex.regex_of(r"marker\s+beta")  # \s would match the line break
    assert pattern is not None
    assert index.search_regex(pattern, 8) == []


def test_a_pattern_without_a_literal_never_spans_two_tools_either() -> None:
    first, second = Tool(), Tool()
    first.name, first.description = "alpha", "ends with marker"
    second.name, second.description = "beta", "starts plain"
    index = ToolIndex([first, second])
    pattern = ToolIndex.regex_of(r"(marker|token)\s+beta")
    assert pattern is not None
    assert index.search_regex(pattern, 8) == []
    within = ToolIndex.regex_of(r"(marker|token)\s*")
    assert within is not None and index.search_regex(within, 8) == ["alpha"]
