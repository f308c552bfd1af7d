"""OpenAI Agents SDK: `FunctionTool.on_invoke_tool(ctx, json_text)` of an `@function_tool`.

A fresh `ToolContext` per call, as the runner builds one per tool call. Failures are
returned as the SDK's default text ("An error occurred while running the tool...").
The SDK resolves names inside its run loop (no public registry), so W4 is not measured.
Outside an agent run there is no trace span, and every failure would log "No active
span" to stderr; the runner silences that warning so W3 times the SDK, not the terminal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import typed_tools
from agents import FunctionTool, function_tool
from agents.tool import default_tool_error_function
from agents.tool_context import ToolContext
from harness import Case, excerpt, run_cases
from workloads import ALL_WORKLOADS, FILLER_NAMES

_FAILURE = default_tool_error_function(None, Exception())  # type: ignore[arg-type]


def describe(result: Any) -> tuple[str, str]:
    return ("error" if result == _FAILURE else "ok"), excerpt(result)


async def build() -> Sequence[Case]:
    logging.getLogger("openai.agents").setLevel(logging.ERROR)
    functions: list[Callable[..., Any]] = [
        typed_tools.add,
        typed_tools.add_sync,
        typed_tools.schedule_meeting,
    ]
    functions += [typed_tools.make_filler(name) for name in FILLER_NAMES]
    tools: dict[str, FunctionTool] = {fn.__name__: function_tool(fn) for fn in functions}

    cases: list[Case] = []
    for workload in ALL_WORKLOADS:
        if workload.tool_name not in tools:
            continue
        tool = tools[workload.tool_name]

        async def call(
            tool: FunctionTool = tool,
            name: str = workload.tool_name,
            text: str = workload.arguments,
        ) -> Any:
            ctx = ToolContext(None, tool_name=name, tool_call_id="call_1", tool_arguments=text)
            return await tool.on_invoke_tool(ctx, text)

        cases.append(Case(workload.key, "FunctionTool.on_invoke_tool", call, describe))
    return cases


if __name__ == "__main__":
    run_cases(
        "openai_agents",
        "OpenAI Agents SDK FunctionTool",
        build,
        ["openai-agents", "pydantic", "pydantic-core"],
        ["Names are resolved inside the SDK's run loop: W4 (unknown name) is not timed."],
    )
