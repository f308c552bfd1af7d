"""Deferred definitions and the local tool search (`toolbridge.core.tool_search`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolbridge import Tool, ToolDefinitionError, ToolRegistry, tool, tool_parameters
from toolbridge.core.tool_search import (
    SEARCH_TOOL_NAME,
    DeferralPolicy,
    ToolDeferral,
    ToolIndex,
    found_tools,
)


def make(name: str, description: str, defer: bool | None = None, **params: str) -> Tool:
    """A tool with string parameters described by `params`."""

    @tool_parameters(
        {
            "type": "object",
            "properties": {key: {"type": "string", "description": d} for key, d in params.items()},
        }
    )
    class Made(Tool):
        async def execute(self, **kwargs: Any) -> str:
            return f"{name} ran"

    made = Made()
    made.name, made.description, made.defer_loading = name, description, defer
    return made


CATALOG = [
    make("github_create_issue", "Open a new issue in a repository.", repo="owner/name"),
    make("github_list_pull_requests", "List the open pull requests of a repository."),
    make("slack_post_message", "Send a message to a channel.", channel="Channel id, like C123"),
    make("jira_createTicket", "File a ticket in a project.", project="Project key"),
    make("calendar_find_slot", "Find a free meeting time.", timezone="IANA zone of attendees"),
]


def test_under_the_size_nothing_is_deferred_and_no_search_tool_is_sent() -> None:
    deferral = ToolDeferral(ToolRegistry(CATALOG), DeferralPolicy(max_tools=30))
    assert deferral.deferred == frozenset()
    assert deferral.select().names == sorted(t.name for t in CATALOG)


def test_over_the_size_every_tool_not_always_loaded_is_deferred() -> None:
    kept = make("read_file", "Read a file.", defer=False)
    policy = DeferralPolicy(max_tools=3, always_loaded=frozenset({"slack_post_message"}))
    deferral = ToolDeferral(ToolRegistry([*CATALOG, kept]), policy)
    assert deferral.select().names == ["read_file", "slack_post_message", SEARCH_TOOL_NAME]
    assert "github_create_issue" in deferral.deferred and "read_file" not in deferral.deferred


def test_the_token_size_defers_too_and_defer_loading_true_always_defers() -> None:
    big = make("big_tool", "x" * 50_000)
    deferral = ToolDeferral(ToolRegistry([big]), DeferralPolicy(max_tokens=10_000))
    assert deferral.deferred == {"big_tool"}
    one = make("rare_tool", "Rarely needed.", defer=True)
    small = ToolDeferral(ToolRegistry([one, CATALOG[0]]), DeferralPolicy())
    assert small.deferred == {"rare_tool"}
    assert small.select().names == ["github_create_issue", SEARCH_TOOL_NAME]


def test_function_tool_takes_defer_loading() -> None:
    @tool(defer_loading=True)
    def archive(path: str) -> str:
        """Archive a file."""
        return path

    assert archive.defer_loading is True
    deferral = ToolDeferral(ToolRegistry([archive]))
    assert deferral.search("archive") == [archive]


def test_found_tools_go_at_the_end_and_the_hash_changes_only_with_the_list() -> None:
    deferral = ToolDeferral(ToolRegistry(CATALOG), DeferralPolicy(max_tools=0))
    base = deferral.select()
    assert base.names == [SEARCH_TOOL_NAME]
    assert deferral.select().definitions_hash == base.definitions_hash
    grown = deferral.select(["slack_post_message", "not_a_tool", "github_create_issue"])
    assert grown.names == [SEARCH_TOOL_NAME, "slack_post_message", "github_create_issue"]
    assert grown.definitions_hash != base.definitions_hash
    again = deferral.select(["slack_post_message", "github_create_issue", "slack_post_message"])
    assert again.definitions_hash == grown.definitions_hash
    index = deferral.index()
    assert deferral.index() is index  # built once while the registry stays the same
    deferral.registry.register(make("new_tool", "Brand new."))
    assert deferral.select().definitions_hash != base.definitions_hash
    assert deferral.index() is not index
    assert deferral.search("brand new")[0].name == "new_tool"


def test_bm25_reads_names_descriptions_and_parameters() -> None:
    index = ToolIndex(CATALOG)
    assert index.search("create issue")[0] == "github_create_issue"
    assert index.search("pull requests", limit=1) == ["github_list_pull_requests"]
    assert index.search("ticket")[0] == "jira_createTicket"  # camelCase split
    assert index.search("attendees zone")[0] == "calendar_find_slot"  # a parameter's text
    assert index.search("channel")[0] == "slack_post_message"
    assert index.search("zebra unicorn") == []
    assert len(index.search("a the of repository", limit=2)) <= 2


def test_a_regex_query_is_a_regex_and_prose_falls_back_to_words() -> None:
    index = ToolIndex(CATALOG)
    assert index.search("^github_") == ["github_create_issue", "github_list_pull_requests"]
    assert index.search("slack|jira") == ["slack_post_message", "jira_createTicket"]
    assert index.search("CREATE.*ISSUE") == ["github_create_issue"]  # case-insensitive
    assert index.search(r"POST\S*MESSAGE") == ["slack_post_message"]  # \S is not \s
    assert index.search(r"^\w+_find_SLOT$") == ["calendar_find_slot"]
    # a name match ranks before a match in the text only
    assert index.search("message|ticket")[0:2] == ["slack_post_message", "jira_createTicket"]
    assert index.search("meeting time?")[0] == "calendar_find_slot"  # no regex hit: words
    assert index.search("issue[")[0] == "github_create_issue"  # no regex: words


def test_common_words_in_a_big_catalog_still_rank_the_rare_match_first() -> None:
    tools = [make(f"svc_get_item_{n:03d}", f"Get item {n} from the store.") for n in range(300)]
    tools.append(make("svc_get_weather", "Get the weather forecast for a city."))
    index = ToolIndex(tools)
    assert index.common < 301  # "get", "item", "the" are common terms here
    assert index.search("get the weather")[0] == "svc_get_weather"
    assert index.search("get the forecast", limit=1) == ["svc_get_weather"]
    only_common = index.search("get the", limit=5)  # every term common: still 5 tools
    assert len(only_common) == 5 and len(set(only_common)) == 5
    assert index.search("item 042", limit=1) == ["svc_get_item_042"]


async def test_the_search_tool_returns_definitions_and_names_what_it_found() -> None:
    deferral = ToolDeferral(ToolRegistry(CATALOG), DeferralPolicy(max_tools=0))
    result = await deferral.registry.execute(SEARCH_TOOL_NAME, {"query": "issue", "limit": 1})
    assert not result.is_error
    payload = json.loads(result.text)
    assert [d["name"] for d in payload["tools"]] == ["github_create_issue"]
    assert payload["tools"][0]["parameters"]["properties"]["repo"]["description"] == "owner/name"
    assert found_tools(result) == ["github_create_issue"]
    nothing = await deferral.registry.execute(SEARCH_TOOL_NAME, {"query": "zebra"})
    assert "No tool matches" in nothing.text and found_tools(nothing) == []
    bad = await deferral.registry.execute(SEARCH_TOOL_NAME, {"query": "x", "limit": 0})
    assert bad.is_error and found_tools(bad) == []
    # a deferred tool still runs when called by its exact name
    ran = await deferral.registry.execute("jira_createTicket", {"project": "OPS"})
    assert ran.text == "jira_createTicket ran"


def test_bad_policies_and_a_taken_name_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="max_tools must be an integer >= 0"):
        DeferralPolicy(max_tools=-1)
    with pytest.raises(ValueError, match="always_loaded must be a collection of tool names"):
        DeferralPolicy(always_loaded="read_file")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="'tool_search' is already registered"):
        ToolDeferral(ToolRegistry([make(SEARCH_TOOL_NAME, "mine")]))
