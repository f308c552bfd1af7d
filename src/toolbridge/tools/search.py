"""Search tools: glob finds paths by name, grep finds lines by regular expression.

Both list files through `toolbridge.search` (``.gitignore`` honoured, symlinks never
followed, generated directories skipped) and search them with ripgrep where it is
installed, or in Python, with the same results and limits either way, under one
deadline for the whole call. Settings live in the ``search`` config section.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolbridge.core.errors import ToolConfigError, ToolExecutionError
from toolbridge.core.tool import ToolContext, tool_parameters
from toolbridge.search.globs import (
    Glob,
    expand_braces,
    has_magic,
    pattern_parts,
    split_fixed_prefix,
)
from toolbridge.search.listing import MAX_LISTED_FILES, Listing, python_listing, ripgrep_listing
from toolbridge.search.matching import (
    Found,
    GrepRequest,
    python_matches,
    ripgrep_flags,
    ripgrep_matches,
)
from toolbridge.search.ripgrep import find_ripgrep, ripgrep_accepts
from toolbridge.security.workspace import Workspace
from toolbridge.tools._fs import SKIPPED_DIRS, WorkspaceTool, require_directory

__all__ = ["GlobTool", "GrepTool", "SearchConfig"]

MAX_WALK_DEPTH = 32
_INLINE_FLAGS = re.compile(r"\(\?[a-zA-Z]*[msx-]")

_PATH_PARAMETER = {
    "type": "string",
    "minLength": 1,
    "default": ".",
    "description": "Directory to search, relative to the workspace root (default '.').",
}
_SKIPPED_NOTE = ", ".join(sorted(SKIPPED_DIRS))


class SearchConfig(BaseModel):
    """Settings of glob and grep (config section ``search``)."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["auto", "ripgrep", "python"] = Field(
        default="auto",
        description="auto: ripgrep when it is installed, else Python; ripgrep: require it; "
        "python: never use ripgrep.",
    )
    ripgrep_path: str | None = Field(
        default=None, description="The ripgrep executable (default: 'rg' on PATH)."
    )

    def ripgrep(self) -> str | None:
        """The ripgrep executable to use, None for the Python engine."""
        if self.engine == "python":
            return None
        found = find_ripgrep(self.ripgrep_path)
        if found is None and (self.engine == "ripgrep" or self.ripgrep_path):
            raise ToolConfigError(
                "configuration of the search tools (section 'search') is invalid: ripgrep "
                f"was not found ({self.ripgrep_path or 'rg'!r} is not an executable on PATH)"
            )
        return found


class _SearchTool(WorkspaceTool):
    """A workspace tool that lists files with ripgrep or Python."""

    config_key = "search"
    deadline = 10.0  # seconds for the whole call: listing, reading and matching

    def __init__(
        self, workspace: Workspace | str | os.PathLike[str], config: SearchConfig | None = None
    ) -> None:
        super().__init__(workspace)
        self.config = config or SearchConfig()
        self.rg = self.config.ripgrep()

    @classmethod
    def config_cls(cls) -> type[BaseModel]:
        return SearchConfig

    @classmethod
    def create(cls, ctx: ToolContext) -> _SearchTool:
        return cls(Workspace(ctx.workspace), ctx.tool_config)

    @property
    def engine(self) -> str:
        return "ripgrep" if self.rg else "python"

    async def _list(self, base: Path, max_depth: int, stop: float) -> Listing:
        if self.rg is not None:
            return await ripgrep_listing(
                self.rg, self.workspace, base, max_depth=max_depth, stop=stop
            )
        return await asyncio.to_thread(
            python_listing, self.workspace, base, max_depth=max_depth, stop=stop
        )

    def _narrow(self, base: Path, parts: tuple[str, ...]) -> tuple[Path | None, tuple[str, ...]]:
        """Start below `base` at the pattern's fixed directories (``src/**/*.py`` -> src),
        when they are plain directories; None when they do not exist."""
        fixed, rest = split_fixed_prefix(parts)
        if not fixed:
            return base, parts
        target = base.joinpath(*fixed)
        try:
            real = self.workspace.resolve(str(target))
        except ToolExecutionError:
            return None, rest
        if real != target:  # a symlink on the way: walks never follow one
            return base, parts
        return (real, rest) if real.is_dir() else (None, rest)


@dataclass(frozen=True, slots=True)
class _GlobTarget:
    base: Path  # the directory the pattern is relative to
    start: Path | None  # where the listing starts (None: nothing can match)
    patterns: tuple[tuple[str, ...], ...]  # the pattern's segments, relative to start


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Glob relative to path: '*' and '?' within a name, '**' "
                "across directories, {a,b} for either, e.g. '**/*.py' or 'docs/*.{md,txt}'. "
                "An absolute pattern inside the workspace is accepted too (path is then "
                "ignored).",
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
class GlobTool(_SearchTool):
    """Find files whose path matches a glob pattern."""

    name = "glob"
    description = (
        "Find files in the workspace by glob pattern ('**/*.py'). Returns file paths "
        "relative to the workspace root, in directory order (use list_dir for directories). "
        f"Files ignored by .gitignore, symlinks and {_SKIPPED_NOTE} are left out."
    )
    read_only = True

    async def run(self, **kwargs: Any) -> str:
        pattern: str = kwargs["pattern"]
        max_results: int = kwargs.get("max_results", 200)
        stop = time.monotonic() + self.deadline
        target = await asyncio.to_thread(self._target, pattern, kwargs.get("path", "."))
        shown_base = self.workspace.relative(target.base)
        if target.start is None:
            return f"No paths match {pattern!r} under {shown_base}."
        depth = max(MAX_WALK_DEPTH if "**" in p else len(p) for p in target.patterns)
        listing = await self._list(target.start, depth, stop)
        found, capped = _glob_results(self.workspace, listing, target, max_results)
        notes = _listing_notes(listing, self.deadline)
        if capped:
            notes.insert(0, f"stopped at {max_results} matches; narrow the pattern or path")
        if not found:
            return "\n".join([f"No paths match {pattern!r} under {shown_base}.", *notes])
        return "\n".join([*found, *(f"… {note}" for note in notes)])

    def _target(self, pattern: str, path: str) -> _GlobTarget:
        if pattern.startswith(("/", "~")):
            return self._absolute_target(pattern)
        base = self.workspace.resolve(path)
        require_directory(base, self.workspace.relative(base))
        return self._narrowed(base, [pattern_parts(p) for p in expand_braces(pattern)])

    def _absolute_target(self, pattern: str) -> _GlobTarget:
        """An absolute pattern names its own directory: the guard checks that part (a
        workspace violation when it is outside), the rest is matched below it."""
        expanded = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
        segments = expanded.split("/")
        first = next((i for i, s in enumerate(segments) if has_magic(s)), len(segments) - 1)
        directory = "/".join(segments[:first]) or "/"
        base = self.workspace.resolve(directory)
        require_directory(base, self.workspace.relative(base))
        rest = "/".join(segments[first:])
        return self._narrowed(base, [pattern_parts(p) for p in expand_braces(rest)])

    def _narrowed(self, base: Path, patterns: list[tuple[str, ...]]) -> _GlobTarget:
        if len(patterns) == 1:
            start, rest = self._narrow(base, patterns[0])
            return _GlobTarget(base, start, (rest,))
        return _GlobTarget(base, base, tuple(patterns))


def _glob_results(
    workspace: Workspace, listing: Listing, target: _GlobTarget, max_results: int
) -> tuple[list[str], bool]:
    """The listed files that match, in walk order, and whether `max_results` cut them."""
    assert target.start is not None
    found: list[str] = []
    globs = [Glob(p) for p in target.patterns]
    cut = _prefix_length(workspace, target.start)
    for name in listing.files:
        parts = name[cut:].split("/")
        if any(glob.match(parts) for glob in globs):
            if len(found) == max_results:
                return found, True
            found.append(name)
    return found, False


def _prefix_length(workspace: Workspace, start: Path) -> int:
    """How many characters of a listed name are `start`'s own path (and its slash)."""
    shown = workspace.relative(start)
    return 0 if shown == "." else len(shown) + 1


def _listing_notes(listing: Listing, deadline: float) -> list[str]:
    notes = []
    if listing.timed_out:
        notes.append(
            f"listing the files was stopped at the {deadline:g} s limit; results are "
            "incomplete, narrow path"
        )
    if listing.capped:
        notes.append(f"only the first {MAX_LISTED_FILES} files were looked at; narrow path")
    return notes


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
                "'*.py' or '*.{ts,tsx}', or a path pattern like 'src/**/*.py'.",
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
class GrepTool(_SearchTool):
    """Search file contents by regular expression, with a deadline and result caps."""

    name = "grep"
    description = (
        "Search text files in the workspace for lines matching a Python regular expression. "
        "Returns 'path:line: text' per match. Files ignored by .gitignore, binary files, "
        f"files over 5 MB, symlinks and {_SKIPPED_NOTE} are skipped. The search stops "
        "after 10 seconds."
    )
    read_only = True

    max_file_bytes = 5 * 1024 * 1024
    max_line_chars = 300

    async def run(self, **kwargs: Any) -> str:
        pattern: str = kwargs["pattern"]
        ignore_case: bool = kwargs.get("ignore_case", False)
        try:
            re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolExecutionError(
                f"the pattern {pattern!r} is not a valid regular expression: {exc}",
                hint="Use Python re syntax; escape special characters such as ( [ . * with "
                "a backslash to match them literally.",
            ) from None
        include: str | None = kwargs.get("include")
        includes = _include_patterns(include) if include else None
        request = GrepRequest(
            pattern,
            ignore_case,
            kwargs.get("max_results", 100),
            self.max_line_chars,
            self.max_file_bytes,
        )
        # One deadline for everything: listing, reading and matching.
        stop = time.monotonic() + self.deadline
        base, listing = await self._candidates(kwargs.get("path", "."), includes, stop)
        if listing.timed_out:
            raise ToolExecutionError(
                f"the search for {pattern!r} was stopped at its {self.deadline:g} s limit "
                f"while still listing the files under {self.workspace.relative(base)} "
                f"({len(listing.files)} files listed); nothing was searched",
                hint="The directory tree is too large to search in time; narrow path to a "
                "subdirectory, or include to the files you need.",
            )
        found = Found()
        if listing.files:
            found = await self._match(listing.files, request, stop)
        return self._report(found, listing, request, self.workspace.relative(base))

    async def _candidates(
        self, path: str, includes: list[tuple[str, ...]] | None, stop: float
    ) -> tuple[Path, Listing]:
        real = await asyncio.to_thread(self.workspace.resolve, path)
        shown = self.workspace.relative(real)
        if real.is_file():
            return real, Listing([shown])
        require_directory(real, shown)
        start: Path | None = real
        if includes is not None and len(includes) == 1 and len(includes[0]) > 1:
            start, rest = self._narrow(real, includes[0])
            includes = [rest]
        if start is None:
            return real, Listing()
        listing = await self._list(start, MAX_WALK_DEPTH, stop)
        if includes is not None:
            globs, cut = [Glob(p) for p in includes], _prefix_length(self.workspace, start)
            listing.files = [f for f in listing.files if _included(globs, f[cut:])]
        return real, listing

    async def _match(self, files: list[str], request: GrepRequest, stop: float) -> Found:
        # Python regex features ripgrep lacks (look-around, \Z, backreferences) or reads
        # differently (inline flags, which rg applies to its whole buffer) go to Python.
        if (
            self.rg is not None
            and not _INLINE_FLAGS.search(request.pattern)
            and await ripgrep_accepts(self.rg, request.pattern, ripgrep_flags(request))
        ):
            return await ripgrep_matches(self.rg, self.workspace, files, request, stop)
        return await python_matches(self.workspace, files, request, stop)

    def _report(self, found: Found, listing: Listing, request: GrepRequest, base: str) -> str:
        total = len(listing.files)
        notes = _listing_notes(listing, self.deadline)
        if len(found.matches) >= request.max_matches:
            notes.insert(
                0, f"stopped at {request.max_matches} matches; narrow the pattern, path or include"
            )
        if found.timed_out:
            notes.append(
                f"the search was stopped at its {self.deadline:g} s limit after "
                f"{found.searched} of {total} files; results are incomplete"
            )
        if not found.matches:
            if found.timed_out:
                raise ToolExecutionError(
                    f"the search for {request.pattern!r} did not finish within "
                    f"{self.deadline:g} s and was stopped ({found.searched} of {total} files "
                    "searched)",
                    hint="The pattern may backtrack catastrophically (nested quantifiers such "
                    "as (a+)+ or (.*)*); simplify it, or narrow path or include.",
                )
            summary = f"No matches for {request.pattern!r} in {base} ({total} files searched)."
            return "\n".join([summary, *notes])
        lines = [f"{path}:{line}: {text}" for path, line, text in found.matches]
        lines.extend(f"… {note}" for note in notes)
        return "\n".join(lines)


def _included(includes: list[Glob], name: str) -> bool:
    """Whether `name` (relative to the search's start) matches an include: a path
    pattern, or a name pattern (``*.py``, made ``**/*.py`` by `_include_patterns`)."""
    parts = name.split("/")
    return any(include.match(parts) for include in includes)


def _include_patterns(include: str) -> list[tuple[str, ...]]:
    patterns = [pattern_parts(p) for p in expand_braces(include)]
    return [("**", *p) if len(p) == 1 and "/" not in include else p for p in patterns]
