"""Waiting for what a journal test can observe, never for a fixed delay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(check: Callable[[], bool], failure: str) -> None:
    """Wait until `check()` holds (30 s: a bound against hangs, not a timing assertion)."""
    end = asyncio.get_running_loop().time() + 30
    while not check():
        assert asyncio.get_running_loop().time() < end, failure
        await asyncio.sleep(0.02)
