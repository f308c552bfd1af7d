"""The tool the Ray bench runs, importable on the caller and on Ray workers."""

from __future__ import annotations

import asyncio
import time

from toolbridge import Tool, ToolContext, tool


@tool(read_only=True)
async def wait_5ms(n: int) -> int:
    """Sleep 5 ms (an I/O-bound call), then answer."""
    await asyncio.sleep(0.005)
    return n


@tool(read_only=True)
def wait_5ms_sync(n: int) -> int:
    """Sleep 5 ms in one of the worker's threads (blocking code), then answer."""
    time.sleep(0.005)
    return n


class BareWorker:
    """The same work as a bare Ray actor method: the floor RayBackend is compared with."""

    async def wait(self, n: int) -> int:
        await asyncio.sleep(0.005)
        return n

    async def wait_sync(self, n: int) -> int:
        await asyncio.to_thread(time.sleep, 0.005)
        return n


def build(ctx: ToolContext) -> list[Tool]:
    return [wait_5ms, wait_5ms_sync]
