"""File tools: read_file, write_file, edit_file and list_dir, all through the workspace guard.

Every path a model sends is resolved by `Workspace.resolve` and opened by the guard's
race-safe helpers; blocking file work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from toolbridge.core.errors import ToolExecutionError
from toolbridge.core.results import image_media_type
from toolbridge.core.tool import ImageBlock, TextBlock, ToolContext, ToolResult, tool_parameters
from toolbridge.security.workspace import WalkEntry, Workspace
from toolbridge.tools._fs import (
    BINARY_SNIFF_BYTES,
    SKIPPED_DIRS,
    WorkspaceTool,
    binary_file_error,
    decode_text,
    human_size,
    looks_binary,
    require_directory,
)
from toolbridge.tools._images import read_image_header
from toolbridge.tools._patches import closest_windows

__all__ = ["EditFileTool", "ListDirTool", "ReadFileConfig", "ReadFileTool", "WriteFileTool"]

BOM = b"\xef\xbb\xbf"


class ReadFileConfig(BaseModel):
    """Settings of `read_file` (config section ``read_file``): how large an image may be."""

    model_config = ConfigDict(extra="forbid")

    images: bool = Field(
        default=True,
        description="Return PNG, JPEG, GIF and WebP files as images; false refuses them as "
        "binary files (for models that cannot see images).",
    )
    max_image_bytes: int = Field(
        default=5 * 1024 * 1024, ge=1, description="Largest image file returned, in bytes."
    )
    max_image_pixels: int = Field(
        default=8000 * 8000,
        ge=1,
        description="Largest image returned, in pixels (width x height, read from the "
        "header); a larger one is an error, never scaled down.",
    )


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File path, relative to the workspace root.",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to return, 1-based (default 1).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to return (default 2000).",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
)
class ReadFileTool(WorkspaceTool):
    """Read a UTF-8 text file, or a range of its lines, with line numbers; or an image."""

    name = "read_file"
    description = (
        "Read a UTF-8 text file in the workspace. Each line is returned as "
        "'<line number><TAB><text>' (the numbers are not part of the file). Use offset and "
        "limit to read a range of lines of a large file. A PNG, JPEG, GIF or WebP file is "
        "returned as an image."
    )
    read_only = True

    max_bytes = 256 * 1024  # returned at most per call; larger files are read in ranges
    default_limit = 2000
    max_line_chars = 2000

    def __init__(
        self, workspace: Workspace | str | os.PathLike[str], config: ReadFileConfig | None = None
    ) -> None:
        super().__init__(workspace)
        self.config = config or ReadFileConfig()

    @classmethod
    def config_cls(cls) -> type[BaseModel]:
        return ReadFileConfig

    @classmethod
    def create(cls, ctx: ToolContext) -> ReadFileTool:
        return cls(Workspace(ctx.workspace), ctx.tool_config)

    async def run(self, **kwargs: Any) -> str | ToolResult:
        return await asyncio.to_thread(
            self._read, kwargs["path"], kwargs.get("offset"), kwargs.get("limit")
        )

    def _read(self, path: str, offset: int | None, limit: int | None) -> str | ToolResult:
        real = self.workspace.resolve(path)
        shown = self.workspace.relative(real)
        with self.workspace.open_read(real) as file:
            size = os.fstat(file.fileno()).st_size
            head = file.read(BINARY_SNIFF_BYTES)
            if self.config.images and image_media_type(head) is not None and not _text(head):
                return self._image(file, head, size, shown)
            if offset is None and limit is None and size > self.max_bytes:
                raise ToolExecutionError(
                    f"{shown} is {human_size(size)}, more than read_file returns at once "
                    f"({human_size(self.max_bytes)})",
                    hint=f"Read it in parts: offset=1 and limit={self.default_limit // 4}, "
                    "then continue from the next offset; or find the lines you need with grep.",
                )
            if looks_binary(head):  # refuse most binaries at once
                raise binary_file_error(shown)
            file.seek(0)
            return self._number_lines(file, shown, offset or 1, limit or self.default_limit)

    def _image(self, file: BinaryIO, head: bytes, size: int, shown: str) -> ToolResult:
        """The image in `file` as an image block, if it is within the configured limits."""
        limit = self.config.max_image_bytes
        if size > limit:
            raise ToolExecutionError(
                f"{shown} is an image of {human_size(size)}, more than read_file returns "
                f"({human_size(limit)}, read_file.max_image_bytes)",
                hint="Make a smaller copy (fewer pixels, or JPEG) with exec, and read that; "
                "or ask the user to raise read_file.max_image_bytes.",
            )
        data = head + file.read(limit + 1 - len(head))
        if len(data) > limit:  # the file grew since fstat
            raise ToolExecutionError(
                f"{shown} grew past {human_size(limit)} while it was read",
                hint="Read it again once it stops changing.",
            )
        try:
            header = read_image_header(data)
        except ValueError as exc:
            raise ToolExecutionError(
                f"{shown} starts like an image, but {exc}; it cannot be shown",
                hint="Check the file (it may be truncated), or read another one.",
            ) from None
        assert header is not None
        dimensions = f"{header.width} x {header.height} pixels"
        if header.pixels > self.config.max_image_pixels:
            raise ToolExecutionError(
                f"{shown} is a {header.kind} image of {dimensions} ({header.pixels:,} pixels), "
                f"more than read_file returns ({self.config.max_image_pixels:,} pixels, "
                "read_file.max_image_pixels); it was not shown, and nothing was scaled down",
                hint="Make a smaller copy with exec (for example with ImageMagick: "
                "convert IN -resize 2000x2000 OUT.png) and read that.",
            )
        note = f"{shown}: {header.kind} image, {dimensions}, {human_size(len(data))}"
        return ToolResult(
            [TextBlock(note), ImageBlock(data, header.media_type)],
            metadata={
                "media_type": header.media_type,
                "width": header.width,
                "height": header.height,
                "bytes": len(data),
            },
        )

    def _number_lines(self, file: BinaryIO, shown: str, first: int, count: int) -> str:
        """Lines `first` to `first + count - 1`, numbered, and a last line that says
        where the file continues or that its end was reached (a whole-file read too)."""
        out: list[str] = []
        used = number = last = 0
        more = stopped_for_size = False
        while (line := _next_line(file, self.max_line_chars * 4)) is not None:
            number += 1
            if number < first:
                continue
            if len(out) == count:
                more = True
                break
            raw, cut = line
            if b"\x00" in raw:  # past the sniffed head: what is returned must hold no NUL
                raise binary_file_error(shown, f"line {number} contains a NUL byte")
            text = _decode_line(raw, cut, shown, number)
            if len(text) > self.max_line_chars or cut:
                text = text[: self.max_line_chars] + " … [line cut: too long]"
            entry = f"{number:>6}\t{text}"
            used += len(entry) + 1
            if used > self.max_bytes and out:
                more = stopped_for_size = True
                break
            out.append(entry)
            last = number
        if not out:
            if number == 0:
                return f"({shown} is empty)"
            raise ToolExecutionError(
                f"offset {first} is past the end of {shown}, which has {number} lines",
                hint=f"Use an offset between 1 and {number}.",
            )
        if more:
            reason = " (size limit reached)" if stopped_for_size else ""
            out.append(
                f"… lines {first}-{last} shown{reason}; {shown} continues: read on with "
                f"offset={last + 1}"
            )
        else:
            lines = "1 line" if number == 1 else f"{number} lines"
            where = f"line {last}" if first == last else f"lines {first}-{last}"
            out.append(f"… {where} shown; end of file ({shown} has {lines})")
        return "\n".join(out)


def _text(head: bytes) -> bool:
    """Whether `head` reads as UTF-8 text: a note that starts 'GIF89a is ...' is text, not
    a GIF of 26912 x 8307 pixels (every real image holds a NUL byte in its header)."""
    if looks_binary(head):
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _next_line(file: BinaryIO, max_bytes: int) -> tuple[bytes, bool] | None:
    """The next line without its end (first `max_bytes` bytes, and whether it was cut)."""
    raw = file.readline(max_bytes)
    if not raw:
        return None
    if raw.endswith(b"\n"):
        return raw.rstrip(b"\r\n"), False
    if len(raw) < max_bytes:  # the last line, without a newline
        return raw, False
    while True:  # skip the rest of an over-long line without holding it in memory
        rest = file.readline(1 << 16)
        if not rest or rest.endswith(b"\n"):
            return raw, True


def _decode_line(raw: bytes, cut: bool, shown: str, number: int) -> str:
    if number == 1 and raw.startswith(BOM):
        raw = raw[len(BOM) :]
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(raw, final=not cut)
    except UnicodeDecodeError:
        raise ToolExecutionError(
            f"{shown} is not UTF-8 text (line {number} cannot be decoded); it may be binary "
            "or use another encoding",
            hint="Only UTF-8 text files can be read with read_file.",
        ) from None


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File path, relative to the workspace root.",
            },
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
)
class WriteFileTool(WorkspaceTool):
    """Create or overwrite a text file atomically, making missing parent directories."""

    name = "write_file"
    description = (
        "Create a file or replace its whole content (UTF-8). Missing parent directories are "
        "created. The write is atomic: the file has the old or the new content, never a mix. "
        "To change part of a file, use edit_file."
    )

    async def run(self, **kwargs: Any) -> str:
        return await asyncio.to_thread(self._write, kwargs["path"], kwargs["content"])

    def _write(self, path: str, content: str) -> str:
        data = _encode(content, "content")
        real = self.resolve_file(path)
        with self.locks.hold([real]):  # never in the middle of another tool's edit
            created = self.workspace.write_atomic(real, data)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        action = "Created" if created else "Replaced"
        noun = "line" if lines == 1 else "lines"
        return f"{action} {self.workspace.relative(real)}: {len(data)} bytes, {lines} {noun}."


def _encode(text: str, field: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolExecutionError(
            f"{field} contains a lone surrogate at position {exc.start}, which is not valid "
            "Unicode",
            hint=f"Send {field} as valid Unicode text.",
        ) from None


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File path, relative to the workspace root.",
            },
            "old_string": {
                "type": "string",
                "minLength": 1,
                "description": "Exact text to replace, including whitespace and indentation.",
            },
            "new_string": {"type": "string", "description": "Text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence instead of exactly one.",
            },
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
)
class EditFileTool(WorkspaceTool):
    """Replace an exact piece of text in a file; it must occur once unless `replace_all`."""

    name = "edit_file"
    description = (
        "Replace an exact string in a text file. old_string must occur exactly once "
        "(give enough surrounding lines to make it unique), or set replace_all to replace "
        "every occurrence. When it is not found, the error shows the closest lines."
    )

    max_bytes = 10 * 1024 * 1024

    async def run(self, **kwargs: Any) -> str:
        return await asyncio.to_thread(
            self._edit,
            kwargs["path"],
            kwargs["old_string"],
            kwargs["new_string"],
            kwargs.get("replace_all", False),
        )

    def _edit(self, path: str, old: str, new: str, replace_all: bool) -> str:
        if old == new:
            raise ToolExecutionError(
                "old_string and new_string are identical, so there is nothing to change",
                hint="Send the text you want in new_string.",
            )
        real = self.workspace.resolve(path)
        # Read and write alone: two edits at once both read the same text and the second
        # write dropped the first, though both were reported done.
        with self.locks.hold([real]):
            return self._edit_file(real, old, new, replace_all)

    def _edit_file(self, real: Path, old: str, new: str, replace_all: bool) -> str:
        shown = self.workspace.relative(real)
        with self.workspace.open_read(real) as file:
            data = file.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise ToolExecutionError(
                f"{shown} is larger than {human_size(self.max_bytes)}, too large to edit",
                hint="Use exec with a stream editor for very large files.",
            )
        text = decode_text(data, shown)
        if old not in text and "\r\n" in text and "\n" in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # CRLF file
        count = text.count(old)
        if count == 0:
            raise _not_found(text, old, shown)
        if count > 1 and not replace_all:
            lines = _match_lines(text, old)
            raise ToolExecutionError(
                f"old_string occurs {count} times in {shown} (at lines "
                f"{', '.join(map(str, lines[:20]))}); it must match exactly once",
                hint="Add surrounding lines to old_string so that it matches only the place "
                "you mean, or set replace_all to true to replace every occurrence.",
            )
        first_line = _match_lines(text, old)[0]
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        prefix = BOM if data.startswith(BOM) else b""
        self.workspace.write_atomic(real, prefix + _encode(updated, "new_string"))
        replaced = f"{count} occurrences" if replace_all and count > 1 else "1 occurrence"
        return f"Replaced {replaced} in {shown} (first at line {first_line})."


def _match_lines(text: str, needle: str) -> list[int]:
    lines: list[int] = []
    start = text.find(needle)
    while start != -1:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + len(needle))
    return lines


def _not_found(text: str, needle: str, shown: str) -> ToolExecutionError:
    """The no-match error, showing the lines most like `needle` so the model can copy them."""
    lines = text.splitlines()
    chosen = closest_windows(lines, needle.strip("\n").splitlines() or [needle])
    message = f"old_string was not found in {shown}"
    if not chosen:
        return ToolExecutionError(
            message + ", and no similar text was found either",
            hint="Read the file with read_file and copy the exact text into old_string.",
        )
    parts = [message + ". The closest text:"]
    for ratio, start, end in chosen:
        same = "; differs only in indentation or spacing" if ratio == 1.0 else ""
        where = f"line {end}" if end == start + 1 else f"lines {start + 1}-{end}"
        parts.append(f"{where} ({ratio:.0%} similar{same}):")
        parts.extend(f"{n + 1:>6}\t{lines[n]}" for n in range(start, end))
    return ToolExecutionError(
        "\n".join(parts),
        hint="Copy the text exactly as shown (without the line-number prefix and tab) into "
        "old_string, including its whitespace, and call edit_file again.",
    )


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "default": ".",
                "description": "Directory, relative to the workspace root (default '.').",
            },
            "recursive": {
                "type": "boolean",
                "default": False,
                "description": "Also list the contents of subdirectories.",
            },
            "max_depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": 20,
                "default": 3,
                "description": "How many directory levels to descend when recursive.",
            },
            "max_entries": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5000,
                "default": 500,
                "description": "Stop after this many entries.",
            },
        },
        "additionalProperties": False,
    }
)
class ListDirTool(WorkspaceTool):
    """List a directory (optionally recursively), without following symlinks."""

    name = "list_dir"
    description = (
        "List a directory in the workspace: one entry per line, as a path relative to the "
        "workspace root; directories end with '/', files show their size, symlinks are "
        "marked and never followed. With recursive, subdirectories are listed too (up to "
        "max_depth levels; " + ", ".join(sorted(SKIPPED_DIRS)) + " are shown but not entered)."
    )
    read_only = True

    async def run(self, **kwargs: Any) -> str:
        depth = kwargs.get("max_depth", 3) if kwargs.get("recursive", False) else 1
        return await asyncio.to_thread(
            self._list, kwargs.get("path", "."), depth, kwargs.get("max_entries", 500)
        )

    def _list(self, path: str, max_depth: int, max_entries: int) -> str:
        real = self.workspace.resolve(path)
        shown = self.workspace.relative(real)
        require_directory(real, shown)
        lines: list[str] = []
        walk = self.workspace.walk(real, max_depth=max_depth, skip_dirs=SKIPPED_DIRS)
        try:
            for entry in walk:
                if len(lines) == max_entries:
                    total = _count_rest(walk, max_entries + 1)
                    lines.append(
                        f"… stopped at {max_entries} of {total} entries; list a "
                        "subdirectory, or raise max_entries (at most 5000)"
                    )
                    break
                lines.append(_describe_entry(self.workspace, entry))
        finally:
            walk.close()
        if not lines:
            return f"({shown} is empty)"
        return "\n".join(lines)


COUNT_LIMIT = 100_000
COUNT_SECONDS = 2.0


def _count_rest(walk: Iterator[WalkEntry], seen: int) -> str:
    """How many entries there are in all, `seen` so far: counted on, within a budget."""
    deadline = time.monotonic() + COUNT_SECONDS
    for _ in walk:
        seen += 1
        if seen >= COUNT_LIMIT or (seen % 1000 == 0 and time.monotonic() > deadline):
            return f"more than {seen:,}"
    return f"{seen:,}"


def _describe_entry(workspace: Workspace, entry: WalkEntry) -> str:
    shown = workspace.relative(entry.path)
    if entry.kind == "dir":
        if entry.error is not None:
            return f"{shown}/  (unreadable: {entry.error})"
        note = "  (not entered)" if entry.path.name in SKIPPED_DIRS else ""
        return f"{shown}/{note}"
    if entry.kind == "file":
        return f"{shown}  ({human_size(entry.size)})"
    if entry.kind == "symlink":
        return f"{shown}  (symlink, not followed)"
    return f"{shown}  (special file: not readable)"
