"""``.gitignore`` rules for the Python search engine, read through the workspace guard.

Supported: blank lines and ``#`` comments, ``!`` negation, ``\\`` escapes for a leading
``#`` or ``!`` and for trailing spaces, a trailing ``/`` for directories only, a ``/``
at the start or in the middle to anchor a pattern to the file's directory, ``*``,
``?``, ``[...]`` classes and ``**`` as a whole segment (``**/x``, ``x/**``, ``a/**/b``).
Rules of deeper files win over shallower ones and later lines over earlier ones, as in
git; an ignored directory is not entered, so nothing under it can be re-included.
Not read: ``.git/info/exclude``, the global excludes file, ``.ignore`` files (the
ripgrep engine is told to skip these too, so both engines see the same files).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from toolbridge.core.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.security.workspace import Workspace

__all__ = ["IgnoreFile", "IgnoreRules", "parse_gitignore", "rebase_gitignore"]

logger = logging.getLogger(__name__)

MAX_IGNORE_BYTES = 1 << 20
IGNORE_FILE = ".gitignore"


@dataclass(frozen=True, slots=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


@dataclass(frozen=True, slots=True)
class IgnoreFile:
    """The rules of one ``.gitignore``, matched against paths relative to its directory."""

    rules: tuple[_Rule, ...]

    def verdict(self, relative: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a ``!`` rule; None: no rule applies."""
        for rule in reversed(self.rules):
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(relative):
                return not rule.negate
        return None


def _split_line(line: str) -> tuple[str, bool, bool, bool] | None:
    """(pattern, negate, dir_only, anchored) of one line, or None for blanks and comments."""
    line = line.rstrip("\r")
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "  # "\ " keeps one trailing space
    line = stripped
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate or line.startswith(("\\#", "\\!")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    return line.lstrip("/"), negate, dir_only, anchored


def _translate(pattern: str) -> str:
    """A gitignore glob as a regex body over ``/``-separated relative paths."""
    segments = pattern.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:.*/)?")
            continue
        out.append(_translate_segment(segment) + ("" if last else "/"))
    return "".join(out)


def _translate_segment(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\" and i + 1 < len(segment):
            out.append(re.escape(segment[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def parse_gitignore(text: str) -> IgnoreFile:
    """The rules of a ``.gitignore``; lines that cannot be compiled are logged and skipped."""
    rules: list[_Rule] = []
    for line in text.splitlines():
        split = _split_line(line)
        if split is None:
            continue
        pattern, negate, dir_only, anchored = split
        body = _translate(pattern)
        if not anchored:
            body = "(?:.*/)?" + body
        try:
            rules.append(_Rule(re.compile(body + r"\Z", re.DOTALL), negate, dir_only))
        except re.error as exc:
            logger.debug("skipping .gitignore line %r: %s", line, exc)
    return IgnoreFile(tuple(rules))


def rebase_gitignore(text: str, directory: str) -> list[str]:
    """The lines of the ``.gitignore`` in `directory` rewritten to apply from the root
    (for ripgrep's ``--ignore-file``, whose patterns are relative to where it runs)."""
    if not directory:
        return text.splitlines()
    lines: list[str] = []
    for line in text.splitlines():
        split = _split_line(line)
        if split is None:
            continue
        pattern, negate, dir_only, anchored = split
        prefix = f"/{directory}/" if anchored else f"/{directory}/**/"
        lines.append(("!" if negate else "") + prefix + pattern + ("/" if dir_only else ""))
    return lines


class IgnoreRules:
    """The ``.gitignore`` files of a workspace, loaded once per directory as a walk meets them."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._files: dict[str, IgnoreFile | None] = {}

    def text_of(self, directory: str) -> str | None:
        """The ``.gitignore`` text of `directory` (relative to the root; '' for the root)."""
        path = (
            self.workspace.root / directory / IGNORE_FILE
            if directory
            else (self.workspace.root / IGNORE_FILE)
        )
        try:
            with self.workspace.open_read(path) as file:
                data = file.read(MAX_IGNORE_BYTES)
        except (ToolExecutionError, WorkspaceViolation):  # absent, a symlink, not a file
            return None
        return data.decode("utf-8", errors="replace")

    def _file(self, directory: str) -> IgnoreFile | None:
        if directory not in self._files:
            text = self.text_of(directory)
            self._files[directory] = parse_gitignore(text) if text is not None else None
        return self._files[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether the real path `path` (inside the workspace) is ignored."""
        relative = self.workspace.relative(path)
        parts = relative.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            rules = self._file("/".join(parts[:depth]))
            if rules is None:
                continue
            verdict = rules.verdict("/".join(parts[depth:]), is_dir)
            if verdict is not None:
                return verdict
        return False
