"""Tools and a runner factory shared by the agent tests and the resume subprocess."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolbridge import ExecutionPolicy, ToolContext, ToolRegistry, tool
from toolbridge.agent import AgentRunner, ModelAdapter


@tool(read_only=True)
async def get_weather(city: str) -> str:
    """The weather in a city."""
    await asyncio.sleep(0)
    return f"Sunny in {city}"


@tool(requires_approval=True)
def write_note(ctx: ToolContext, name: str, text: str) -> str:
    """Write a note file into the workspace (needs approval)."""
    path = Path(ctx.workspace) / name
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text + "\n")
    return f"wrote {len(text)} characters to {name}"


def registry(workspace: Path) -> ToolRegistry:
    return ToolRegistry([get_weather, write_note], context=ToolContext(workspace=workspace))


def runner(model: ModelAdapter, workspace: Path, **options: Any) -> AgentRunner:
    options.setdefault("policy", ExecutionPolicy(persist_results=False))
    return AgentRunner(model, registry(workspace), instructions="You help.", **options)
