"""Patches a model writes, read and applied to text: the V4A format and unified diffs.

The V4A format is the one Codex and OpenAI models write for ``apply_patch``
(``*** Begin Patch`` ... ``*** End Patch``, hunks placed by context lines and
``@@`` anchors, not line numbers); a plain unified diff (``--- a/x``, ``+++ b/x``,
``@@ -l,n +l,n @@``) is read too. `parse_patch` turns either into `FileChange`s and
`apply_hunks` finds each hunk's place in a file's text. Both are pure (no I/O): the
``apply_patch`` tool reads and writes through the workspace guard.

A hunk goes where its context matches exactly, else ignoring trailing whitespace,
else ignoring leading and trailing whitespace; a context that matches in two places
at the first level that matches is an error, since a wrong place is worse than a retry.
"""

from __future__ import annotations

import bisect
import difflib
import re
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FileChange",
    "Hunk",
    "PatchError",
    "TextLines",
    "apply_hunks",
    "closest_windows",
    "parse_patch",
]

LineKind = Literal[" ", "-", "+"]
Action = Literal["add", "delete", "update"]

_BEGIN = "*** Begin Patch"
_END = "*** End Patch"
_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE = "*** Move to: "
_EOF = "*** End of File"
_UNIFIED_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# A unified hunk header written inside a V4A patch, after its '@@': the numbers are
# ignored (V4A places hunks by context); the text after them is an anchor.
_NUMBERED_HEADER = re.compile(r"-\d+(?:,\d+)? \+\d+(?:,\d+)? @@(.*)")

# Context matching levels, strictest first: what a line is compared by.
LEVELS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("exactly", lambda line: line),
    ("ignoring trailing whitespace", str.rstrip),
    ("ignoring leading and trailing whitespace", str.strip),
)


class PatchError(ValueError):
    """A patch that cannot be read or applied; `message` says where, `hint` how to fix it."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True, slots=True)
class Hunk:
    """One change in a file: `lines` of context (" "), removals ("-") and additions ("+").

    `anchors` are the ``@@ <line>`` lines to find first, in order; `end_of_file` says the
    context ends at the end of the file. Unified diffs give `old_start` (1-based, a hint
    among equal places) and may say the new text ends without a newline.
    """

    number: int
    lines: tuple[tuple[LineKind, str], ...]
    anchors: tuple[str, ...] = ()
    end_of_file: bool = False
    old_start: int | None = None
    new_ends_without_newline: bool = False

    @property
    def old(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "+"]

    @property
    def new(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "-"]

    @property
    def added(self) -> int:
        return sum(kind == "+" for kind, _ in self.lines)

    @property
    def removed(self) -> int:
        return sum(kind == "-" for kind, _ in self.lines)


@dataclass(frozen=True, slots=True)
class FileChange:
    """What a patch does to one file: add it (with `content` lines), delete it, or update it
    with `hunks` (and move it to `move_to`)."""

    action: Action
    path: str
    hunks: tuple[Hunk, ...] = ()
    content: tuple[str, ...] = ()
    move_to: str | None = None
    ends_without_newline: bool = False
    mode: int | None = None  # permission bits of an added file (git's 'new file mode')


# --- reading a patch -------------------------------------------------------------------


def parse_patch(text: str) -> tuple[FileChange, ...]:
    """The file changes of a V4A patch or a unified diff; `PatchError` says what is wrong."""
    # A byte order mark (a patch read from a file saved on Windows) is no part of the text.
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    lines = _unwrap_heredoc(_unwrap_fence(_trim_blank(lines)))
    if not lines:
        raise PatchError("the patch is empty", hint=_FORMAT_HINT)
    if lines[0].strip() == _BEGIN:
        return _V4AReader(lines).read()
    if any(
        line.startswith("diff --git ")
        or (
            line.startswith("--- ")
            and index + 1 < len(lines)
            and lines[index + 1].startswith("+++ ")
        )
        for index, line in enumerate(lines)
    ):
        return _read_unified(lines)
    raise PatchError(
        f"the patch starts with {_show(lines[0])}; it must start with '{_BEGIN}' (V4A) or be "
        "a unified diff with '--- a/PATH' and '+++ b/PATH' lines",
        hint=_FORMAT_HINT,
    )


_FORMAT_HINT = (
    "Write '*** Begin Patch', then for each file '*** Add File: PATH' (lines starting with "
    "'+'), '*** Delete File: PATH', or '*** Update File: PATH' with hunks that start at '@@' "
    "and hold context (' '), removed ('-') and added ('+') lines, then '*** End Patch'."
)


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1]:  # " " at the end is an empty context line
        end -= 1
    return lines[start:end]


def _unwrap_fence(lines: list[str]) -> list[str]:
    """A patch sent inside a Markdown code fence (```diff ... ```), without the fence."""
    fenced = len(lines) >= 2 and re.fullmatch(r"```[\w+-]*", lines[0].strip())
    if fenced and lines[-1].strip() == "```":
        return _trim_blank(lines[1:-1])
    return lines


def _unwrap_heredoc(lines: list[str]) -> list[str]:
    """A patch sent as a shell here-document (``<<'EOF'`` ... ``EOF``), without the wrapper."""
    if len(lines) >= 2 and re.fullmatch(r"(apply_patch\s+)?<<-?\s*['\"]?(\w+)['\"]?", lines[0]):
        marker = re.sub(r"\W", "", lines[0].split("<<", 1)[1].lstrip("-"))
        if lines[-1].strip() == marker:
            return _trim_blank(lines[1:-1])
    return lines


class _V4AReader:
    """Reads ``*** Begin Patch`` ... ``*** End Patch`` line by line."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.index = 1

    def read(self) -> tuple[FileChange, ...]:
        changes: list[FileChange] = []
        lines = self.lines
        ended = False
        while self.index < len(lines):
            line = lines[self.index]
            stripped = line.strip()
            self.index += 1
            if stripped == _END:
                ended = True
                break
            if not stripped:
                continue
            if stripped.startswith(_ADD):
                changes.append(self._add(_header_path(stripped, _ADD)))
            elif stripped.startswith(_DELETE):
                changes.append(FileChange("delete", _header_path(stripped, _DELETE)))
            elif stripped.startswith(_UPDATE):
                changes.append(self._update(_header_path(stripped, _UPDATE)))
            else:
                raise PatchError(
                    f"line {self.index}: {_show(line)} is not a file operation; expected "
                    f"'{_ADD}PATH', '{_DELETE}PATH', '{_UPDATE}PATH' or '{_END}'",
                    hint=_FORMAT_HINT,
                )
        if not ended:
            raise PatchError(
                f"the patch does not end with '{_END}' (it may have been cut off)",
                hint=f"Send the whole patch, ending with a line '{_END}'.",
            )
        rest = [line for line in lines[self.index :] if line.strip()]
        if rest:
            raise PatchError(
                f"text after '{_END}': {_show(rest[0])}",
                hint="Put every file operation between '*** Begin Patch' and '*** End Patch'.",
            )
        if not changes:
            raise PatchError("the patch holds no file operations", hint=_FORMAT_HINT)
        return tuple(changes)

    def _add(self, path: str) -> FileChange:
        content: list[str] = []
        while self.index < len(self.lines) and self.lines[self.index].startswith("+"):
            content.append(self.lines[self.index][1:])
            self.index += 1
        return FileChange("add", path, content=tuple(content))

    def _update(self, path: str) -> FileChange:
        lines = self.lines
        move_to = None
        if self.index < len(lines) and lines[self.index].strip().startswith(_MOVE):
            move_to = _header_path(lines[self.index].strip(), _MOVE)
            self.index += 1
        hunks = _HunkCollector(path)
        while self.index < len(lines):
            line = lines[self.index]
            stripped = line.strip()
            if stripped == _EOF:
                self.index += 1
                hunks.finish(end_of_file=True)
                continue
            # The next operation, or the end. A context line (' *** note') is not one.
            if stripped == _END or line.startswith((_ADD, _DELETE, _UPDATE)):
                break
            self.index += 1
            hunks.add(line, self.index)
        hunks.finish(end_of_file=False)
        if hunks.anchors:
            raise PatchError(
                f"the update of {path} ends with '@@ {hunks.anchors[-1]}' and no hunk lines "
                "after it",
                hint="Follow each '@@' line with the hunk's context, '-' and '+' lines.",
            )
        if not hunks.hunks and move_to is None:
            raise PatchError(
                f"'{_UPDATE}{path}' has no hunks",
                hint="Add at least one hunk starting with '@@', or leave the file out.",
            )
        return FileChange("update", path, hunks=tuple(hunks.hunks), move_to=move_to)


class _HunkCollector:
    """Gathers the hunk lines of one ``*** Update File`` section into `Hunk`s."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.hunks: list[Hunk] = []
        self.anchors: list[str] = []
        self.body: list[tuple[LineKind, str]] = []
        self.blank_tail = 0  # empty patch lines at the end of `body` (read as empty context)

    def add(self, line: str, number: int) -> None:
        if line.startswith("@@"):
            if self.body:
                self.finish(end_of_file=False)
            anchor = line[2:].strip()
            numbered = _NUMBERED_HEADER.fullmatch(anchor)  # '@@ -3,4 +3,5 @@ def f():'
            if numbered is not None:
                anchor = numbered.group(1).strip()  # git's function context, if any
            if anchor and not re.fullmatch(r"@*", anchor):
                self.anchors.append(anchor)
            return
        if line == "":
            self.body.append((" ", ""))
            self.blank_tail += 1
            return
        kind = line[0]
        if kind not in " -+":
            raise PatchError(
                f"line {number} in the update of {self.path}: {_show(line)} starts with "
                "neither ' ', '-', '+' nor '@@'",
                hint="Start every hunk line with a space (context), '-' (removed) or '+' "
                "(added); start a hunk with '@@'.",
            )
        self.body.append((kind, line[1:]))  # type: ignore[arg-type]
        self.blank_tail = 0

    def finish(self, *, end_of_file: bool) -> None:
        body = self.body
        if self.blank_tail:  # blank lines before the next header are spacing, not context
            del body[len(body) - self.blank_tail :]
        self.blank_tail = 0
        if not body:
            if end_of_file:
                raise PatchError(
                    f"'{_EOF}' in {self.path} follows no hunk lines", hint="Put it after a hunk."
                )
            return
        if all(kind == " " for kind, _ in body):
            raise PatchError(
                f"hunk {len(self.hunks) + 1} of {self.path} has only context lines, no '-' or "
                "'+' lines",
                hint="Mark removed lines with '-' and added lines with '+'.",
            )
        number = len(self.hunks) + 1
        self.hunks.append(Hunk(number, tuple(body), tuple(self.anchors), end_of_file))
        self.anchors, self.body = [], []


def _header_path(line: str, prefix: str) -> str:
    path = line[len(prefix) :].strip()
    if not path:
        raise PatchError(f"{_show(line)} names no file", hint=f"Write '{prefix}PATH'.")
    if path.endswith("/"):  # the guard drops the '/': 'Add File: src/' made a file 'src'
        raise PatchError(
            f"{_show(line)} names a directory (it ends with '/'), not a file",
            hint=f"Write '{prefix}DIR/NAME': a file's directories are made as needed.",
        )
    return path


def _read_unified(lines: list[str]) -> tuple[FileChange, ...]:
    """The changes of a unified diff (``git diff`` output included; prose around is skipped)."""
    changes: list[FileChange] = []
    index = 0
    rename: dict[str, str] = {}
    mode: int | None = None  # git's 'new file mode' or 'new mode' of the file that follows
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            if rename.keys() == {"from", "to"}:
                changes.append(FileChange("update", rename["from"], move_to=rename["to"]))
            rename, mode = {}, None
        elif line.startswith(("new file mode ", "new mode ")):
            mode = _git_mode(line)
        elif line.startswith(("rename from ", "rename to ")):
            word, _, path = line[len("rename ") :].partition(" ")
            rename[word] = _unquote(path.strip())
        if not (line.startswith("--- ") and index + 1 < len(lines)):
            index += 1
            continue
        if not lines[index + 1].startswith("+++ "):
            index += 1
            continue
        old, new = _diff_path(line[4:]), _diff_path(lines[index + 1][4:])
        rename = {}
        index += 2
        hunks: list[Hunk] = []
        while index < len(lines) and lines[index].startswith("@@"):
            hunk, index = _read_unified_hunk(lines, index, len(hunks) + 1, new or old or "?")
            hunks.append(hunk)
        if not hunks:
            raise PatchError(
                f"the diff of {new or old} has no '@@ -l,n +l,n @@' hunks",
                hint="Give each file's changes as hunks under its '---'/'+++' lines.",
            )
        changes.append(_unified_change(old, new, hunks, mode))
        mode = None
    if rename.keys() == {"from", "to"}:
        changes.append(FileChange("update", rename["from"], move_to=rename["to"]))
    if not changes:
        raise PatchError("the unified diff holds no file changes", hint=_FORMAT_HINT)
    return tuple(changes)


def _unified_change(
    old: str | None, new: str | None, hunks: list[Hunk], mode: int | None
) -> FileChange:
    """The change one file's ``---``/``+++`` lines and hunks make (`mode`: git's mode line)."""
    if mode is not None and not stat.S_ISREG(mode):
        what = _MODE_KINDS.get(stat.S_IFMT(mode), "special file")
        raise PatchError(
            f"the diff makes {new or old} a {what} (mode {mode:o}); apply_patch writes "
            "regular files only",
            hint="Leave that file out of the patch, and create links or submodules with exec.",
        )
    if old is None:
        if new is None:
            raise PatchError("a diff goes from /dev/null to /dev/null", hint=_FORMAT_HINT)
        content = tuple(text for hunk in hunks for kind, text in hunk.lines if kind != "-")
        ends = hunks[-1].new_ends_without_newline
        bits = None if mode is None else stat.S_IMODE(mode)
        return FileChange("add", new, content=content, ends_without_newline=ends, mode=bits)
    if new is None:  # the hunks say what is deleted: checked against the file
        return FileChange("delete", old, hunks=tuple(hunks))
    return FileChange("update", old, hunks=tuple(hunks), move_to=new if new != old else None)


_MODE_KINDS = {stat.S_IFLNK: "symbolic link", 0o160000: "submodule (gitlink)"}


def _git_mode(line: str) -> int:
    """The mode of git's 'new file mode 100755' or 'new mode 100644' line."""
    text = line.rsplit(" ", 1)[-1]
    if not re.fullmatch(r"[0-7]{6}", text):
        raise PatchError(
            f"{_show(line)} gives no file mode git writes (six octal digits, as 100644)",
            hint="Write 'new file mode 100644' (or 100755), or leave the line out.",
        )
    return int(text, 8)


def _diff_path(text: str) -> str | None:
    """The path of a ``---``/``+++`` line: None for /dev/null, without git's a/ and b/."""
    path = text.split("\t", 1)[0].strip()
    if path == "/dev/null":
        return None
    path = _unquote(path)
    if path.startswith(("a/", "b/")):
        path = path[2:]
    if not path:
        raise PatchError(f"{_show(text)} names no file", hint="Write '--- a/PATH'.")
    return path


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(path: str) -> str:
    """A path as git writes it: one with a quote, backslash, control or non-ASCII character
    is quoted, with C escapes and octal bytes (``"a/sp\\303\\251cial.txt"``); others as is."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    text, out, index = path[1:-1], bytearray(), 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out += char.encode("utf-8", "surrogatepass")
            index += 1
            continue
        code = text[index + 1 : index + 4]
        if text[index + 1 : index + 2] in _C_ESCAPES:
            out.append(_C_ESCAPES[text[index + 1]])
            index += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", code):
            out.append(int(code, 8))
            index += 4
        else:
            raise PatchError(
                f"the quoted path {_show(path)} has an unknown escape "
                f"{_show(text[index : index + 2])}",
                hint="Write the path without quotes, or quote it as git does (C escapes, "
                "octal bytes such as \\303).",
            )
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise PatchError(
            f"the quoted path {_show(path)} is not UTF-8 once its escapes are read",
            hint="Write the path as UTF-8 text, without quotes.",
        ) from None


def _read_unified_hunk(lines: list[str], index: int, number: int, path: str) -> tuple[Hunk, int]:
    header = _UNIFIED_HUNK.match(lines[index])
    if header is None:
        raise PatchError(
            f"{_show(lines[index])} in the diff of {path} is not a hunk header",
            hint="Write hunk headers as '@@ -START,COUNT +START,COUNT @@'.",
        )
    old_start = int(header.group(1))
    old_count, new_count = int(header.group(2) or 1), int(header.group(4) or 1)
    index += 1
    body: list[tuple[LineKind, str]] = []
    blank_tail = 0
    new_without_newline = False
    while index < len(lines):
        line = lines[index]
        if line.startswith("\\"):  # "\ No newline at end of file" after the line it concerns
            if body and body[-1][0] != "-":
                new_without_newline = True
            index += 1
            continue
        if line.startswith(("@@", "diff --git ")) or (
            line.startswith("--- ")
            and index + 1 < len(lines)
            and lines[index + 1].startswith("+++ ")
        ):
            break
        if line == "-- " and _complete(body, old_count, new_count):
            break  # the signature 'git format-patch' puts after the last hunk, not a removal
        if line == "":
            body.append((" ", ""))
            blank_tail += 1
        elif line[0] in " -+":
            body.append((line[0], line[1:]))  # type: ignore[arg-type]
            blank_tail = 0
        else:
            break
        index += 1
    if blank_tail:
        del body[len(body) - blank_tail :]
    if not any(kind != " " for kind, _ in body):
        raise PatchError(
            f"hunk {number} of {path} has no '-' or '+' lines",
            hint="Mark removed lines with '-' and added lines with '+'.",
        )
    hunk = Hunk(
        number, tuple(body), old_start=old_start, new_ends_without_newline=new_without_newline
    )
    return hunk, index


def _complete(body: list[tuple[LineKind, str]], old_count: int, new_count: int) -> bool:
    """Whether `body` holds the old and new line counts its hunk header states."""
    old = sum(kind != "+" for kind, _ in body)
    new = sum(kind != "-" for kind, _ in body)
    return old >= old_count and new >= new_count


def _show(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


# --- applying hunks to text --------------------------------------------------------------


@dataclass(slots=True)
class TextLines:
    """A file's text as lines and their own line ends, so that a CRLF file stays CRLF.

    `newline` is the file's usual line end (given to added lines); `final_newline` says
    whether the last line ends with one.
    """

    texts: list[str]
    ends: list[str]
    newline: str
    final_newline: bool

    @classmethod
    def split(cls, text: str) -> TextLines:
        parts = text.split("\n")
        final = parts[-1] == ""
        if final:
            parts.pop()
        texts: list[str] = []
        ends: list[str] = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1 and not final
            if part.endswith("\r") and not last:
                texts.append(part[:-1])
                ends.append("\r\n")
            else:
                texts.append(part)
                ends.append("" if last else "\n")
        crlf = ends.count("\r\n")
        newline = "\r\n" if crlf and crlf >= ends.count("\n") else "\n"
        return cls(texts, ends, newline, final or not parts)

    def join(self) -> str:
        if not self.texts:
            return ""
        ends = [end or self.newline for end in self.ends]  # the last keeps its own end too
        if not self.final_newline:
            ends[-1] = ""
        return "".join(text + end for text, end in zip(self.texts, ends, strict=True))


def apply_hunks(lines: TextLines, hunks: Sequence[Hunk], shown: str) -> TextLines:
    """`lines` with every hunk applied in order; `PatchError` names the hunk that does not fit."""
    texts = lines.texts
    places: list[tuple[int, Hunk]] = []
    cursor = 0
    offset = 0  # unified diffs: how far the hunks sit from their stated lines
    positions = _Positions(texts)
    for hunk in hunks:
        start = _place(positions, hunk, cursor, offset, shown)
        if hunk.old_start is not None:
            offset = start - (hunk.old_start - 1)
        places.append((start, hunk))
        cursor = start + len(hunk.old)
    new_texts: list[str] = []
    new_ends: list[str] = []
    done = 0
    for start, hunk in places:
        new_texts.extend(texts[done:start])
        new_ends.extend(lines.ends[done:start])
        position = start
        for kind, text in hunk.lines:
            if kind == " ":  # context keeps the file's own line and its line end
                new_texts.append(texts[position])
                new_ends.append(lines.ends[position])
                position += 1
            elif kind == "-":
                position += 1
            else:
                new_texts.append(text)
                new_ends.append(lines.newline)
        done = position
    new_texts.extend(texts[done:])
    new_ends.extend(lines.ends[done:])
    final = lines.final_newline
    if places:
        start, last = places[-1]
        if last.old_start is not None and start + len(last.old) == len(texts):
            final = not last.new_ends_without_newline  # a unified diff says so at the end
        elif start + len(last.old) == len(texts) and last.lines[-1][0] == "+":
            final = True  # V4A: a line the patch adds at the end is a whole line, as in Codex
    return TextLines(new_texts, new_ends, lines.newline, final or not new_texts)


def _place(positions: _Positions, hunk: Hunk, cursor: int, offset: int, shown: str) -> int:
    """Where `hunk`'s old lines start in `positions.texts`, searching from `cursor`."""
    texts = positions.texts
    old = hunk.old
    starts = _anchor_starts(positions, hunk, cursor, shown) if hunk.anchors else None
    if not old:  # a pure insertion: after the anchor, at the stated line, or at the end
        if starts is not None:
            if len(set(starts)) > 1:
                raise _ambiguous_anchor(texts, hunk, starts, shown)
            return starts[0]
        if hunk.old_start is not None:
            return min(max(hunk.old_start + offset, cursor), len(texts))
        return len(texts)
    if hunk.end_of_file:  # only the end will do, as in Codex: anywhere else is a wrong place
        end = len(texts) - len(old)
        for _, normal in LEVELS:
            if end >= cursor and _matches_at(texts, old, end, normal):
                return end
        raise _not_at_end(texts, hunk, shown)
    for level, normal in LEVELS:
        if starts is None:
            found = _find_all(positions, old, cursor, normal)
        else:
            # From the anchor line itself: a context may repeat it as its first line.
            found = sorted(
                {f for s in starts if (f := _find_first(positions, old, s - 1, normal)) >= 0}
            )
        if not found:
            continue
        if hunk.old_start is not None:
            expected = hunk.old_start - 1 + offset
            if expected in found:
                return expected
        if len(found) == 1:
            return found[0]
        where = ", ".join(str(place + 1) for place in found[:10])
        raise PatchError(
            f"hunk {hunk.number} of {shown} is ambiguous: its context matches {level} at "
            f"{len(found)} places (lines {where}); it was not applied anywhere",
            hint="Add more context lines (or an '@@ <line>' anchor such as the enclosing "
            "def or class) so that the hunk matches only the place you mean.",
        )
    if cursor and _find_first(positions, old, 0, LEVELS[-1][1]) in range(cursor):
        raise PatchError(
            f"hunk {hunk.number} of {shown}: its context is found only before the place of the "
            "hunk before it",
            hint="Order the hunks of a file from top to bottom.",
        )
    raise _not_found(texts, hunk, starts[0] if starts else cursor, shown)


def _anchor_starts(positions: _Positions, hunk: Hunk, cursor: int, shown: str) -> list[int]:
    """The lines after each place the hunk's ``@@`` anchors lead to (the first anchor may
    occur more than once: the context then decides, and must decide on one place)."""
    starts = [cursor]
    for number, anchor in enumerate(hunk.anchors):
        found: list[int] = []
        for _, normal in LEVELS:
            if number == 0:
                found = _find_all(positions, [anchor], cursor, normal)
            else:
                found = sorted(
                    {f for s in starts if (f := _find_first(positions, [anchor], s, normal)) >= 0}
                )
            if found:
                break
        if not found:
            near = _near_text(positions.texts, [anchor], starts[0])
            raise PatchError(
                f"hunk {hunk.number} of {shown}: the anchor '@@ {anchor}' was not found"
                + (f" after line {starts[0]}" if starts[0] else "")
                + near,
                hint="Use an anchor line copied exactly from the file (such as the "
                "enclosing def or class line), or leave the anchor out.",
            )
        starts = [place + 1 for place in found]
    return starts


def _ambiguous_anchor(texts: list[str], hunk: Hunk, starts: list[int], shown: str) -> PatchError:
    where = ", ".join(str(place) for place in starts[:10])
    return PatchError(
        f"hunk {hunk.number} of {shown} is ambiguous: its anchor '@@ {hunk.anchors[0]}' is "
        f"at {len(starts)} places (lines {where}) and the hunk has no context to choose one",
        hint="Add context lines around the change, or a more specific anchor.",
    )


def _matches_at(texts: list[str], old: list[str], start: int, normal: Callable[[str], str]) -> bool:
    if start < 0 or start + len(old) > len(texts):
        return False
    return all(normal(texts[start + i]) == normal(line) for i, line in enumerate(old))


class _Positions:
    """Where each line of a text is, per matching level: a hunk is tried only where its
    first line is, not at every line from the cursor on (10,000 hunks took seconds)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self._tables: dict[Callable[[str], str], dict[str, list[int]]] = {}

    def of(self, line: str, cursor: int, normal: Callable[[str], str]) -> list[int]:
        """The places of `line` (compared by `normal`) at or after `cursor`, in order."""
        table = self._tables.get(normal)
        if table is None:
            table = self._tables[normal] = {}
            for number, text in enumerate(self.texts):
                table.setdefault(normal(text), []).append(number)
        places = table.get(normal(line), [])
        return places[bisect.bisect_left(places, cursor) :]


def _find_all(
    positions: _Positions, old: list[str], cursor: int, normal: Callable[[str], str]
) -> list[int]:
    texts = positions.texts
    return [
        start
        for start in positions.of(old[0], cursor, normal)
        if _matches_at(texts, old, start, normal)
    ]


def _find_first(
    positions: _Positions, old: list[str], cursor: int, normal: Callable[[str], str]
) -> int:
    texts = positions.texts
    for start in positions.of(old[0], cursor, normal):
        if _matches_at(texts, old, start, normal):
            return start
    return -1


def _not_found(texts: list[str], hunk: Hunk, cursor: int, shown: str) -> PatchError:
    where = f" after line {cursor}" if cursor else ""
    if hunk.anchors:
        where = f" after its anchor '@@ {hunk.anchors[-1]}' (line {cursor})"
    old = hunk.old
    preview = "\n".join(f"  {line}" for line in old[:8]) + ("\n  …" if len(old) > 8 else "")
    return PatchError(
        f"hunk {hunk.number} of {shown} does not apply: its context and removed lines were not "
        f"found{where}:\n{preview}" + _near_text(texts, old, cursor),
        hint="Copy the context and '-' lines exactly from the file as it is now (read it "
        "again with read_file), and send the whole patch again.",
    )


def _not_at_end(texts: list[str], hunk: Hunk, shown: str) -> PatchError:
    old = hunk.old
    last = texts[-len(old) :] if len(old) <= len(texts) else texts
    tail = "\n".join(f"{len(texts) - len(last) + n + 1:>6}\t{line}" for n, line in enumerate(last))
    return PatchError(
        f"hunk {hunk.number} of {shown} is marked '{_EOF}', but its context and removed "
        f"lines are not the last lines of the file; the file ends with:\n"
        + (tail or "(the file is empty)")
        + _near_text(texts, old, 0),
        hint=f"Copy the last lines of the file exactly, or drop the '{_EOF}' line if the "
        "change is not at the end.",
    )


def _near_text(texts: list[str], wanted: list[str], cursor: int) -> str:
    windows = closest_windows(texts, wanted)
    if not windows:
        return "\nNo similar lines were found in the file."
    parts = ["\nThe nearest lines in the file:"]
    for ratio, start, end in windows:
        where = f"line {end}" if end == start + 1 else f"lines {start + 1}-{end}"
        parts.append(f"{where} ({ratio:.0%} similar):")
        parts.extend(f"{n + 1:>6}\t{texts[n]}" for n in range(start, end))
    return "\n".join(parts)


NEAR_LINES = 20
NEAR_SECONDS = 2.0


def closest_windows(
    lines: Sequence[str], wanted: Sequence[str], *, limit: int = 3
) -> list[tuple[float, int, int]]:
    """The places in `lines` most like `wanted`: (similarity, start, end) at 60 % or more.

    Windows of at most `NEAR_LINES` lines are compared, whitespace at the line ends
    ignored, within a time budget: the caller runs in a thread that cannot be cancelled.
    """
    wanted = list(wanted[:NEAR_LINES]) or [""]
    size = len(wanted)
    target = "\n".join(line.strip() for line in wanted)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target[:4000])
    scored: list[tuple[float, int]] = []
    deadline = time.monotonic() + NEAR_SECONDS
    for start in range(min(max(1, len(lines) - size + 1), 50_000)):
        if start % 1000 == 999 and time.monotonic() > deadline:
            break
        window = "\n".join(line.strip() for line in lines[start : start + size])
        matcher.set_seq1(window[:4000])
        if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
            ratio = matcher.ratio()
            if ratio >= 0.6:
                scored.append((ratio, start))
    chosen: list[tuple[float, int, int]] = []
    for ratio, start in sorted(scored, key=lambda item: (-item[0], item[1])):
        if all(abs(start - other) >= size for _, other, _ in chosen):
            chosen.append((ratio, start, min(start + size, len(lines))))
        if len(chosen) == limit:
            break
    return chosen
