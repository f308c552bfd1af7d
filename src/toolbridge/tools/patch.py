"""`apply_patch`: many edits in many files, in one atomic call through the workspace guard.

The model sends either a patch (the V4A format Codex and OpenAI models write, or a
unified diff; see `toolbridge.tools._patches`) or a list of exact ``{path, old_text,
new_text}`` replacements. Every file is read and every new content computed before
anything is written; if any part fails, no file changes. Each file is then written
atomically by the guard (temporary file and rename, permission bits kept); should a
write fail half-way, the files already written are put back.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolbridge.core.errors import ErrorKind, ToolError, ToolExecutionError
from toolbridge.core.tool import ToolResult, tool_parameters
from toolbridge.tools._fs import WorkspaceTool, decode_text, human_size
from toolbridge.tools._patches import (
    FileChange,
    PatchError,
    TextLines,
    apply_hunks,
    closest_windows,
    parse_patch,
)

__all__ = ["ApplyPatchTool"]

logger = logging.getLogger(__name__)

BOM = b"\xef\xbb\xbf"
MAX_FILE_BYTES = 10 * 1024 * 1024


@dataclass(slots=True)
class _File:
    """One file as the patch sees it: what is on disk, and what it will be."""

    real: Path
    shown: str
    original: bytes | None  # None: the file does not exist
    text: str | None  # the content once the patch is applied; None: absent
    bom: bool = False
    mode: int | None = None  # permission bits to give a file moved here
    added: int = 0
    removed: int = 0
    moved_from: str | None = None
    touches: int = 0  # file operations and edits of this call on the file

    def counts(self, original: str | None, text: str | None) -> tuple[int, int]:
        """Lines added and removed: the operations' own counts when there was one; for a
        file touched several times, the net change (an Add then an Update was '+2 -1')."""
        if self.touches <= 1:
            return self.added, self.removed
        return _net_counts(original or "", text or "")


@dataclass(frozen=True, slots=True)
class _Row:
    action: str
    path: str
    added: int
    removed: int
    moved_to: str | None = None

    def render(self) -> str:
        target = f"{self.path} -> {self.moved_to}" if self.moved_to else self.path
        return f"{self.action} {target} (+{self.added} -{self.removed})"


@dataclass(slots=True)
class _Plan:
    """The files a call touches, keyed by real path, in the order they were first touched."""

    files: dict[Path, _File] = field(default_factory=dict)
    rows: list[tuple[str, Path, Path | None]] = field(default_factory=list)


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "patch": {
                "type": ["string", "null"],
                "description": "A patch in the V4A format: '*** Begin Patch', then per file "
                "'*** Add File: PATH' (every line prefixed '+'), '*** Delete File: PATH', or "
                "'*** Update File: PATH' (optionally '*** Move to: NEW') with hunks that "
                "start at '@@' (optionally '@@ <line to search from>', e.g. a def or class "
                "line) holding context ' ', removed '-' and added '+' lines, then "
                "'*** End Patch'. A unified diff (--- a/x, +++ b/x, @@ -l,n +l,n @@) works too.",
            },
            "edits": {
                "type": ["array", "null"],
                "minItems": 1,
                "description": "Exact replacements instead of a patch: old_text must occur "
                "exactly once in path; an empty old_text creates a new file.",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "minLength": 1},
                        "old_text": {"type": "string"},
                        "new_text": {"type": "string"},
                    },
                    "required": ["path", "old_text", "new_text"],
                    "additionalProperties": False,
                },
            },
            "dry_run": {
                "type": "boolean",
                "default": False,
                "description": "Check the patch and report what it would change, writing nothing.",
            },
        },
        "additionalProperties": False,
    }
)
class ApplyPatchTool(WorkspaceTool):
    """Apply a V4A patch, a unified diff, or a list of exact edits, to many files at once."""

    name = "apply_patch"
    description = (
        "Change, add, delete or move several files in one atomic call: send `patch` (V4A "
        "format, or a unified diff) or `edits` (exact old_text -> new_text replacements), "
        "not both. Hunks are placed by their context lines, not line numbers; a context "
        "that matches nowhere or in two places is an error. If any part fails, no file is "
        "changed. The result lists each file with its +added/-removed lines."
    )

    async def run(self, **kwargs: Any) -> ToolResult:
        patch, edits = kwargs.get("patch"), kwargs.get("edits")
        if (patch is None) == (edits is None):
            return _invalid(
                "send exactly one of `patch` and `edits`"
                + (" (both were given)" if patch is not None else " (neither was given)"),
                "Put a V4A patch or unified diff in `patch`, or a list of "
                "{path, old_text, new_text} in `edits`.",
            )
        dry_run = bool(kwargs.get("dry_run", False))
        if patch is not None:
            try:
                changes = parse_patch(patch)
            except PatchError as exc:
                return _invalid(f"the patch cannot be read: {exc.message}", exc.hint)
            paths = [p for c in changes for p in (c.path, c.move_to) if p is not None]
            return await asyncio.to_thread(
                self._apply, paths, lambda plan: self._patch(plan, changes), dry_run
            )
        listed: list[dict[str, str]] = kwargs["edits"]
        paths = [edit["path"] for edit in listed]
        return await asyncio.to_thread(
            self._apply, paths, lambda plan: self._edits(plan, listed), dry_run
        )

    # --- planning: read, check and compute; nothing is written ----------------------------

    def _apply(
        self, paths: Sequence[str], build: Callable[[_Plan], None], dry_run: bool
    ) -> ToolResult:
        # Plan and write alone, holding every file the call touches: two calls planned
        # from the same text both passed the "unchanged" check and both wrote, and one
        # change was lost (reported as applied); write_file and edit_file take the same
        # locks. A path the guard refuses fails here, before anything is read.
        reals = [self.resolve_file(path) for path in paths]
        with self.locks.hold(reals):
            return self._apply_alone(build, dry_run)

    def _apply_alone(self, build: Callable[[_Plan], None], dry_run: bool) -> ToolResult:
        plan = _Plan()
        try:
            build(plan)
        except PatchError as exc:
            raise ToolExecutionError(
                exc.message + "\nNothing was changed.", hint=exc.hint
            ) from None
        rows = self._rows(plan)
        if not dry_run:
            self._commit(plan)
        added = sum(row.added for row in rows)
        removed = sum(row.removed for row in rows)
        noun = "file" if len(rows) == 1 else "files"
        if dry_run:
            head = (
                f"Dry run: the patch applies cleanly to {len(rows)} {noun} (+{added} "
                f"-{removed}); nothing was written."
            )
        else:
            head = f"Applied: {len(rows)} {noun} changed (+{added} -{removed})."
        metadata = {
            "dry_run": dry_run,
            "files": [
                {
                    "path": row.path,
                    "action": row.action,
                    "added": row.added,
                    "removed": row.removed,
                    **({"moved_to": row.moved_to} if row.moved_to else {}),
                }
                for row in rows
            ],
        }
        return ToolResult("\n".join([head, *(row.render() for row in rows)]), metadata=metadata)

    def _patch(self, plan: _Plan, changes: Sequence[FileChange]) -> None:
        for change in changes:
            if change.action == "add":
                self._add(plan, change)
            elif change.action == "delete":
                entry = self._existing(plan, change.path, "delete")
                self._refuse_link(change.path, "delete")
                if change.hunks:  # a unified diff's deletion lists the lines it removes
                    assert entry.text is not None
                    rest = apply_hunks(TextLines.split(entry.text), change.hunks, entry.shown)
                    if rest.texts:
                        left = len(rest.texts)
                        raise PatchError(
                            f"the diff deletes {entry.shown}, but {left} of its lines "
                            f"{'is' if left == 1 else 'are'} not in the diff's removed lines",
                            hint="Read the file again and send a diff of its whole content, "
                            "or use '*** Delete File:'.",
                        )
                entry.removed += _count_lines(entry.text)
                entry.touches += 1
                entry.text = None
            else:
                self._update(plan, change)

    def _add(self, plan: _Plan, change: FileChange) -> None:
        entry = self._load(plan, change.path)
        content = change.content
        if entry.text is not None:
            raise PatchError(
                f"'*** Add File: {entry.shown}': {entry.shown} already exists",
                hint="Use '*** Update File:' to change an existing file (or delete it first "
                "in the same patch).",
            )
        text = "\n".join(content)
        entry.text = text + ("\n" if content and not change.ends_without_newline else "")
        if change.mode is not None:  # git's 'new file mode 100755'
            entry.mode = change.mode
        entry.added += len(content)
        entry.touches += 1

    def _update(self, plan: _Plan, change: FileChange) -> None:
        entry = self._existing(plan, change.path, "update")
        assert entry.text is not None
        lines = apply_hunks(TextLines.split(entry.text), change.hunks, entry.shown)
        entry.added += sum(hunk.added for hunk in change.hunks)
        entry.removed += sum(hunk.removed for hunk in change.hunks)
        entry.touches += 1
        new_text = lines.join()
        if change.move_to is None:
            entry.text = new_text
            return
        self._refuse_link(change.path, "move")
        target = self._load(plan, change.move_to)
        if target.real == entry.real:
            entry.text = new_text
            return
        if target.text is not None:
            raise PatchError(
                f"'*** Move to: {target.shown}': {target.shown} already exists",
                hint="Move the file to a path that does not exist yet, or delete that file "
                "first in the same patch.",
            )
        target.text, target.bom, target.mode = new_text, entry.bom, entry.mode
        target.added, target.removed = entry.added, entry.removed
        target.touches = entry.touches
        target.moved_from = entry.shown
        entry.text, entry.added, entry.removed = None, 0, 0
        plan.rows.append(("moved", entry.real, target.real))

    def _edits(self, plan: _Plan, edits: Sequence[dict[str, str]]) -> None:
        for number, edit in enumerate(edits, 1):
            path, old, new = edit["path"], edit["old_text"], edit["new_text"]
            if old and old == new:  # as edit_file: an edit that changes nothing is a mistake
                raise PatchError(
                    f"edit {number}: old_text and new_text are identical, so there is "
                    "nothing to change",
                    hint="Send the text you want in new_text, or leave this edit out.",
                )
            if old == "":
                entry = self._load(plan, path)
                if entry.text is not None:
                    raise PatchError(
                        f"edit {number}: old_text is empty, which creates a file, but "
                        f"{entry.shown} already exists",
                        hint="Give the exact text to replace in old_text, or choose a new path.",
                    )
                entry.text = new
                entry.added += _count_lines(new)
                entry.touches += 1
                continue
            entry = self._existing(plan, path, "edit")
            text = entry.text
            assert text is not None
            if old not in text and "\r\n" in text and "\n" in old:
                old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")  # a CRLF file
            count = text.count(old)
            if count != 1:
                raise _edit_mismatch(number, entry.shown, text, old, count)
            entry.text = text.replace(old, new, 1)
            added, removed = _diff_counts(old, new)
            entry.added += added
            entry.removed += removed
            entry.touches += 1

    def _load(self, plan: _Plan, path: str) -> _File:
        """The file `path` names, as the plan has it so far (read from disk the first time)."""
        real = self.workspace.resolve(path)
        entry = plan.files.get(real)
        if entry is not None:
            return entry
        shown = self.workspace.relative(real)
        original: bytes | None = None
        mode = None
        if os.path.lexists(real):
            with self.workspace.open_read(real) as file:
                mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
                original = file.read(MAX_FILE_BYTES + 1)
            if len(original) > MAX_FILE_BYTES:
                raise PatchError(
                    f"{shown} is larger than {human_size(MAX_FILE_BYTES)}, too large to patch",
                    hint="Use exec with a stream editor for very large files.",
                )
        text: str | None = None
        if original is not None:
            try:
                text = decode_text(original, shown)
            except ToolExecutionError as exc:
                raise PatchError(exc.message, hint=exc.hint) from None
        entry = _File(
            real, shown, original, text, bool(original and original.startswith(BOM)), mode
        )
        plan.files[real] = entry
        plan.rows.append(("", real, None))
        return entry

    def _existing(self, plan: _Plan, path: str, verb: str) -> _File:
        entry = self._load(plan, path)
        if entry.text is None:
            gone = (
                "was deleted or moved earlier in this patch" if entry.original else "does not exist"
            )
            raise PatchError(
                f"cannot {verb} {entry.shown}: it {gone}",
                hint="Check the path with list_dir or glob; use '*** Add File:' (or an edit "
                "with an empty old_text) to create a file.",
            )
        return entry

    def _refuse_link(self, path: str, verb: str) -> None:
        """A path whose last part is a symlink names the link: refuse to delete or move it."""
        parent, name = self.workspace.last_part(path)  # a name that is not UTF-8 as its bytes
        with self.workspace.open_dir(parent) as fd:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                return
        if stat.S_ISLNK(info.st_mode):
            raise PatchError(
                f"cannot {verb} {path}: it is a symbolic link",
                hint="apply_patch deletes and moves regular files only; change the link "
                "with exec if that is what you mean.",
            )

    def _rows(self, plan: _Plan) -> list[_Row]:
        rows: list[_Row] = []
        moved = {
            source: target
            for action, source, target in plan.rows
            if action == "moved" and target is not None
        }
        targets = set(moved.values())
        for action, real, _ in plan.rows:
            if action:
                continue
            entry = plan.files[real]
            if real in targets:
                continue  # reported on its source's row
            if real in moved:
                target = plan.files[moved[real]]
                source_text = _decoded(entry.original)
                added, removed = target.counts(source_text, target.text)
                rows.append(_Row("moved", entry.shown, added, removed, target.shown))
                continue
            if entry.original is None and entry.text is None:
                continue  # added and deleted again
            if entry.original is None:
                kind = "added"
            elif entry.text is None:
                kind = "deleted"
            elif entry.text == entry.original.decode("utf-8-sig"):
                continue  # nothing changed
            else:
                kind = "updated"
            added, removed = entry.counts(_decoded(entry.original), entry.text)
            rows.append(_Row(kind, entry.shown, added, removed))
        return rows

    # --- writing ------------------------------------------------------------------------

    def _commit(self, plan: _Plan) -> None:
        """Write every changed file (deletions last); on a failure put back what was done."""
        for entry in plan.files.values():  # the tree must still be what the plan was made from
            if self._current(entry.real) != entry.original:
                raise ToolExecutionError(
                    f"{entry.shown} changed while the patch was being prepared; nothing was "
                    "written",
                    hint="Read the file again and send the patch again.",
                )
        writes = [e for e in plan.files.values() if e.text is not None and _changed(e)]
        deletes = [e for e in plan.files.values() if e.text is None and e.original is not None]
        done: list[_File] = []
        try:
            for entry in writes:
                assert entry.text is not None
                data = (BOM if entry.bom else b"") + entry.text.encode("utf-8")
                created = self.workspace.write_atomic(entry.real, data)
                done.append(entry)
                if created and entry.mode is not None:
                    self._set_mode(entry.real, entry.mode)
            for entry in deletes:
                self._delete(entry)
                done.append(entry)
        except BaseException as exc:
            problems = self._restore(done)
            if isinstance(exc, Exception) and not problems:
                message = getattr(exc, "message", str(exc))
                raise ToolExecutionError(
                    f"{message}\nThe files written before this failure were put back: "
                    "nothing was changed.",
                    hint=getattr(exc, "hint", "") or "Fix the cause and send the patch again.",
                ) from None
            if problems:
                logger.error("apply_patch could not put back %s", ", ".join(problems))
            raise

    def _set_mode(self, real: Path, mode: int) -> None:
        """Give the file at `real` the permission bits `mode` (opened without following links)."""
        with self.workspace.open_read(real) as file:
            os.fchmod(file.fileno(), mode)

    def _current(self, real: Path) -> bytes | None:
        if not os.path.lexists(real):
            return None
        with self.workspace.open_read(real) as file:
            return file.read(MAX_FILE_BYTES + 1)

    def _delete(self, entry: _File) -> None:
        with self.workspace.open_dir(entry.real.parent) as fd:
            info = os.stat(entry.real.name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                raise ToolExecutionError(
                    f"{entry.shown} changed while the patch was applied (no longer a regular file)",
                    hint="Check the file and send the patch again.",
                )
            os.unlink(entry.real.name, dir_fd=fd)

    def _restore(self, done: list[_File]) -> list[str]:
        """Put the files in `done` back as they were; the names of those that could not be."""
        problems: list[str] = []
        for entry in reversed(done):
            try:
                if entry.original is None:
                    self._delete(entry)
                elif self.workspace.write_atomic(entry.real, entry.original) and entry.mode:
                    self._set_mode(entry.real, entry.mode)  # a deleted file comes back as it was
            except (OSError, ToolExecutionError) as exc:
                problems.append(f"{entry.shown} ({exc})")
        return problems


def _changed(entry: _File) -> bool:
    if entry.original is None or entry.text is None:
        return True
    return entry.text != entry.original.decode("utf-8-sig")


def _count_lines(text: str | None) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _decoded(original: bytes | None) -> str | None:
    return None if original is None else original.decode("utf-8-sig")


def _net_counts(old: str, new: str) -> tuple[int, int]:
    """Lines added and removed from `old` to `new`, by a line diff of the two."""
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines())
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def _diff_counts(old: str, new: str) -> tuple[int, int]:
    """Lines added and removed when `old` becomes `new`."""
    added = removed = 0
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        if line.startswith("+ "):
            added += 1
        elif line.startswith("- "):
            removed += 1
    return added, removed


def _edit_mismatch(number: int, shown: str, text: str, old: str, count: int) -> PatchError:
    if count > 1:
        return PatchError(
            f"edit {number}: old_text occurs {count} times in {shown}; it must occur exactly once",
            hint="Add surrounding lines to old_text so that it matches only the place you mean.",
        )
    lines = text.splitlines()
    windows = closest_windows(lines, old.strip("\n").splitlines())
    parts = [f"edit {number}: old_text was not found in {shown}"]
    if windows:
        parts.append("The closest text:")
        for ratio, start, end in windows:
            where = f"line {end}" if end == start + 1 else f"lines {start + 1}-{end}"
            parts.append(f"{where} ({ratio:.0%} similar):")
            parts.extend(f"{n + 1:>6}\t{lines[n]}" for n in range(start, end))
    return PatchError(
        "\n".join(parts),
        hint="Copy the text exactly from the file (read it with read_file) into old_text.",
    )


def _invalid(message: str, hint: str) -> ToolResult:
    return ToolResult.error(ToolError(ErrorKind.INVALID_ARGUMENTS, message, hint))
