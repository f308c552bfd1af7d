"""toolbridge: `ToolRegistry.execute(name, raw_json)` and `prepare_call` alone.

W1-W4 are also timed with the arguments as a dict, through `execute` and `prepare_call`
(the plain-data check runs on that path; decoded text skips it). W1s (a sync function)
is timed on the default path (a worker thread) and with
``@tool(inline=True)`` (on the event loop).

Run with the interpreter of bench/.venvs/toolbridge (an editable install of this repo):
    bench/.venvs/toolbridge/bin/python bench/core/peer_toolbridge.py [repetitions] [batch_ms]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typed_tools
from harness import Case, excerpt, run_cases
from workloads import ALL_WORKLOADS, FILLER_NAMES, SYNC_WORKLOADS

import toolbridge


def build_registry(*, inline: bool = False) -> toolbridge.ToolRegistry:
    registry = toolbridge.ToolRegistry()
    registry.register(toolbridge.tool(typed_tools.add))
    registry.register(toolbridge.tool(inline=inline)(typed_tools.add_sync))
    registry.register(toolbridge.tool(typed_tools.schedule_meeting))
    for name in FILLER_NAMES:
        registry.register(toolbridge.tool(typed_tools.make_filler(name)))
    return registry


def describe_result(result: toolbridge.ToolResult) -> tuple[str, str]:
    return ("error" if result.is_error else "ok", excerpt(result.text))


def describe_prepared(prepared: toolbridge.PreparedCall) -> tuple[str, str]:
    if prepared.error is not None:
        return "error", excerpt(prepared.error.render())
    return "ok", excerpt(repr(prepared.arguments))


async def build() -> Sequence[Case]:
    registry = build_registry()
    inline = build_registry(inline=True)
    cases: list[Case] = []
    for workload in ALL_WORKLOADS:
        name, text = workload.tool_name, workload.arguments

        async def execute(name: str = name, text: str = text) -> Any:
            return await registry.execute(name, text)

        def prepare(name: str = name, text: str = text) -> Any:
            return registry.prepare_call(name, text)

        data = json.loads(text)

        def prepare_dict(name: str = name, data: Any = data) -> Any:
            return registry.prepare_call(name, data)

        async def execute_dict(name: str = name, data: Any = data) -> Any:
            return await registry.execute(name, data)

        cases.append(Case(workload.key, "execute", execute, describe_result))
        cases.append(Case(workload.key, "prepare_call", prepare, describe_prepared, False))
        if workload.key != "W1s":
            # the arguments as a dict, as SDKs hand them over (Anthropic, Gemini)
            cases.append(
                Case(workload.key, "prepare_call, dict", prepare_dict, describe_prepared, False)
            )
            cases.append(Case(workload.key, "execute, dict", execute_dict, describe_result))
    for workload in SYNC_WORKLOADS:

        async def on_loop(name: str = workload.tool_name, text: str = workload.arguments) -> Any:
            return await inline.execute(name, text)

        cases.append(Case(workload.key, "execute, inline=True", on_loop, describe_result))
    return cases


if __name__ == "__main__":
    run_cases(
        "toolbridge",
        "toolbridge ToolRegistry.execute",
        build,
        ["toolbridge", "pydantic", "pydantic-core", "jsonschema-rs"],
        ["prepare_call alone is timed too (sync, no tool run)."],
    )
