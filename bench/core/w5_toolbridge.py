"""W5 toolbridge: `ToolExecutor.run` over N `ToolCallRequest`s with raw JSON arguments.

    bench/.venvs/toolbridge/bin/python bench/core/w5_toolbridge.py [repetitions] [sizes]

The tool is registered `read_only=True` (concurrency-safe), so the executor plans the
batch as one concurrent run; the default policy (tracing on, OpenTelemetry API only)
and tracing off are both timed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from w5_harness import ARGUMENTS, TOOL_NAME, Batch, Variant, nap, run_variants, timed

from toolbridge import ToolCallRequest, ToolContext, ToolRegistry, tool
from toolbridge.execution.executor import ExecutionPolicy, ToolExecutor

_WORKSPACE = tempfile.TemporaryDirectory()


def build_registry() -> ToolRegistry:
    context = ToolContext(workspace=Path(_WORKSPACE.name))
    return ToolRegistry([tool(name=TOOL_NAME, read_only=True)(nap)], context=context)


async def build() -> Sequence[Variant]:
    registry = build_registry()

    def executor_variant(policy: ExecutionPolicy | None) -> Variant:
        executor = ToolExecutor(registry) if policy is None else ToolExecutor(registry, policy)

        async def make(size: int) -> Batch:
            calls = [ToolCallRequest(f"call_{i}", TOOL_NAME, ARGUMENTS) for i in range(size)]
            return timed(lambda: executor.run(calls))

        name = "ToolExecutor.run" + ("" if policy is None else ", tracing off")
        return Variant(name, make)

    return [executor_variant(None), executor_variant(ExecutionPolicy(tracing=False))]


if __name__ == "__main__":
    run_variants(
        "toolbridge",
        "toolbridge",
        build,
        ["toolbridge", "pydantic", "pydantic-core"],
    )
