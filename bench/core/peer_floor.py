"""The floor: the least work any tool call needs, to put every other number in scale.

`json.loads` + a dict lookup + one bare await of a plain async function, with and
without one compiled jsonschema-rs validation (`is_valid`, which gates the call).
No casting, so with validation W1's string numbers are rejected, like a peer that
cannot cast; the cost of that rejection is what is timed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import jsonschema_rs
from harness import Case, excerpt, run_cases
from workloads import (
    ADD,
    ADD_SCHEMA,
    FILLER_NAMES,
    FILLER_SCHEMA,
    SCHEDULE,
    SCHEDULE_SCHEMA,
    WORKLOADS,
)

ToolFunction = Callable[..., Awaitable[Any]]


async def add(a: Any, b: Any) -> Any:
    return a + b


async def schedule_meeting(title: str, start: str, priority: str, attendees: list[Any]) -> str:
    return f"{title}: {len(attendees)} attendees at {start} ({priority})"


async def filler(query: str) -> str:
    return query


def describe(result: Any) -> tuple[str, str]:
    text = str(result)
    return ("error" if text.startswith("Error") else "ok"), excerpt(text)


async def build() -> Sequence[Case]:
    tools: dict[str, tuple[ToolFunction, Any]] = {
        ADD: (add, jsonschema_rs.validator_for(ADD_SCHEMA)),
        SCHEDULE: (schedule_meeting, jsonschema_rs.validator_for(SCHEDULE_SCHEMA)),
    }
    filler_validator = jsonschema_rs.validator_for(FILLER_SCHEMA)
    tools |= {name: (filler, filler_validator) for name in FILLER_NAMES}

    async def bare(name: str, text: str) -> Any:
        args = json.loads(text)
        entry = tools.get(name)
        if entry is None:
            return "Error: unknown tool"
        try:
            return await entry[0](**args)
        except TypeError as exc:
            return f"Error: {exc}"

    async def validated(name: str, text: str) -> Any:
        args = json.loads(text)
        entry = tools.get(name)
        if entry is None:
            return "Error: unknown tool"
        if not entry[1].is_valid(args):
            return "Error: invalid arguments"
        return await entry[0](**args)

    cases: list[Case] = []
    for workload in WORKLOADS:
        name, text = workload.tool_name, workload.arguments

        async def call_bare(name: str = name, text: str = text) -> Any:
            return await bare(name, text)

        async def call_validated(name: str = name, text: str = text) -> Any:
            return await validated(name, text)

        cases.append(Case(workload.key, "json+lookup+await", call_bare, describe))
        cases.append(Case(workload.key, "+ jsonschema-rs", call_validated, describe))
    return cases


if __name__ == "__main__":
    run_cases(
        "floor",
        "floor",
        build,
        ["jsonschema-rs"],
        ['The floor never casts: W1 gives "12" ("1" + "2") bare, an error when validated.'],
    )
