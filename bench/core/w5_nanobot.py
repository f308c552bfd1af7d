"""W5 nanobot: `execute_tool_calls(..., concurrent=True)`, the runner's batch path.

    bench/.venvs/nanobot/bin/python bench/core/w5_nanobot.py [repetitions] [sizes]

`AgentRunner._run_core` hands a model response's tool calls to
`nanobot.agent.tools.execution.execute_tool_calls` with `concurrent=spec.concurrent_tools`
(the agent loop sets it to True). That function partitions the calls into batches of
consecutive concurrency-safe tools, gathers each batch, and for every call checks the
repeated-lookup guard, resolves, casts and validates through `ToolRegistry.prepare_call`,
calls the hooks and builds the event record. It is called here with exactly the
arguments the runner passes, a default `AgentHook` and a fresh hook context; no model.
The tool is a `Tool` subclass marked `read_only` (nanobot's `concurrency_safe`), its
arguments the dict the provider layer decodes from the model's JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nanobot.agent.hook import AgentHook, AgentHookContext
from nanobot.agent.tools.base import Tool, tool_parameters
from nanobot.agent.tools.execution import execute_tool_calls
from nanobot.agent.tools.registry import ToolRegistry
from nanobot.providers.base import ToolCallRequest
from w5_harness import (
    ARGUMENTS,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    Batch,
    Variant,
    nap,
    run_variants,
    timed,
)

NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "required": []}


@tool_parameters(NO_PARAMETERS)
class NapTool(Tool):
    name = TOOL_NAME
    description = TOOL_DESCRIPTION

    @property
    def read_only(self) -> bool:
        return True

    async def execute(self, **kwargs: Any) -> Any:
        return await nap()


async def build() -> Sequence[Variant]:
    registry = ToolRegistry()
    registry.register(NapTool())
    hook = AgentHook()

    async def make(size: int) -> Batch:
        calls = [
            ToolCallRequest(id=f"call_{i}", name=TOOL_NAME, arguments=json.loads(ARGUMENTS))
            for i in range(size)
        ]

        async def run() -> Sequence[Any]:
            results, _events = await execute_tool_calls(
                registry,
                calls,
                concurrent=True,
                external_lookup_counts={},
                workspace_violation_counts={},
                hook=hook,
                context=AgentHookContext(iteration=0, messages=[]),
                model_messages=[],
                compacted_tool_results=set(),
            )
            return results

        return timed(run)

    return [Variant("execute_tool_calls(concurrent=True)", make)]


if __name__ == "__main__":
    run_variants("nanobot", "nanobot", build, ["nanobot-ai"])
