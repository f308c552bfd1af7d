"""Finding and running ripgrep (``rg``) for the search engines, under one deadline.

ripgrep is looked for on PATH (or at a configured path) when a tool is built. It runs
with no config file (``--no-config``), an empty environment and the workspace root as
its working directory, and is killed when the call's deadline passes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

__all__ = ["deadline_at", "find_ripgrep", "ripgrep_accepts", "run_ripgrep"]


def find_ripgrep(configured: str | None = None) -> str | None:
    """The path of the ripgrep executable: `configured` (a path or a name on PATH), else
    ``rg`` on PATH; None when there is none."""
    name = os.path.expanduser(configured) if configured else "rg"
    return shutil.which(name)


async def ripgrep_accepts(rg: str, pattern: str, flags: Sequence[str]) -> bool:
    """Whether ripgrep's regex engine accepts `pattern` (no look-around, no ``\\Z`` ...)."""
    process = await asyncio.create_subprocess_exec(
        rg, "--no-config", "--quiet", *flags, "--regexp", pattern, "-",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, env={},
    )  # fmt: skip
    return await process.wait() != 2


@asynccontextmanager
async def run_ripgrep(
    rg: str, arguments: Sequence[str], cwd: Path, stop: float
) -> AsyncIterator[asyncio.StreamReader]:
    """Start ``rg arguments`` in `cwd`; yield its stdout; kill it on exit if it still runs.

    The caller reads under ``asyncio.timeout_at`` of `stop` (see `deadline_at`).
    """
    # --no-messages: a file that vanished or cannot be read is skipped without a word,
    # as the Python engine does, and stderr cannot fill up and stall the process.
    process = await asyncio.create_subprocess_exec(
        rg, "--no-config", "--no-messages", *arguments, cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env={}, limit=1 << 24,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        yield process.stdout
    finally:
        # Kill only a run that was cut short: once its output has ended, rg has exited
        # or is exiting, and kill() would reap it behind the child watcher's back
        # (Popen.send_signal polls first), which then warns and reports exit 255.
        if process.returncode is None and not process.stdout.at_eof():
            process.kill()
        await process.wait()


def deadline_at(stop: float) -> float:
    """The event-loop time of the `time.monotonic` instant `stop`, for ``timeout_at``."""
    return asyncio.get_running_loop().time() + (stop - time.monotonic())
