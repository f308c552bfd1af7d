"""The OpenAI Agents SDK's Runner over a scripted Model: per-turn overhead, 5 parallel
calls a turn, tracing off.

Run by bench/agent_bench.py in its own virtual environment (openai-agents); prints one
JSON object: the median µs per turn around turn 10 and around turn 100.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import sys
import time
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

TURNS, CALLS, REPEATS = 120, 5, 7
EARLY, LATE = range(5, 15), range(95, 105)


class ScriptedModel(Model):
    def __init__(self, stamps: list[float]) -> None:
        self.stamps = stamps

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.stamps.append(time.perf_counter())
        turn = len(self.stamps) - 1
        output: list[Any]
        if turn >= TURNS:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            output = [
                ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"c{turn}_{j}",
                    name="echo",
                    arguments=json.dumps({"i": turn * CALLS + j}),
                )
                for j in range(CALLS)
            ]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
async def echo(i: int) -> int:
    """Return the number."""
    return i


async def one_run() -> tuple[float, float]:
    stamps: list[float] = []
    agent = Agent(name="bench", model=ScriptedModel(stamps), tools=[echo])
    result = await Runner.run(agent, "go", max_turns=TURNS + 5)
    assert result.final_output == "done"
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    return (
        statistics.median(durations[i] for i in EARLY) * 1e6,
        statistics.median(durations[i] for i in LATE) * 1e6,
    )


def main() -> None:
    set_tracing_disabled(True)
    asyncio.run(one_run())
    samples = [asyncio.run(one_run()) for _ in range(REPEATS)]
    early = statistics.median(s[0] for s in samples)
    late = statistics.median(s[1] for s in samples)
    json.dump({"early": early, "late": late}, sys.stdout)


if __name__ == "__main__":
    main()
