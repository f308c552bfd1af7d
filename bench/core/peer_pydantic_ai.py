"""pydantic-ai: `ToolManager.handle_call` over a `FunctionToolset`, as an agent run step does.

The manager is prepared once with `for_run_step` (an agent does that once per step);
each call is a fresh `ToolCallPart` with the model's raw JSON text, validated by
pydantic-core straight from the JSON and then run. Invalid calls raise
`ToolRetryError`, which the agent turns into a retry prompt for the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typed_tools
from harness import Case, excerpt, run_cases
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolRetryError
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage
from workloads import ALL_WORKLOADS, FILLER_NAMES


def describe(result: Any) -> tuple[str, str]:
    if isinstance(result, ToolRetryError):
        return "error", excerpt(result.tool_retry.model_response_str())
    return "ok", excerpt(result)


async def build() -> Sequence[Case]:
    # max_retries=1 is the Agent's default; a bare toolset would allow none.
    functions = [typed_tools.add, typed_tools.add_sync, typed_tools.schedule_meeting]
    toolset = FunctionToolset(functions, max_retries=1)
    for name in FILLER_NAMES:
        toolset.add_function(typed_tools.make_filler(name), name=name)
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = await ToolManager(toolset=toolset).for_run_step(ctx)

    cases: list[Case] = []
    for workload in ALL_WORKLOADS:

        async def call(name: str = workload.tool_name, text: str = workload.arguments) -> Any:
            try:
                return await manager.handle_call(ToolCallPart(name, text, tool_call_id="call_1"))
            except ToolRetryError as exc:
                return exc

        cases.append(Case(workload.key, "ToolManager.handle_call", call, describe))
    return cases


if __name__ == "__main__":
    run_cases(
        "pydantic_ai",
        "pydantic-ai ToolManager",
        build,
        ["pydantic-ai-slim", "pydantic", "pydantic-core"],
        ["Errors are ToolRetryError; their prompt text is rendered later, untimed."],
    )
