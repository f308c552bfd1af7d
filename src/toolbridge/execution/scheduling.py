"""`ExclusiveGate`: lets shared work overlap and gives exclusive work the executor alone.

A fair (first come, first served) shared/exclusive lock on one event loop. The
executor takes it once per group of calls, not per call, and the uncontended path
never awaits.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["ExclusiveGate"]


class ExclusiveGate:
    """Exclusive holders wait for every shared holder to leave and block new ones."""

    def __init__(self) -> None:
        self._shared = 0
        self._exclusive = False
        self._waiters: deque[tuple[bool, asyncio.Future[None]]] = deque()

    def try_enter(self, exclusive: bool) -> bool:
        """Enter without waiting if nobody waits and the gate is free; the fast path."""
        if not self._waiters and self._free_for(exclusive):
            self._enter(exclusive)
            return True
        return False

    async def acquire(self, exclusive: bool) -> None:
        if self.try_enter(exclusive):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((exclusive, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(exclusive)  # admitted just as we were cancelled
            else:
                self._waiters.remove((exclusive, waiter))
            raise

    def release(self, exclusive: bool) -> None:
        if exclusive:
            self._exclusive = False
        else:
            self._shared -= 1
        while self._waiters:
            exclusive_waiter, waiter = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
                continue
            if not self._free_for(exclusive_waiter):
                break
            self._waiters.popleft()
            self._enter(exclusive_waiter)
            waiter.set_result(None)

    def _free_for(self, exclusive: bool) -> bool:
        return not self._exclusive and (not exclusive or self._shared == 0)

    def _enter(self, exclusive: bool) -> None:
        if exclusive:
            self._exclusive = True
        else:
            self._shared += 1
