"""langchain-core: `StructuredTool.ainvoke` with a tool-call dict, as LangGraph's ToolNode does.

The raw JSON is decoded with `json.loads` first (langchain's message parser does that
before a tool call dict exists). Validation errors raise (the default
`handle_validation_error=False`); the runner catches them as ToolNode would.
langchain-core has no registry, so an unknown name (W4) is not measured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typed_tools
from harness import Case, excerpt, run_cases
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool
from workloads import ALL_WORKLOADS, FILLER_NAMES


def describe(result: Any) -> tuple[str, str]:
    if isinstance(result, ToolMessage):
        return ("error" if result.status == "error" else "ok"), excerpt(result.content)
    return "error", excerpt(f"{type(result).__name__}: {result}")


async def build() -> Sequence[Case]:
    functions = [typed_tools.add, typed_tools.schedule_meeting]
    functions += [typed_tools.make_filler(name) for name in FILLER_NAMES]
    tools = {fn.__name__: StructuredTool.from_function(coroutine=fn) for fn in functions}
    # a sync function is a `func`: ainvoke runs it in the loop's default executor (a thread)
    tools["add_sync"] = StructuredTool.from_function(func=typed_tools.add_sync)

    cases: list[Case] = []
    for workload in ALL_WORKLOADS:
        if workload.tool_name not in tools:
            continue
        tool = tools[workload.tool_name]

        async def call(
            tool: StructuredTool = tool,
            name: str = workload.tool_name,
            text: str = workload.arguments,
        ) -> Any:
            tool_call = {
                "name": name,
                "args": json.loads(text),
                "id": "call_1",
                "type": "tool_call",
            }
            try:
                return await tool.ainvoke(tool_call)
            except Exception as exc:  # ToolNode's job: turn it into an error message
                return exc

        cases.append(Case(workload.key, "StructuredTool.ainvoke", call, describe))
    return cases


if __name__ == "__main__":
    run_cases(
        "langchain",
        "langchain-core StructuredTool",
        build,
        ["langchain-core", "pydantic", "pydantic-core"],
        ["langchain-core has no registry: W4 (unknown name) is not timed."],
    )
