"""From whatever a tool returned to a `ToolResult` the model can read.

Strings pass as they are; data (dicts, lists, pydantic models, dataclasses) becomes
JSON, never a Python repr; bytes that are an image become an image block; nothing
at all becomes an explicit note, so the model never sees an empty result.

Text past the policy's limit is cut to a head-and-tail preview; the whole of it is
kept in a `ResultStore` file the model can page through with ``read_tool_result``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge.errors import WorkspaceViolation
from toolbridge.jsontext import to_json_text
from toolbridge.tool import ContentBlock, ImageBlock, JsonBlock, TextBlock, ToolResult

__all__ = [
    "EMPTY_RESULT",
    "PAGE_METADATA_KEY",
    "RESULTS_DIR",
    "ResultPage",
    "ResultStore",
    "cap_result",
    "estimate_tokens",
    "image_media_type",
    "preview_text",
    "safe_file_name",
    "text_length",
    "to_tool_result",
]

EMPTY_RESULT = "(tool completed with no output)"

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_media_type(data: bytes) -> str | None:
    """The image media type of `data` by its magic bytes, or None."""
    for magic, media_type in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def to_tool_result(value: Any) -> ToolResult:
    """Convert a tool's return value to a `ToolResult`."""
    cls = type(value)
    if cls is str:
        return ToolResult(value if value.strip() else EMPTY_RESULT)
    if cls is int:
        return ToolResult(str(value))
    if isinstance(value, ToolResult):
        content = value.content
        if not (content.strip() if isinstance(content, str) else content):
            value.content = EMPTY_RESULT
        return value
    if isinstance(value, str):
        return ToolResult(value if value.strip() else EMPTY_RESULT)
    if value is None:
        return ToolResult(EMPTY_RESULT)
    if isinstance(value, TextBlock | ImageBlock | JsonBlock):
        return ToolResult([value])
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        media_type = image_media_type(data)
        if media_type is not None:
            return ToolResult([ImageBlock(data, media_type)])
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult(f"(binary output, {len(data)} bytes, not shown)")
        return ToolResult(text if text.strip() else EMPTY_RESULT)
    if _is_block_list(value):
        return ToolResult(list(value) or EMPTY_RESULT)
    return ToolResult(to_json_text(value))


def _is_block_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(item, TextBlock | ImageBlock | JsonBlock) for item in value)
    )


# --- length cap, preview and persistence ----------------------------------------------

RESULTS_DIR = Path(".toolbridge") / "results"
PAGE_METADATA_KEY = "toolbridge.page"
"""Set in a result's metadata by a pager: it is a slice the model asked for, never re-capped."""
_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}\Z")
_WRITE_CHUNK = 1 << 20  # characters encoded and written at a time: no full bytes copy


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token), for budgets and previews."""
    return (len(text) + 3) // 4


def safe_file_name(name: str) -> str:
    """`name` if it is a safe file name, else a safe stem plus a short hash of it.

    Call ids and session names come from models and users; they never become paths
    as they are, so no id can climb out of the results folder.
    """
    if _SAFE_NAME.match(name):
        return name
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name)[:40].strip("_") or "id"
    return f"{stem}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True)
class ResultPage:
    """A slice of a stored result: text from byte `offset` to `next_offset` of `size`."""

    text: str
    offset: int
    next_offset: int
    size: int

    @property
    def at_end(self) -> bool:
        return self.next_offset >= self.size


class ResultStore:
    """Full tool results kept under ``<workspace>/.toolbridge/results/<session>/``.

    Writes are atomic (temp file, then rename), so a reader never sees half a result.
    Reads seek to a byte offset and decode only the requested slice, so paging a
    50 MB result costs the page, not the file. Old results are pruned by age and count.
    """

    def __init__(
        self,
        workspace: Path,
        session: str = "default",
        *,
        max_age: float = 7 * 24 * 3600,
        max_count: int = 200,
    ) -> None:
        self.workspace = Path(workspace)
        self.root = self.workspace / RESULTS_DIR
        self.directory = self.root / safe_file_name(session)
        self.max_age = max_age
        self.max_count = max_count

    def path_for(self, call_id: str) -> Path:
        """Where the result of `call_id` is (or would be) stored."""
        return self.directory / f"{safe_file_name(call_id)}.txt"

    def save(self, call_id: str, text: str) -> Path:
        """Store `text` for `call_id` atomically, prune old results, return the path."""
        self._check_inside_workspace(self.directory, create=True)
        path = self.path_for(call_id)
        fd, temp_name = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".txt")
        try:
            with os.fdopen(fd, "wb") as handle:
                for start in range(0, len(text), _WRITE_CHUNK):
                    chunk = text[start : start + _WRITE_CHUNK]
                    # a lone surrogate cannot be UTF-8: store U+FFFD rather than fail the call
                    handle.write(chunk.encode("utf-8", errors="replace"))
            os.replace(temp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_name)
            raise
        self.prune(keep=path)
        return path

    def read(self, call_id: str, offset: int = 0, limit: int = 20_000) -> ResultPage:
        """Up to `limit` bytes of the stored result from byte `offset`, on UTF-8 boundaries.

        Raises `FileNotFoundError` when nothing is stored for `call_id`.
        """
        if offset < 0 or limit < 1:
            raise ValueError("offset must be >= 0 and limit >= 1")
        path = self.path_for(call_id)
        self._check_inside_workspace(path.parent, create=False)
        # No-follow and non-blocking, then only a regular file: a symlink or a FIFO planted
        # in the results folder can neither lead outside nor hang the read.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise FileNotFoundError(f"{path.name} is not a regular file")
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = min(offset, size)
            handle.seek(start)
            data = handle.read(limit + 3)  # up to 3 extra bytes to finish a character
        lead = 0
        while lead < len(data) and lead < 3 and _is_continuation(data[lead]):
            lead += 1  # an offset inside a character moves to the next character start
        end = min(len(data), lead + limit)
        while end < len(data) and _is_continuation(data[end]):
            end += 1
        chunk = data[lead:end]
        return ResultPage(chunk.decode("utf-8", errors="replace"), start + lead, start + end, size)

    def prune(self, *, keep: Path | None = None) -> int:
        """Delete results older than `max_age` (any session) and all but this session's
        newest `max_count`, so one busy session never deletes another's results."""
        if not self.root.is_dir():
            return 0
        now = time.time()
        files: list[tuple[float, Path]] = []
        # Never follow links: a session folder or file linked out of the workspace (a
        # cloned repository can carry one) must not get files outside deleted.
        for session in self.root.iterdir():
            if session.is_symlink() or not session.is_dir():
                continue
            for path in session.glob("*.txt"):
                try:
                    info = path.lstat()
                except FileNotFoundError:
                    continue  # removed by a concurrent prune
                if stat.S_ISREG(info.st_mode):
                    files.append((info.st_mtime, path))
        files.sort(reverse=True)
        doomed = [path for mtime, path in files if path != keep and now - mtime > self.max_age]
        own = [path for _, path in files if path.parent == self.directory and path not in doomed]
        doomed += [path for path in own[self.max_count :] if path != keep]
        for path in doomed:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return len(doomed)

    def _check_inside_workspace(self, directory: Path, *, create: bool) -> None:
        workspace = self.workspace.resolve()
        for check in ("before", "after") if create else ("before",):
            resolved = directory.resolve()
            if resolved != workspace and workspace not in resolved.parents:
                raise WorkspaceViolation(
                    f"the results folder {directory} resolves outside the workspace",
                    target=str(resolved),
                )
            if check == "before" and create:
                directory.mkdir(parents=True, exist_ok=True)


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def preview_text(text: str, *, head: int, tail: int) -> str:
    """The first `head` and last `tail` characters of `text`, with the cut marked."""
    if len(text) <= head + tail:
        return text
    omitted = len(text) - head - tail
    cut = f"\n\n[... {omitted:,} characters omitted ...]\n\n"
    return text[:head] + cut + (text[-tail:] if tail else "")


def cap_result(
    result: ToolResult,
    *,
    call_id: str,
    max_chars: int,
    store: ResultStore | None,
    preview_chars: int = 4_000,
) -> ToolResult:
    """Keep `result` under `max_chars` of text; persist the full text when it is longer.

    The model then gets a head-and-tail preview and how to page through the rest with
    `read_tool_result`. Images pass unchanged. Without a store the text is only cut.
    """
    content = result.content
    if isinstance(content, str):
        if len(content) <= max_chars:
            return result
        text, images = content, []
    else:
        images = [block for block in content if isinstance(block, ImageBlock)]
        text_blocks = [block for block in content if not isinstance(block, ImageBlock)]
        if text_length(result) <= max_chars:
            return result
        text = ToolResult(text_blocks).text
    budget = min(preview_chars, max_chars)
    head = budget * 2 // 3
    preview = preview_text(text, head=head, tail=budget - head)
    note = (
        f"[Output too long: {len(text):,} characters (about {estimate_tokens(text):,} tokens);"
        f" showing the first {head:,} and the last {budget - head:,}.]"
    )
    metadata = dict(result.metadata)
    if store is not None:
        path = store.save(call_id, text)
        metadata["persisted_path"] = str(path)
        note += (
            f'\n[The full output is saved. Read it in pages with read_tool_result(call_id="'
            f'{call_id}", offset=0, limit=20000); each page says its next offset.]'
        )
    capped = f"{note}\n\n{preview}"
    new_content: str | list[ContentBlock] = capped if not images else [TextBlock(capped), *images]
    return ToolResult(new_content, result.is_error, result.error_kind, metadata)


def _block_chars(block: ContentBlock) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    return len(to_json_text(block.value)) if isinstance(block, JsonBlock) else 0


def text_length(result: ToolResult) -> int:
    """Characters of text `result` would send (images count as nothing)."""
    content = result.content
    if isinstance(content, str):
        return len(content)
    return sum(_block_chars(block) for block in content)
