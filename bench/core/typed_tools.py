"""The benchmark's tools as typed Python functions, shared by every pydantic-based peer.

Async for W1-W4, so they compare the preparation cost and nothing else; `add_sync` (W1s)
is the same `add` as a plain function, timing each peer's path for sync tools (a worker
thread in toolbridge by default, or inline on the loop with ``@tool(inline=True)``).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from datetime import datetime

from pydantic import BaseModel


class Priority(enum.Enum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


class Attendee(BaseModel):
    name: str
    email: str


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_sync(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def schedule_meeting(
    title: str, start: datetime, priority: Priority, attendees: list[Attendee]
) -> str:
    """Schedule a meeting with the given attendees."""
    return f"{title}: {len(attendees)} attendees at {start.isoformat()} ({priority.value})"


def make_filler(name: str) -> Callable[[str], Awaitable[str]]:
    """A distinct one-parameter tool called `name` (only its name matters here)."""

    async def filler(query: str) -> str:
        return query

    filler.__name__ = filler.__qualname__ = name
    filler.__doc__ = f"The {name.replace('_', ' ')} tool."
    return filler
