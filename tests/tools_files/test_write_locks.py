"""write_file, edit_file and apply_patch writing one file at once: no change reported done
is lost, whether one tool serves many calls or two tools race (each tool instance had its
own lock, so two different tools interleaved: the second read the old text and its write
dropped the first change)."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import pickle
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ToolContext, ToolLoader, ToolRegistry
from toolbridge.core.pathlocks import PathLocks
from toolbridge.security.workspace import Workspace
from toolbridge.tools._fs import WorkspaceTool
from toolbridge.tools.files import EditFileTool
from toolbridge.tools.patch import ApplyPatchTool

WAIT = 30.0  # only a real hang reaches it
START = "a\nb\n"
CALLS: dict[str, dict[str, Any]] = {
    "write_file": {"path": "f.txt", "content": "a\nb\nw\n"},
    "edit_file": {"path": "f.txt", "old_string": "a\n", "new_string": "A\n"},
    "apply_patch": {"patch": "*** Begin Patch\n*** Update File: f.txt\n@@\n-b\n+B\n*** End Patch"},
}


class _Watched(PathLocks):
    """The context's locks, telling the test when a second call asks for a lock."""

    def __init__(self) -> None:
        super().__init__()
        self.second_asked = threading.Event()
        self._asks = 0
        self._count = threading.Lock()

    @contextmanager
    def hold(self, paths: Iterable[Path]) -> Iterator[None]:
        with self._count:
            self._asks += 1
            if self._asks >= 2:
                self.second_asked.set()
        with super().hold(paths):
            yield


def _registry(root: Path, locks: PathLocks | None = None) -> ToolRegistry:
    root.mkdir()
    (root / "f.txt").write_text(START)
    if locks is None:
        return ToolLoader().registry(ToolContext(workspace=root))
    return ToolLoader().registry(ToolContext(workspace=root, file_locks=locks))


@pytest.mark.parametrize(("first", "second"), list(itertools.permutations(CALLS, 2)))
async def test_two_tools_writing_one_file_at_once_lose_no_change(
    tmp_path: Path, first: str, second: str
) -> None:
    serial = _registry(tmp_path / "serial")
    for name in (first, second):
        done = await serial.execute(name, CALLS[name])
        assert not done.is_error, done.text
    expected = (tmp_path / "serial" / "f.txt").read_text()

    locks = _Watched()
    registry = _registry(tmp_path / "raced", locks)
    tool = registry.get(first)
    assert isinstance(tool, WorkspaceTool)
    at_write, go_on = threading.Event(), threading.Event()
    write = tool.workspace.write_atomic

    def paused_write(real: Path, data: bytes) -> bool:
        """The first call has read the file and computed its change: it waits here."""
        at_write.set()
        if not go_on.wait(WAIT):
            raise TimeoutError("the test never let the first write go on")
        return write(real, data)

    tool.workspace.write_atomic = paused_write  # type: ignore[method-assign]
    first_call = asyncio.create_task(registry.execute(first, CALLS[first]))
    assert await asyncio.to_thread(at_write.wait, WAIT)
    second_call = asyncio.create_task(registry.execute(second, CALLS[second]))
    # Let the first write go on once the second call waits for the file's lock (or, were
    # there no shared lock, once it has finished: it read the old text and wrote).
    asked = asyncio.create_task(asyncio.to_thread(locks.second_asked.wait, WAIT))
    await asyncio.wait([second_call, asked], return_when=asyncio.FIRST_COMPLETED)
    go_on.set()
    locks.second_asked.set()
    results = [await first_call, await second_call]
    await asked

    assert [r.text for r in results if r.is_error] == []
    assert (tmp_path / "raced" / "f.txt").read_text() == expected
    assert locks.users((tmp_path / "raced" / "f.txt").resolve()) == 0


SAME_TOOL_CALLS = {
    "edit_file": lambda i: {
        "path": "s.txt",
        "old_string": "seed\n",
        "new_string": f"seed\nn{i:02d}\n",
    },
    "apply_patch": lambda i: {
        "patch": f"*** Begin Patch\n*** Update File: s.txt\n@@\n seed\n+n{i:02d}\n*** End Patch\n"
    },
}


@pytest.mark.parametrize("name", list(SAME_TOOL_CALLS))
async def test_many_calls_of_one_tool_at_once_lose_no_change_they_report_done(
    workspace: Path, name: str
) -> None:
    """Two calls at once both read the same text; the second write dropped the first
    (edit_file: 16 reported done, 5 were in the file; apply_patch: 12 of 16 reported
    'Applied' and 4 lines were in the file, as nanobot tests). A tool built by hand,
    as a shared tool or an MCP server serves calls at once."""
    tool = {"edit_file": EditFileTool, "apply_patch": ApplyPatchTool}[name](Workspace(workspace))
    registry = ToolRegistry([tool], context=ToolContext(workspace=workspace))
    (workspace / "s.txt").write_text("seed\n")
    count = 16
    results = await asyncio.gather(
        *(registry.execute(name, SAME_TOOL_CALLS[name](i)) for i in range(count))
    )
    done = [i for i, result in enumerate(results) if not result.is_error]
    lines = (workspace / "s.txt").read_text().splitlines()
    assert sorted(lines[1:]) == [f"n{i:02d}" for i in done]
    assert len(done) == count


def test_the_writing_tools_of_one_registry_share_locks_and_two_registries_do_not(
    tmp_path: Path,
) -> None:
    one, two = (ToolLoader().registry(ToolContext(workspace=tmp_path)) for _ in range(2))
    writers = ("write_file", "edit_file", "apply_patch")

    def locks_of(registry: ToolRegistry) -> set[int]:
        found = set()
        for name in writers:
            tool = registry.get(name)
            assert isinstance(tool, WorkspaceTool)
            found.add(id(tool.locks))
        return found

    assert locks_of(one) == {id(one.context.file_locks)}
    assert locks_of(two) == {id(two.context.file_locks)}
    assert one.context.file_locks is not two.context.file_locks


def test_locks_are_taken_in_one_order_so_overlapping_holders_never_deadlock(
    tmp_path: Path,
) -> None:
    locks = PathLocks()
    a, b = tmp_path / "a", tmp_path / "b"
    rounds = 200
    errors: list[BaseException] = []

    def worker(paths: list[Path]) -> None:
        try:
            for _ in range(rounds):
                with locks.hold(paths):
                    pass
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=([a, b],)),
        threading.Thread(target=worker, args=([b, a, b],)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
    assert errors == []
    assert locks.users(a) == locks.users(b) == 0


def test_a_copied_context_shares_its_locks_and_a_pickled_one_gets_its_own(
    tmp_path: Path,
) -> None:
    context = ToolContext(workspace=tmp_path)
    assert dataclasses.replace(context, session="s2").file_locks is context.file_locks
    assert copy.deepcopy(context).file_locks is context.file_locks
    elsewhere = pickle.loads(pickle.dumps(context))  # another process: a thread lock stays
    assert isinstance(elsewhere.file_locks, PathLocks)
    assert elsewhere.file_locks is not context.file_locks
    assert elsewhere == context  # the locks are no part of what a context is
