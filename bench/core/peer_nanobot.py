"""nanobot (nanobot-ai): `ToolRegistry.execute(name, raw_json)` over `@tool_parameters` tools.

The tools are written the way nanobot's built-ins are: a `Tool` subclass with a
hand-written JSON Schema (nanobot derives no schema from type hints). nanobot casts
and validates against that schema and passes plain JSON values to `execute` (no
datetime, enum or model objects). Its validator ignores `format`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness import Case, excerpt, run_cases
from nanobot.agent.tools.base import Tool, tool_parameters
from nanobot.agent.tools.registry import ToolRegistry
from workloads import (
    ADD,
    ADD_SCHEMA,
    FILLER_NAMES,
    FILLER_SCHEMA,
    SCHEDULE,
    SCHEDULE_SCHEMA,
    WORKLOADS,
)


@tool_parameters(ADD_SCHEMA)
class AddTool(Tool):
    name = ADD
    description = "Add two integers."

    async def execute(self, **kwargs: Any) -> Any:
        return kwargs["a"] + kwargs["b"]


@tool_parameters(SCHEDULE_SCHEMA)
class ScheduleMeetingTool(Tool):
    name = SCHEDULE
    description = "Schedule a meeting with the given attendees."

    async def execute(self, **kwargs: Any) -> Any:
        return (
            f"{kwargs['title']}: {len(kwargs['attendees'])} attendees at {kwargs['start']} "
            f"({kwargs['priority']})"
        )


@tool_parameters(FILLER_SCHEMA)
class FillerTool(Tool):
    description = "A filler tool."

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def execute(self, **kwargs: Any) -> Any:
        return kwargs["query"]


def describe(result: Any) -> tuple[str, str]:
    return ("error" if getattr(result, "is_error", False) else "ok"), excerpt(result)


async def build() -> Sequence[Case]:
    registry = ToolRegistry()
    registry.register(AddTool())
    registry.register(ScheduleMeetingTool())
    for name in FILLER_NAMES:
        registry.register(FillerTool(name))

    cases: list[Case] = []
    for workload in WORKLOADS:

        async def call(name: str = workload.tool_name, text: str = workload.arguments) -> Any:
            return await registry.execute(name, text)

        cases.append(Case(workload.key, "ToolRegistry.execute", call, describe))
    return cases


if __name__ == "__main__":
    run_cases("nanobot", "nanobot ToolRegistry.execute", build, ["nanobot-ai"])
