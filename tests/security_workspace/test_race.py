"""The TOCTOU swap: a thread keeps swapping a directory for a symlink to outside while
reads, writes and listings run. Whatever the interleaving, nothing outside is touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolbridge.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.security.workspace import Workspace

ROUNDS = 3000


def _claim(path: Path, action: Callable[[], None]) -> None:
    """Run `action`, first clearing a directory a concurrent write made at `path`."""
    while True:
        try:
            action()
            return
        except OSError:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def swapping(workspace: Path, outside: Path) -> Iterator[Counter[str]]:
    """Swap workspace/d between a real directory and a symlink to outside/d, until the end."""
    (outside / "d").mkdir()
    (outside / "d" / "f.txt").write_text("OUTSIDE-SECRET")
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside")
    stop = threading.Event()
    counts: Counter[str] = Counter()

    def swap() -> None:
        link, parked = workspace / "d", workspace / "d-parked"
        while not stop.is_set():
            os.rename(link, parked)
            _claim(link, lambda: os.symlink(outside / "d", link))
            counts["to_symlink"] += 1
            os.unlink(link)
            _claim(link, lambda: os.rename(parked, link))
            counts["to_directory"] += 1

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield counts
    finally:
        stop.set()
        thread.join()


def test_reads_never_see_outside_content(guard: Workspace, swapping: Counter[str]) -> None:
    outcomes: Counter[str] = Counter()
    for _ in range(ROUNDS):
        try:
            with guard.open_read(guard.resolve("d/f.txt")) as file:
                outcomes[file.read().decode()] += 1
        except WorkspaceViolation:
            outcomes["violation"] += 1
        except ToolExecutionError:
            outcomes["error"] += 1
    assert "OUTSIDE-SECRET" not in outcomes
    assert sum(outcomes.values()) == ROUNDS
    assert outcomes["inside"] > 0
    assert swapping["to_symlink"] > 0


def test_writes_never_land_outside(guard: Workspace, outside: Path, swapping: Counter[str]) -> None:
    written = 0
    for index in range(ROUNDS // 10):
        try:
            guard.write_atomic(guard.resolve(f"d/new-{index % 7}.txt"), b"payload")
            written += 1
        except (WorkspaceViolation, ToolExecutionError):
            pass
    assert sorted(p.name for p in (outside / "d").iterdir()) == ["f.txt"]
    assert (outside / "d" / "f.txt").read_text() == "OUTSIDE-SECRET"
    assert written > 0
    assert swapping["to_symlink"] > 0


def test_walks_never_list_outside_entries(
    guard: Workspace, outside: Path, swapping: Counter[str]
) -> None:
    (outside / "d" / "only-outside.txt").write_text("x")
    seen: set[str] = set()
    for _ in range(ROUNDS // 3):
        with contextlib.suppress(WorkspaceViolation, ToolExecutionError):
            seen.update(e.path.name for e in guard.walk(guard.root, max_depth=3))
    assert "only-outside.txt" not in seen
    assert "f.txt" in seen
    assert swapping["to_symlink"] > 0
