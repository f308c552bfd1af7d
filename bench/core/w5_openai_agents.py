"""W5 OpenAI Agents SDK: a turn's N function-tool calls, three ways, no model and no network.

    bench/.venvs/openai_agents/bin/python bench/core/w5_openai_agents.py [repetitions] [sizes]

"agent turn": `Runner.run` over the SDK's own `agents.testing.ScriptedModel` (an
in-process stand-in for the model) whose first response is N function calls with the
raw arguments `"{}"` and whose second is a text. Timed with public `RunHooks`: from
`on_llm_end` of the first model call to `on_llm_start` of the second, i.e. the whole
tool phase of the turn (turning the response into tool runs, approvals and guardrail
checks, the batch, the output items, and preparing the next model input). Tracing is
disabled in the `RunConfig` (the default would try to export spans to OpenAI).

"execute_function_tool_calls": the batch function the run loop calls for the turn's
function tools (`agents.run_internal.tool_execution`, internal), called directly with
N `ToolRunFunction`s, default hooks and `RunConfig`. It starts one task per call and
waits with `asyncio.wait(FIRST_COMPLETED)` in a loop.

"gather of FunctionTool.on_invoke_tool": N `on_invoke_tool(ToolContext, "{}")` under one
gather, the single-call path with none of the batch machinery.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    ToolCallOutputItem,
    function_tool,
)
from agents.run_internal.agent_bindings import bind_public_agent
from agents.run_internal.run_steps import ToolRunFunction
from agents.run_internal.tool_execution import execute_function_tool_calls
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall
from w5_harness import ARGUMENTS, TOOL_NAME, Batch, Variant, nap, run_variants, timed

CONFIG = RunConfig(tracing_disabled=True)


class ToolPhase(RunHooks[Any]):
    """Marks the end of the first model call and the start of the second."""

    def __init__(self) -> None:
        self.first_end = 0
        self.second_start = 0
        self.llm_calls = 0

    async def on_llm_start(self, *args: Any) -> None:
        self.llm_calls += 1
        if self.llm_calls == 2:
            self.second_start = time.perf_counter_ns()

    async def on_llm_end(self, *args: Any) -> None:
        if self.llm_calls == 1:
            self.first_end = time.perf_counter_ns()


def call_ids(size: int) -> list[str]:
    return [f"call_{i}" for i in range(size)]


def agent_turn(tool: FunctionTool) -> Variant:
    async def make(size: int) -> Batch:
        async def batch() -> tuple[int, Sequence[Any]]:
            calls = [function_call(TOOL_NAME, ARGUMENTS, call_id=i) for i in call_ids(size)]
            model = ScriptedModel([calls, [assistant_message("done")]])
            agent = Agent(name="bench", model=model, tools=[tool])
            hooks = ToolPhase()
            result = await Runner.run(agent, "Nap, please.", hooks=hooks, run_config=CONFIG)
            outputs = [item for item in result.new_items if isinstance(item, ToolCallOutputItem)]
            return hooks.second_start - hooks.first_end, outputs

        return batch

    return Variant("agent turn (Runner.run, tool phase)", make)


def batch_function(tool: FunctionTool) -> Variant:
    agent = Agent(name="bench", tools=[tool])

    async def make(size: int) -> Batch:
        runs = [
            ToolRunFunction(
                tool_call=ResponseFunctionToolCall(
                    arguments=ARGUMENTS, call_id=i, id=i, name=TOOL_NAME, type="function_call"
                ),
                function_tool=tool,
            )
            for i in call_ids(size)
        ]

        async def run() -> Sequence[Any]:
            results, _input_guardrails, _output_guardrails = await execute_function_tool_calls(
                bindings=bind_public_agent(agent),
                tool_runs=runs,
                hooks=RunHooks(),
                context_wrapper=RunContextWrapper(None),
                config=CONFIG,
            )
            return results

        return timed(run)

    return Variant("execute_function_tool_calls", make)


def invoke_gather(tool: FunctionTool) -> Variant:
    async def make(size: int) -> Batch:
        ids = call_ids(size)

        async def run() -> Sequence[Any]:
            return await asyncio.gather(
                *(
                    tool.on_invoke_tool(
                        ToolContext(
                            None, tool_name=TOOL_NAME, tool_call_id=i, tool_arguments=ARGUMENTS
                        ),
                        ARGUMENTS,
                    )
                    for i in ids
                )
            )

        return timed(run)

    return Variant("gather of FunctionTool.on_invoke_tool", make)


async def build() -> Sequence[Variant]:
    tool = function_tool(nap)
    return [agent_turn(tool), batch_function(tool), invoke_gather(tool)]


if __name__ == "__main__":
    run_variants(
        "openai_agents",
        "OpenAI Agents SDK",
        build,
        ["openai-agents", "openai", "pydantic", "pydantic-core"],
    )
