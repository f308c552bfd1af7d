"""Tool search benchmark: definitions sent per request and search time, 200 and 10,000 tools.

Run it from the repository root in the project's environment (under a minute):

    python bench/tool_search_bench.py
    python bench/tool_search_bench.py --sizes 200 10000 --repetitions 200

It generates a catalog shaped like real MCP servers' tools (``server_verb_noun`` names,
a sentence or two of description, one to six parameters each with a description; the
first servers are named after real ones), then measures, per size: estimated tokens of
the definitions sent per request with every tool sent and under the default
`DeferralPolicy` (before and after a search that found 8 tools), the time to build the
search index (once per registry change), the median time of a search (BM25 words and
regular expressions) and the per-turn cost the agent loop adds (`ToolDeferral.select`
with the tools found so far). A second table runs the agent loop of bench/agent_bench.py
(a scripted model, 5 parallel calls of an async tool a turn, 120 turns) over the 200-tool
catalog with and without tool search, interleaved, and gives the per-turn medians.
A third connects to server-everything (the npm MCP reference server that tests/mcp's
``npm ci`` installs) over stdio and gives its estimated tokens with every definition
sent, under the default policy, and with ``"defer_loading": true`` on the server.
It prints markdown tables and the load average at the start and the end: the machine may
be shared, so compare numbers of one run. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolbridge import ExecutionPolicy, Tool, ToolRegistry
from toolbridge.agent import AgentRunner, ScriptedModel
from toolbridge.core.results import estimate_tokens
from toolbridge.core.tool_search import DeferralPolicy, ToolDeferral

SERVERS = ["github", "slack", "jira", "linear", "notion", "postgres", "stripe", "sentry"]
VERBS = ["get", "list", "create", "update", "delete", "search", "add", "remove", "merge"]
VERBS += ["archive", "assign", "close", "reopen", "export", "import", "sync", "run", "cancel"]
NOUNS = ["issue", "pull_request", "comment", "branch", "commit", "repository", "file"]
NOUNS += ["channel", "message", "user", "team", "project", "ticket", "sprint", "page"]
NOUNS += ["database", "table", "query", "customer", "invoice", "payment", "subscription"]
NOUNS += ["event", "alert", "release", "deployment", "workflow", "label", "milestone"]
NOUNS += ["webhook", "secret", "token", "document", "folder", "calendar", "meeting"]
PARAMS = [
    ("owner", "The account owner of the repository; not case sensitive."),
    ("repo", "The name of the repository without the .git extension."),
    ("id", "The unique identifier of the item."),
    ("query", "Search text; supports qualifiers like is:open or label:bug."),
    ("page", "Page number of the results to fetch, starting at 1."),
    ("per_page", "Results per page (max 100)."),
    ("title", "A short title for the item."),
    ("body", "The text content, in Markdown."),
    ("state", "Filter by state: open, closed or all."),
    ("since", "Only items updated at or after this time (ISO 8601)."),
    ("channel_id", "The channel to post to, like C0123456."),
    ("assignee", "The login of the user to assign."),
]
QUERIES_WORDS = [
    "create an issue in a repository",
    "send message to channel",
    "list open pull requests",
    "refund a payment for a customer",
    "deployment",
]
QUERIES_REGEX = ["^github_.*issue", "(invoice|payment)", "merge_pull_request$"]


def catalog(size: int, seed: int = 11) -> list[Tool]:
    """`size` tools over servers of 10 to 120 tools each (named after real ones first)."""
    rng = random.Random(seed)
    tools: list[Tool] = []
    taken: set[str] = set()
    server_number = 0
    while len(tools) < size:
        server = (
            SERVERS[server_number] if server_number < len(SERVERS) else f"server{server_number:03d}"
        )
        server_number += 1
        for _ in range(rng.randint(10, 120)):
            verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
            name = f"{server}_{verb}_{noun}"
            if name in taken or len(tools) >= size:
                continue
            taken.add(name)
            text = noun.replace("_", " ")
            params = rng.sample(PARAMS, rng.randint(1, 6))
            description = (
                f"{verb.capitalize()} a {text} in {server.capitalize()}. Use this to {verb} "
                f"{text}s the user names; returns the {text} as JSON with its id, state and "
                "timestamps. Requires the authenticated user to have access."
            )
            tools.append(_tool(name, description, params))
    return tools


def _tool(name: str, description: str, params: list[tuple[str, str]]) -> Tool:
    made = Tool()
    made.name, made.description = name, description
    made.parameters = {
        "type": "object",
        "properties": {key: {"type": "string", "description": text} for key, text in params},
        "required": [params[0][0]],
    }
    return made


def tokens(tools: Any) -> int:
    return sum(estimate_tokens(json.dumps(tool.to_schema())) for tool in tools)


def median_us(action: Callable[[], object], repetitions: int) -> float:
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def measure(size: int, repetitions: int) -> dict[str, Any]:
    registry = ToolRegistry(catalog(size))
    deferral = ToolDeferral(registry, DeferralPolicy())
    every = tokens(registry)
    before = tokens(deferral.select())
    start = time.perf_counter()
    deferral.index()
    build_ms = (time.perf_counter() - start) * 1e3
    found = [tool.name for tool in deferral.search(QUERIES_WORDS[0], 8)]
    after = tokens(deferral.select(found))
    words = [median_us(lambda q=q: deferral.search(q, 8), repetitions) for q in QUERIES_WORDS]
    regex = [median_us(lambda q=q: deferral.search(q, 8), repetitions) for q in QUERIES_REGEX]
    turn = median_us(lambda: deferral.select(found), repetitions * 10)
    native = ToolDeferral(registry, DeferralPolicy(), native=True)
    native.select()
    native_turn = median_us(native.select, repetitions * 10)
    cached = median_us(deferral.index, repetitions * 10)
    return {
        "size": size,
        "every": every,
        "before": before,
        "after": after,
        "build_ms": build_ms,
        "words_max": max(words),
        "words_median": statistics.median(words),
        "regex_max": max(regex),
        "turn": turn,
        "native_turn": native_turn,
        "cached": cached,
    }


async def loop_turn_us(tool_search: bool, catalog_tools: list[Tool]) -> float:
    """Median µs per turn (turns 5 to 104) of one agent run over `catalog_tools` + echo."""
    sys.path.insert(0, str(Path(__file__).parent))
    from agent_bench import TURNS, echo, script

    stamps: list[float] = []
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, tracing=False)
    runner = AgentRunner(
        ScriptedModel(script(stamps), record=False),
        [echo, *catalog_tools],
        policy=policy,
        max_turns=TURNS + 1,
        tool_search=DeferralPolicy(always_loaded=frozenset({"echo"})) if tool_search else False,
    )
    result = await runner.run("go")
    assert result.stop_reason == "final", result.stop_reason
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    return statistics.median(durations[5:105]) * 1e6


def loop_rows(repeats: int) -> tuple[float, float]:
    tools = catalog(200)
    off: list[float] = []
    on: list[float] = []
    for _ in range(repeats):  # interleaved: both see the same load
        off.append(asyncio.run(loop_turn_us(False, tools)))
        on.append(asyncio.run(loop_turn_us(True, tools)))
    return statistics.median(off), statistics.median(on)


EVERYTHING = (
    Path(__file__).resolve().parents[1]
    / "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


async def everything_rows() -> dict[str, Any]:
    """server-everything's tools over MCP: tokens sent with and without deferral."""
    from toolbridge.mcp import MCPClient

    if not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing: run `npm ci` in tests/mcp")
    rows: dict[str, Any] = {}
    for defer in (None, True):
        entry: dict[str, Any] = {"command": "node", "args": [str(EVERYTHING)]}
        if defer is not None:
            entry["defer_loading"] = defer
        registry = ToolRegistry()
        async with MCPClient({"mcpServers": {"everything": entry}}, registry):
            deferral = ToolDeferral(registry, DeferralPolicy())
            rows["count"] = len(registry)
            rows["every"] = tokens(registry)
            key = "configured" if defer else "policy"
            rows[key] = tokens(deferral.select())
            found = [tool.name for tool in deferral.search("add two numbers", 1)]
            rows[f"{key}_found"] = tokens(deferral.select(found))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 10_000])
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--loop-repeats", type=int, default=7)
    args = parser.parse_args()
    load_start = os.getloadavg()
    rows = [measure(size, args.repetitions) for size in args.sizes]
    loop_off, loop_on = loop_rows(args.loop_repeats)
    everything = asyncio.run(everything_rows())
    load_end = os.getloadavg()
    print(
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores; "
        f"load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end"
    )
    print()
    print(
        "| tools | tokens, every definition | tokens, deferred | tokens, after a search "
        "(8 found) | index build | BM25 search (median / slowest query) | regex search "
        "(slowest query) | per-turn select (local / native) | cached index |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['every']:,} | {r['before']:,} | {r['after']:,} | "
            f"{r['build_ms']:.0f} ms | {r['words_median']:.0f} / {r['words_max']:.0f} µs | "
            f"{r['regex_max']:.0f} µs | {r['turn']:.1f} / {r['native_turn']:.1f} µs | "
            f"{r['cached']:.2f} µs |"
        )
    print()
    print("| agent loop over 200 tools + echo | µs per turn (median) | ratio |")
    print("|---|---:|---:|")
    print(f"| every definition sent | {loop_off:.0f} | 1.00x |")
    print(f"| tool search on (echo always loaded) | {loop_on:.0f} | {loop_on / loop_off:.2f}x |")
    print()
    e = everything
    print(
        f"| server-everything ({e['count']} tools) | tokens, every definition | tokens, "
        "deferred | tokens, after a search (1 found) |"
    )
    print("|---|---:|---:|---:|")
    print(
        f"| default policy (30 tools / 10,000 tokens) | {e['every']:,} | {e['policy']:,} | "
        f"{e['policy_found']:,} |"
    )
    print(
        f'| `"defer_loading": true` on the server | {e["every"]:,} | {e["configured"]:,} | '
        f"{e['configured_found']:,} |"
    )


if __name__ == "__main__":
    main()
