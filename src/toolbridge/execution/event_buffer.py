"""`EventBuffer`: a batch's events on their way to a reader that may fall behind.

Every start and finish is kept (two per call); of each call's progress, at most
`MAX_PENDING_PROGRESS` reports not yet read, the oldest giving way (the reader sees the
latest, in order): a tool that reports in a tight loop cannot fill memory while its
reader is slow. The same bound a Ray worker keeps, so a stream reads the same either way.
"""

from __future__ import annotations

import asyncio
from collections import deque

from toolbridge.execution.outcomes import EventType, ToolEvent
from toolbridge.execution.progress import MAX_PENDING_PROGRESS

__all__ = ["EventBuffer"]


class EventBuffer:
    """Events `put` by a batch's listeners, taken in order by `get`; `end` marks the last
    (after it, `get` gives None)."""

    __slots__ = ("_events", "_progress", "_ready")

    def __init__(self) -> None:
        self._events: deque[ToolEvent | None] = deque()
        self._progress: dict[int, int] = {}  # id of a call -> its progress reports held
        self._ready = asyncio.Event()

    def put(self, event: ToolEvent) -> None:
        """Hold `event` for the reader (a listener: called on the loop)."""
        if event.type is EventType.CALL_PROGRESS:
            call = id(event.call)
            held = self._progress.get(call, 0)
            if held >= MAX_PENDING_PROGRESS:
                self._drop_oldest_progress(event)
            else:
                self._progress[call] = held + 1
        self._events.append(event)
        self._ready.set()

    def end(self) -> None:
        """No event comes after those put so far."""
        self._events.append(None)
        self._ready.set()

    async def get(self) -> ToolEvent | None:
        """The next event, waiting for one; None once `end` was reached."""
        while not self._events:
            self._ready.clear()
            await self._ready.wait()
        event = self._events.popleft()
        if event is not None and event.type is EventType.CALL_PROGRESS:
            call = id(event.call)
            held = self._progress[call] - 1
            if held:
                self._progress[call] = held
            else:
                del self._progress[call]
        return event

    def _drop_oldest_progress(self, newer: ToolEvent) -> None:
        for position, event in enumerate(self._events):
            if (
                event is not None
                and event.call is newer.call
                and event.type is EventType.CALL_PROGRESS
            ):
                del self._events[position]
                return
