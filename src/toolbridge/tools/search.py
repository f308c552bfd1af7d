"""Search tools: glob finds paths by name, grep finds lines by regular expression.

Both walk the workspace through the guard, never following symlinks, with caps on
depth, entries visited and results. grep runs the regex in a separate worker process
(`toolbridge.grep_worker`) that is killed at a deadline, because a catastrophic
pattern cannot be stopped inside this process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any

from toolbridge import grep_worker
from toolbridge.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.fs import SKIPPED_DIRS, WorkspaceTool, decode_text, human_size, require_directory
from toolbridge.tool import tool_parameters

__all__ = ["GlobTool", "GrepTool"]

logger = logging.getLogger(__name__)

MAX_WALK_DEPTH = 32
MAX_WALK_ENTRIES = 100_000
_WORKER = Path(grep_worker.__file__)

_PATH_PARAMETER = {
    "type": "string",
    "minLength": 1,
    "default": ".",
    "description": "Directory to search, relative to the workspace root (default '.').",
}
_SKIPPED_NOTE = ", ".join(sorted(SKIPPED_DIRS))


def pattern_parts(pattern: str) -> tuple[str, ...]:
    """Split a relative glob pattern into path segments, or say why it is not one."""
    if pattern.startswith(("/", "~")):
        raise ToolExecutionError(
            f"the pattern {pattern!r} is absolute; patterns are relative to path",
            hint="Use a relative pattern like '**/*.py', and choose the directory with path.",
        )
    parts: list[str] = []
    for part in pattern.split("/"):
        if part == "..":
            raise ToolExecutionError(
                f"the pattern {pattern!r} contains '..'",
                hint="Choose the directory to search with path instead of '..' in the pattern.",
            )
        if part in ("", ".") or (part == "**" and parts and parts[-1] == "**"):
            continue
        parts.append(part)
    if not parts:
        raise ToolExecutionError(
            f"the pattern {pattern!r} matches nothing",
            hint="Give a pattern such as '*.md' or 'src/**/*.py'.",
        )
    return tuple(parts)


def glob_match(parts: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether the path segments match the pattern segments (``**`` spans any depth).

    Each segment is matched by `fnmatchcase`, and the walk over segments is memoised,
    so the cost stays polynomial whatever the pattern.
    """

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(parts):
            return j == len(path)
        if parts[i] == "**":
            return match(i + 1, j) or (j < len(path) and match(i, j + 1))
        return j < len(path) and fnmatchcase(path[j], parts[i]) and match(i + 1, j + 1)

    return match(0, 0)


def _walk_depth(parts: tuple[str, ...]) -> int:
    return MAX_WALK_DEPTH if "**" in parts else len(parts)


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Glob relative to path: '*' and '?' within a name, '**' "
                "across directories, e.g. '**/*.py' or 'docs/*.md'.",
            },
            "path": _PATH_PARAMETER,
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5000,
                "default": 200,
                "description": "Stop after this many matches.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
)
class GlobTool(WorkspaceTool):
    """Find files and directories whose path matches a glob pattern."""

    name = "glob"
    description = (
        "Find files and directories in the workspace by glob pattern ('**/*.py'). Returns "
        "paths relative to the workspace root, sorted; directories end with '/'. Symlinks "
        f"are not followed; {_SKIPPED_NOTE} are not searched."
    )
    read_only = True

    async def run(self, **kwargs: Any) -> str:
        return await asyncio.to_thread(
            self._glob, kwargs["pattern"], kwargs.get("path", "."), kwargs.get("max_results", 200)
        )

    def _glob(self, pattern: str, path: str, max_results: int) -> str:
        parts = pattern_parts(pattern)
        base = self.workspace.resolve(path)
        require_directory(base, self.workspace.relative(base))
        found: list[str] = []
        note = ""
        walk = self.workspace.walk(base, max_depth=_walk_depth(parts), skip_dirs=SKIPPED_DIRS)
        try:
            for visited, entry in enumerate(walk, 1):
                if visited > MAX_WALK_ENTRIES:
                    note = f"… stopped after visiting {MAX_WALK_ENTRIES} entries; narrow path"
                    break
                if not glob_match(parts, entry.path.relative_to(base).parts):
                    continue
                if len(found) == max_results:
                    note = f"… stopped at {max_results} matches; narrow the pattern or path"
                    break
                shown = self.workspace.relative(entry.path)
                found.append(shown + "/" if entry.kind == "dir" else shown)
        finally:
            walk.close()
        if not found:
            return f"No paths match {pattern!r} under {self.workspace.relative(base)}." + (
                f"\n{note}" if note else ""
            )
        return "\n".join([*found, note] if note else found)


@dataclass(slots=True)
class _Search:
    """What one grep run found and skipped, filled in by the reader and the feeder."""

    matches: list[tuple[str, int, str]] = field(default_factory=list)
    searched: int = 0
    skipped_binary: int = 0
    skipped_large: int = 0
    skipped_unreadable: int = 0
    visited: int = 0  # entries met by the walk for candidate files
    timed_out: bool = False  # the deadline passed: results are incomplete
    walk_timed_out: bool = False  # ... already while walking, so nothing was searched


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2000,
                "description": "Python regular expression, searched in each line.",
            },
            "path": {
                **_PATH_PARAMETER,
                "description": "File or directory to search, relative to the workspace "
                "root (default '.').",
            },
            "include": {
                "type": "string",
                "minLength": 1,
                "description": "Only search files matching this glob: a name pattern like "
                "'*.py', or a path pattern like 'src/**/*.py'.",
            },
            "ignore_case": {"type": "boolean", "default": False},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "default": 100,
                "description": "Stop after this many matching lines.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
)
class GrepTool(WorkspaceTool):
    """Search file contents by regular expression, with a deadline and result caps."""

    name = "grep"
    description = (
        "Search text files in the workspace for lines matching a Python regular expression. "
        "Returns 'path:line: text' per match. Binary files, files over 5 MB, symlinks and "
        f"{_SKIPPED_NOTE} are skipped. The search stops after 10 seconds."
    )
    read_only = True

    deadline = 10.0  # seconds for the whole search: walking, reading and matching
    max_file_bytes = 5 * 1024 * 1024
    max_files = 20_000
    max_line_chars = 300
    batch_bytes = 1 << 20

    async def run(self, **kwargs: Any) -> str:
        return await self._grep(
            kwargs["pattern"],
            kwargs.get("path", "."),
            kwargs.get("include"),
            kwargs.get("ignore_case", False),
            kwargs.get("max_results", 100),
        )

    async def _grep(
        self, pattern: str, path: str, include: str | None, ignore_case: bool, max_results: int
    ) -> str:
        try:
            re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolExecutionError(
                f"the pattern {pattern!r} is not a valid regular expression: {exc}",
                hint="Use Python re syntax; escape special characters such as ( [ . * with "
                "a backslash to match them literally.",
            ) from None
        include_parts = pattern_parts(include) if include else None
        search = _Search()
        # One deadline for everything: the walk and the reads (threads, which cannot be
        # cancelled) check it themselves; the worker runs under asyncio.timeout_at.
        stop = time.monotonic() + self.deadline
        files, base = await asyncio.to_thread(self._candidates, path, include_parts, search, stop)
        request = {
            "pattern": pattern,
            "ignore_case": ignore_case,
            "max_matches": max_results,
            "max_chars": self.max_line_chars,
        }
        if files and not search.walk_timed_out:
            await self._run_worker(request, files, search, stop)
        return self._report(search, pattern, base, max_results, len(files))

    def _candidates(
        self, path: str, include: tuple[str, ...] | None, search: _Search, stop: float
    ) -> tuple[list[tuple[Path, int]], str]:
        real = self.workspace.resolve(path)
        shown = self.workspace.relative(real)
        if real.is_file():
            return [(real, 0)], shown
        require_directory(real, shown)
        files: list[tuple[Path, int]] = []
        walk = self.workspace.walk(real, max_depth=MAX_WALK_DEPTH, skip_dirs=SKIPPED_DIRS)
        try:
            for visited, entry in enumerate(walk, 1):
                search.visited = visited
                if time.monotonic() >= stop:
                    search.timed_out = search.walk_timed_out = True
                    break
                if visited > MAX_WALK_ENTRIES or len(files) == self.max_files:
                    break
                if entry.kind != "file" or not _included(include, entry.path, real):
                    continue
                if entry.size > self.max_file_bytes:
                    search.skipped_large += 1
                    continue
                files.append((entry.path, entry.size))
        finally:
            walk.close()
        return files, shown

    async def _run_worker(
        self, request: dict[str, Any], files: list[tuple[Path, int]], search: _Search, stop: float
    ) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", str(_WORKER),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={}, limit=1 << 20,
        )  # fmt: skip
        stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
        if stdin is None or stdout is None or stderr is None:
            raise RuntimeError("the grep worker was started without pipes")

        async def feed() -> None:
            try:
                stdin.write(json.dumps(request).encode() + b"\n")
                for batch in self._batches(files):
                    texts = await asyncio.to_thread(self._read_batch, batch, search, stop)
                    for shown, text in texts:
                        stdin.write(json.dumps([shown, text]).encode() + b"\n")
                    await stdin.drain()
                stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                logger.debug("grep worker stopped reading (result cap reached)")

        async def collect() -> None:
            async for raw in stdout:
                item = json.loads(raw)
                if item[0] == "match":
                    search.matches.append((item[1], item[2], item[3]))
                else:
                    search.searched += 1

        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + (stop - time.monotonic())):
                await asyncio.gather(feed(), collect())
                await process.wait()
        except TimeoutError:
            search.timed_out = True
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if not search.timed_out and process.returncode != 0:
            detail = (await stderr.read()).decode(errors="replace").strip().splitlines()
            raise ToolExecutionError(
                f"the search failed: {detail[-1] if detail else f'exit {process.returncode}'}",
                hint="Try a simpler pattern.",
            )

    def _batches(self, files: list[tuple[Path, int]]) -> Iterator[list[Path]]:
        """Files in groups of about `batch_bytes`, each read in one worker thread."""
        batch: list[Path] = []
        size = 0
        for path, file_size in files:
            batch.append(path)
            size += file_size
            if size >= self.batch_bytes or len(batch) >= 256:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def _read_batch(self, batch: list[Path], search: _Search, stop: float) -> list[tuple[str, str]]:
        texts: list[tuple[str, str]] = []
        for real in batch:
            if time.monotonic() >= stop:  # the caller is being timed out: stop reading
                break
            try:
                with self.workspace.open_read(real) as file:
                    data = file.read(self.max_file_bytes + 1)
            except (ToolExecutionError, WorkspaceViolation) as exc:
                logger.debug("grep skips %s: %s", real, exc)
                search.skipped_unreadable += 1
                continue
            if len(data) > self.max_file_bytes:
                search.skipped_large += 1
                continue
            shown = self.workspace.relative(real)
            try:
                text = decode_text(data, shown)
            except ToolExecutionError:  # NUL bytes, or not UTF-8
                search.skipped_binary += 1
                continue
            texts.append((shown, text))
        return texts

    def _report(
        self, search: _Search, pattern: str, base: str, max_results: int, candidates: int
    ) -> str:
        notes: list[str] = []
        if len(search.matches) >= max_results:
            notes.append(f"stopped at {max_results} matches; narrow the pattern, path or include")
        if search.timed_out and not search.walk_timed_out:
            notes.append(
                f"the search was stopped at its {self.deadline:g} s limit after "
                f"{search.searched} of {candidates} files; results are incomplete"
            )
        skipped = [
            f"{count} {what}"
            for count, what in (
                (search.skipped_binary, "binary or non-UTF-8"),
                (search.skipped_large, f"over {human_size(self.max_file_bytes)}"),
                (search.skipped_unreadable, "unreadable"),
            )
            if count
        ]
        if skipped:
            notes.append("skipped files: " + ", ".join(skipped))
        if search.walk_timed_out:
            visited = "1 entry" if search.visited == 1 else f"{search.visited} entries"
            raise ToolExecutionError(
                f"the search for {pattern!r} was stopped at its {self.deadline:g} s limit "
                f"while still listing the files under {base} ({visited} visited); nothing "
                "was searched",
                hint="The directory tree is too large to search in time; narrow path to a "
                "subdirectory, or include to the files you need.",
            )
        if not search.matches:
            if search.timed_out:
                raise ToolExecutionError(
                    f"the search for {pattern!r} did not finish within {self.deadline:g} s "
                    f"and was stopped ({search.searched} of {candidates} files searched)",
                    hint="The pattern may backtrack catastrophically (nested quantifiers such "
                    "as (a+)+ or (.*)*); simplify it, or narrow path or include.",
                )
            summary = f"No matches for {pattern!r} in {base} ({search.searched} files searched)."
            return "\n".join([summary, *notes])
        lines = [f"{path}:{line}: {text}" for path, line, text in search.matches]
        lines.extend(f"… {note}" for note in notes)
        return "\n".join(lines)


def _included(include: tuple[str, ...] | None, real: Path, base: Path) -> bool:
    if include is None:
        return True
    if len(include) == 1:
        return fnmatchcase(real.name, include[0])
    return glob_match(include, real.relative_to(base).parts)
