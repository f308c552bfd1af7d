"""Filling a real small disk (the `small_disk` fixture's tmpfs) from inside a tool."""

from __future__ import annotations

import contextlib
from pathlib import Path


def fill_up(filler: Path) -> None:
    """Write `filler` until the disk it is on has no room left."""
    with filler.open("ab", buffering=0) as file, contextlib.suppress(OSError):
        while True:
            file.write(b"x" * 4096)
