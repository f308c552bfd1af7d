"""`PathLocks`: one lock per file path, shared by the tools of one registry that write files.

`write_file`, `edit_file` and `apply_patch` read a file, compute its new content and
write it back. Two such calls on one file at once (a model's parallel calls, an MCP
server serving two clients) both read the same text, and the second write dropped the
first change, though both were reported done. Each tool instance had its own lock, so
two different tools still interleaved. The loader gives every tool it builds from one
`ToolContext` the same `PathLocks`; two registries never share one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PathLocks"]


@dataclass(slots=True)
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # calls holding or waiting for the lock; the entry goes at zero


class PathLocks:
    """Locks keyed by resolved path; a caller holds all of its paths at once.

    Thread locks, since the file tools do their work in worker threads. Paths are
    taken in sorted order, so two callers that need overlapping sets never wait on
    each other in a circle. An entry lives only while some caller uses it, so the
    table stays as small as the number of files being written at the moment.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[Path, _Entry] = {}

    @contextmanager
    def hold(self, paths: Iterable[Path]) -> Iterator[None]:
        """Hold the lock of every path in `paths` (resolved paths) for the `with` block."""
        ordered = sorted(set(paths))
        with self._guard:
            entries = [self._entries.setdefault(path, _Entry()) for path in ordered]
            for entry in entries:
                entry.users += 1
        taken: list[_Entry] = []
        try:
            for entry in entries:
                entry.lock.acquire()
                taken.append(entry)
            yield
        finally:
            for entry in reversed(taken):
                entry.lock.release()
            with self._guard:
                for path, entry in zip(ordered, entries, strict=True):
                    entry.users -= 1
                    if entry.users == 0:
                        del self._entries[path]

    # A copy of a context shares its locks (as `dataclasses.replace` does); another
    # process gets a table of its own, as a thread lock cannot cross one.
    def __copy__(self) -> PathLocks:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> PathLocks:
        return self

    def __reduce__(self) -> tuple[type[PathLocks], tuple[()]]:
        return (PathLocks, ())

    def users(self, path: Path) -> int:
        """How many callers hold or wait for the lock of `path` now (for tests and logs)."""
        with self._guard:
            entry = self._entries.get(path)
            return entry.users if entry is not None else 0
