"""W5 pydantic-ai: the agent step that runs a model response's N tool calls.

    bench/.venvs/pydantic_ai/bin/python bench/core/w5_pydantic_ai.py [repetitions] [sizes]

"agent step": an `Agent` over a `FunctionModel` (an in-process stand-in for the model,
no network) whose first response is N `ToolCallPart`s with the raw arguments `"{}"`.
The run is driven node by node with `Agent.iter`, and only the `CallToolsNode` that
holds those N calls is timed: `process_tool_calls` with the default `end_strategy`
('graceful') and parallel execution mode, which validates each call through the
`ToolManager`, runs the calls as tasks and collects their `ToolReturnPart`s into the
next request. The model requests before and after are not timed.

"gather of ToolManager.handle_call": the `ToolManager` alone (prepared with
`for_run_step`, as the agent does once per step), N `handle_call`s under one gather,
for comparison with the other peers' single-call paths.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai._agent_graph import CallToolsNode, ModelRequestNode
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage
from w5_harness import ARGUMENTS, TOOL_NAME, Batch, Variant, nap, run_variants, timed


def tool_calls(size: int) -> list[ToolCallPart]:
    return [ToolCallPart(TOOL_NAME, ARGUMENTS, tool_call_id=f"call_{i}") for i in range(size)]


async def agent_step(size: int) -> Batch:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:  # the user prompt: ask for the batch
            return ModelResponse(parts=tool_calls(size))
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(respond), tools=[nap])

    async def batch() -> tuple[int, Sequence[Any]]:
        elapsed, parts = 0, []
        async with agent.iter("Nap, please.") as run:
            node = run.next_node
            while not Agent.is_end_node(node):
                is_batch = isinstance(node, CallToolsNode) and node.model_response.tool_calls
                start = time.perf_counter_ns()
                node = await run.next(node)
                if is_batch:
                    elapsed = time.perf_counter_ns() - start
                    if isinstance(node, ModelRequestNode):
                        parts = list(node.request.parts)
        return elapsed, parts

    return batch


async def tool_manager_gather(size: int) -> Batch:
    toolset = FunctionToolset([nap], max_retries=1)
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = await ToolManager(toolset=toolset).for_run_step(ctx)
    calls = tool_calls(size)

    async def run() -> Sequence[Any]:
        return await asyncio.gather(*(manager.handle_call(call) for call in calls))

    return timed(run)


async def build() -> Sequence[Variant]:
    return [
        Variant("agent step (CallToolsNode)", agent_step),
        Variant("gather of ToolManager.handle_call", tool_manager_gather),
    ]


if __name__ == "__main__":
    run_variants(
        "pydantic_ai", "pydantic-ai", build, ["pydantic-ai-slim", "pydantic", "pydantic-core"]
    )
