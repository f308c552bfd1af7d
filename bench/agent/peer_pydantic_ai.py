"""pydantic-ai's Agent over a FunctionModel: per-turn overhead, 5 parallel calls a turn.

Run by bench/agent_bench.py in its own virtual environment (pydantic-ai-slim); prints
one JSON object: the median µs per turn around turn 10 and around turn 100.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import sys
import time
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

TURNS, CALLS, REPEATS = 120, 5, 7
EARLY, LATE = range(5, 15), range(95, 105)


async def one_run() -> tuple[float, float]:
    stamps: list[float] = []

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        stamps.append(time.perf_counter())
        turn = len(stamps) - 1
        if turn >= TURNS:
            return ModelResponse(parts=[TextPart("done")])
        parts = [
            ToolCallPart("echo", json.dumps({"i": turn * CALLS + j}), f"c{turn}_{j}")
            for j in range(CALLS)
        ]
        return ModelResponse(parts=parts)

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    async def echo(i: int) -> int:
        """Return the number."""
        return i

    result = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
    assert result.output == "done"
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    return (
        statistics.median(durations[i] for i in EARLY) * 1e6,
        statistics.median(durations[i] for i in LATE) * 1e6,
    )


def main() -> None:
    asyncio.run(one_run())
    samples = [asyncio.run(one_run()) for _ in range(REPEATS)]
    early = statistics.median(s[0] for s in samples)
    late = statistics.median(s[1] for s in samples)
    json.dump({"early": early, "late": late}, sys.stdout)


if __name__ == "__main__":
    main()
