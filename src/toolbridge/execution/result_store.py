"""Results too long for the model: a head-and-tail preview, the whole text kept to page.

Text past the policy's limit is cut (`cap_result`); the whole of it is kept in a
`ResultStore` file the model can page through with ``read_tool_result``.
"""

from __future__ import annotations

import codecs
import contextlib
import getpass
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge.core.errors import WorkspaceViolation
from toolbridge.core.results import estimate_tokens, text_length
from toolbridge.core.tool import ContentBlock, ImageBlock, TextBlock, ToolResult

__all__ = [
    "PAGER_TOOL",
    "PAGE_METADATA_KEY",
    "RESULTS_DIR",
    "SAVED_METADATA_KEY",
    "ResultPage",
    "ResultStore",
    "cap_result",
    "preview_text",
    "private_results_root",
    "safe_file_name",
]

RESULTS_DIR = Path(".toolbridge") / "results"
"""Where `ExecutionPolicy(results_dir=RESULTS_DIR)` keeps results: relative to the workspace."""
PAGE_METADATA_KEY = "toolbridge.page"
"""Metadata key of a pager's result: ``{"call_id", "offset", "next_offset", "size",
"at_end"}`` in characters. A page is what the model asked for: it is never re-capped."""
SAVED_METADATA_KEY = "toolbridge.saved"
"""Metadata key of a capped result whose full text was saved: ``{"call_id", "path",
"size", "pager"}``, `size` in characters, `pager` the tool that pages through it."""
PAGER_TOOL = "read_tool_result"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}\Z")
_WRITE_CHUNK = 1 << 20  # characters encoded and written at a time: no full bytes copy
_READ_BLOCK = 1 << 18  # bytes counted or decoded at a time while paging
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def safe_file_name(name: str) -> str:
    """`name` if it is a safe file name, else a safe stem plus a short hash of it.

    Call ids and session names come from models and users; they never become paths
    as they are, so no id can climb out of the results folder.
    """
    if _SAFE_NAME.match(name):
        return name
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name)[:40].strip("_") or "id"
    return f"{stem}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def private_results_root() -> Path:
    """The default home of saved results: ``<temp dir>/toolbridge-<user>/results``.

    Outside every workspace and the current directory, readable by this user only
    (created with mode 0700; a folder that another user owns or can read is refused).
    """
    user = str(os.getuid()) if hasattr(os, "getuid") else safe_file_name(getpass.getuser())
    return Path(tempfile.gettempdir()) / f"toolbridge-{user}" / "results"


@dataclass(frozen=True, slots=True)
class ResultPage:
    """A slice of a stored result: text from character `offset` to `next_offset` of `size`."""

    text: str
    offset: int
    next_offset: int
    size: int

    @property
    def at_end(self) -> bool:
        return self.next_offset >= self.size

    def metadata(self, call_id: str) -> dict[str, Any]:
        """The page as structured metadata (under `PAGE_METADATA_KEY`)."""
        return {
            "call_id": call_id,
            "offset": self.offset,
            "next_offset": self.next_offset,
            "size": self.size,
            "at_end": self.at_end,
        }


class ResultStore:
    """Full tool results, one UTF-8 file per call under ``<root>/<session>/<call id>.txt``.

    Offsets and sizes count characters, as the save notice does. Writes are atomic
    (temp file, then rename), so a reader never sees half a result; reads decode the
    file in blocks and keep only the requested page in memory. Old results are pruned
    by age and count. The session folder must resolve inside `boundary` (default: `root`),
    so a symlink planted in a workspace cannot send writes or deletions elsewhere.
    """

    def __init__(
        self,
        root: Path,
        session: str = "default",
        *,
        boundary: Path | None = None,
        private: bool = False,
        max_age: float = 7 * 24 * 3600,
        max_count: int = 200,
    ) -> None:
        self.root = Path(root)
        self.boundary = Path(boundary) if boundary is not None else self.root
        self.directory = self.root / safe_file_name(session)
        self.private = private
        self.max_age = max_age
        self.max_count = max_count

    @classmethod
    def in_workspace(cls, workspace: Path, session: str = "default", **options: Any) -> ResultStore:
        """A store at ``<workspace>/.toolbridge/results/<session>/``, kept inside the workspace."""
        workspace = Path(workspace)
        return cls(workspace / RESULTS_DIR, session, boundary=workspace, **options)

    @classmethod
    def for_workspace(
        cls, workspace: Path, session: str = "default", **options: Any
    ) -> ResultStore:
        """The default store of a workspace: under `private_results_root()`, one folder per
        workspace (a short hash of its path), then one per session. Nothing in the workspace."""
        digest = hashlib.sha256(str(Path(workspace).absolute()).encode()).hexdigest()[:16]
        return cls(private_results_root() / digest, session, private=True, **options)

    def path_for(self, call_id: str) -> Path:
        """Where the result of `call_id` is (or would be) stored."""
        return self.directory / f"{safe_file_name(call_id)}.txt"

    def save(self, call_id: str, text: str) -> Path:
        """Store `text` for `call_id` atomically, prune old results, return the path."""
        self._check_directory(create=True)
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

    def has(self, call_id: str) -> bool:
        """Whether a result is stored for `call_id` (a regular file, not a link)."""
        try:
            return stat.S_ISREG(self.path_for(call_id).lstat().st_mode)
        except OSError:
            return False

    def read(self, call_id: str, offset: int = 0, limit: int = 20_000) -> ResultPage:
        """Up to `limit` characters of the stored result from character `offset`.

        Raises `FileNotFoundError` when nothing is stored for `call_id`. Reaching a page
        costs a scan of the file up to it (in C, about a millisecond per megabyte).
        """
        if offset < 0 or limit < 1:
            raise ValueError("offset must be >= 0 and limit >= 1")
        path = self.path_for(call_id)
        self._check_directory(create=False)
        # No-follow and non-blocking, then only a regular file: a symlink or a FIFO planted
        # in the results folder can neither lead outside nor hang the read.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise FileNotFoundError(f"{path.name} is not a regular file")
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        position = 0  # characters decoded so far
        parts: list[str] = []
        taken = 0
        decoding = False
        with os.fdopen(fd, "rb") as handle:
            while True:
                block = handle.read(_READ_BLOCK)
                if not decoding and taken < limit and position + len(block) >= offset:
                    decoding = True  # the page starts in this block
                    skip = 0  # bytes that finish a character counted with the block before
                    while skip < min(3, len(block)) and block[skip] & 0xC0 == 0x80:
                        skip += 1
                    block = block[skip:]
                if decoding:
                    text = decoder.decode(block, final=not block)
                    if position + len(text) > offset:
                        piece = text[max(0, offset - position) :][: limit - taken]
                        parts.append(piece)
                        taken += len(piece)
                    position += len(text)
                    if taken >= limit:  # the rest is only counted; a character cut at the
                        decoding = False  # end of this block is counted here
                        position += 1 if decoder.getstate()[0] else 0
                else:  # before or after the page: count characters, do not decode
                    position += len(block.translate(None, _CONTINUATION_BYTES))
                if not block:
                    break
        start = min(offset, position)
        return ResultPage("".join(parts), start, start + taken, position)

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

    def _check_directory(self, *, create: bool) -> None:
        """Refuse a session folder that resolves outside the boundary; make it if asked."""
        if create and self.private:
            _make_private(self.root.parent.parent)
        boundary = self.boundary.resolve()
        for check in ("before", "after") if create else ("before",):
            resolved = self.directory.resolve()
            if resolved != boundary and boundary not in resolved.parents:
                raise WorkspaceViolation(
                    f"the results folder {self.directory} resolves outside {self.boundary}",
                    target=str(resolved),
                )
            if check == "before" and create:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)


def _make_private(folder: Path) -> None:
    """Create `folder` for this user alone, or refuse one that someone else controls."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    owner_ok = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    if not stat.S_ISDIR(info.st_mode) or not owner_ok or info.st_mode & 0o077:
        raise PermissionError(
            f"{folder} must be a folder owned by this user with mode 0700; refusing to keep "
            "tool results in it (remove it, or set ExecutionPolicy.results_dir)"
        )


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
    `read_tool_result` (which must be callable where the result goes: `ToolExecutor`
    registers it with its store). Images pass unchanged. Without a store the text is
    only cut, and no pager is named.
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
        metadata[SAVED_METADATA_KEY] = {
            "call_id": call_id,
            "path": str(path),
            "size": len(text),
            "pager": PAGER_TOOL,
        }
        note += (
            f"\n[The full output is saved. Read it in pages with {PAGER_TOOL}(call_id="
            f"{json.dumps(call_id)}, offset=0, limit=20000); offsets count characters, and "
            "each page says its next offset.]"
        )
    capped = f"{note}\n\n{preview}"
    new_content: str | list[ContentBlock] = capped if not images else [TextBlock(capped), *images]
    return ToolResult(new_content, result.is_error, result.error_kind, metadata)
