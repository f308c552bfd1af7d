"""The TOCTOU swap: a thread keeps swapping a directory for a symlink to outside while
reads, writes and listings run. Whatever the interleaving, nothing outside is touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolbridge.core.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.security.workspace import Workspace

ROUNDS = 3000
WAIT = 60.0  # seconds of trying before "nothing ever landed in the swap window" fails


def rounds_until(minimum: int, landed: Callable[[], bool]) -> Iterator[int]:
    """Round numbers: at least `minimum`, then on until `landed()` (some attempt met the
    directory swapped for the link), which must happen within WAIT seconds: without it the
    test would pass without testing the race."""
    end = time.monotonic() + WAIT
    index = 0
    while index < minimum or not landed():
        assert time.monotonic() < end, "no attempt ever met the swapped link"
        yield index
        index += 1


def _claim(path: Path, action: Callable[[], None]) -> None:
    """Run `action`, first clearing a directory a concurrent write made at `path`."""
    while True:
        try:
            action()
            return
        except OSError:
            shutil.rmtree(path, ignore_errors=True)


class Swapper:
    """Swaps workspace/d between a real directory and a symlink to outside/d in a thread."""

    def __init__(self, workspace: Path, outside: Path) -> None:
        self.link, self.parked, self.target = workspace / "d", workspace / "d-parked", outside / "d"
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            os.rename(self.link, self.parked)
            _claim(self.link, lambda: os.symlink(self.target, self.link))
            os.unlink(self.link)
            _claim(self.link, lambda: os.rename(self.parked, self.link))
            self.swaps += 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop swapping; d is a real directory again afterwards."""
        self._stop.set()
        self._thread.join()


@pytest.fixture
def swapping(workspace: Path, outside: Path) -> Iterator[Swapper]:
    (outside / "d").mkdir()
    (outside / "d" / "f.txt").write_text("OUTSIDE-SECRET")
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside")
    swapper = Swapper(workspace, outside)
    swapper.start()
    try:
        yield swapper
    finally:
        swapper.stop()


def test_reads_never_see_outside_content(guard: Workspace, swapping: Swapper) -> None:
    outcomes: Counter[str] = Counter()
    # a refusal for the link: a read landed while d pointed outside
    for _ in rounds_until(ROUNDS, lambda: outcomes["violation"] > 0):
        try:
            with guard.open_read(guard.resolve("d/f.txt")) as file:
                outcomes[file.read().decode()] += 1
        except WorkspaceViolation:
            outcomes["violation"] += 1
        except ToolExecutionError:
            outcomes["error"] += 1
    swapping.stop()
    assert "OUTSIDE-SECRET" not in outcomes
    assert set(outcomes) <= {"inside", "violation", "error"}, outcomes
    assert outcomes["violation"] > 0  # some reads met the link (rounds_until saw to it)
    with guard.open_read(guard.resolve("d/f.txt")) as file:  # the guard still reads inside
        assert file.read() == b"inside"


def test_writes_never_land_outside(guard: Workspace, outside: Path, swapping: Swapper) -> None:
    attempts = Counter[str]()
    for index in rounds_until(ROUNDS // 10, lambda: attempts["WorkspaceViolation"] > 0):
        try:
            guard.write_atomic(guard.resolve(f"d/new-{index % 7}.txt"), b"payload")
            attempts["written"] += 1
        except (WorkspaceViolation, ToolExecutionError) as exc:
            attempts[type(exc).__name__] += 1
    swapping.stop()
    assert sorted(p.name for p in (outside / "d").iterdir()) == ["f.txt"]
    assert (outside / "d" / "f.txt").read_text() == "OUTSIDE-SECRET"
    assert attempts["WorkspaceViolation"] > 0  # some writes met the link
    guard.write_atomic(guard.resolve("d/after.txt"), b"payload")
    assert (guard.root / "d" / "after.txt").read_bytes() == b"payload"


def test_walks_never_list_outside_entries(
    guard: Workspace, outside: Path, swapping: Swapper
) -> None:
    (outside / "d" / "only-outside.txt").write_text("x")
    seen: set[str] = set()
    met = Counter[str]()  # walks that found d as the link (reported, not followed) or lost it
    for _ in rounds_until(ROUNDS // 3, lambda: met["link"] > 0):
        with contextlib.suppress(WorkspaceViolation, ToolExecutionError):
            entries = list(guard.walk(guard.root, max_depth=3))
            seen.update(e.path.name for e in entries)
            met["link"] += any(
                e.path.name == "d" and (e.kind == "symlink" or e.error) for e in entries
            )
    swapping.stop()
    assert "only-outside.txt" not in seen
    assert met["link"] > 0  # some walks met the link
    assert "f.txt" in {e.path.name for e in guard.walk(guard.root, max_depth=3)}
