"""Glob patterns of the glob tool and grep's include: parsing, matching, fixed prefixes.

``*`` and ``?`` stay within one name, ``[...]`` is a character class, ``**`` spans
directories and ``{a,b}`` is alternation. Matching runs a small automaton over the
path's names, so its cost stays polynomial whatever the pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fnmatch import translate

from toolbridge.core.errors import ToolExecutionError

__all__ = [
    "Glob",
    "expand_braces",
    "glob_match",
    "has_magic",
    "pattern_parts",
    "split_fixed_prefix",
]

MAX_ALTERNATIVES = 64
_MAGIC = re.compile(r"[*?\[{]")
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")


def has_magic(segment: str) -> bool:
    """Whether a path segment holds glob syntax (anything but a literal name)."""
    return _MAGIC.search(segment) is not None


def expand_braces(pattern: str) -> list[str]:
    """``src/*.{ts,tsx}`` -> ``['src/*.ts', 'src/*.tsx']``; at most `MAX_ALTERNATIVES`."""
    done: list[str] = []
    pending = [pattern]
    while pending:
        current = pending.pop(0)
        match = _BRACES.search(current)
        if match is None:
            done.append(current)
            continue
        for option in match.group(1).split(","):
            pending.append(current[: match.start()] + option + current[match.end() :])
        if len(done) + len(pending) > MAX_ALTERNATIVES:
            raise ToolExecutionError(
                f"the pattern {pattern!r} expands to more than {MAX_ALTERNATIVES} alternatives",
                hint="Use fewer {a,b} groups, or several calls.",
            )
    return done


def pattern_parts(pattern: str) -> tuple[str, ...]:
    """Split a relative glob pattern into path segments, or say why it is not one."""
    if pattern.startswith(("/", "~")):
        raise ToolExecutionError(
            f"the pattern {pattern!r} is absolute; patterns are relative to path",
            hint="Use a relative pattern like '*.py' or 'src/**/*.py'.",
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


def split_fixed_prefix(parts: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``('src', 'pkg', '**', '*.py')`` -> ``(('src', 'pkg'), ('**', '*.py'))``.

    The fixed directories in front are where a search can start; the last segment
    always stays in the pattern, so that it names what is matched.
    """
    fixed = 0
    while fixed < len(parts) - 1 and not has_magic(parts[fixed]):
        fixed += 1
    return parts[:fixed], parts[fixed:]


class Glob:
    """A compiled pattern: each segment's regex built once, matched as a small automaton
    over the path's names (at most len(pattern) states per name, whatever the pattern)."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self.parts = parts
        self._segments: list[Callable[[str], object] | None] = [
            None if part == "**" else re.compile(translate(part)).match for part in parts
        ]

    def _closure(self, states: set[int]) -> set[int]:
        pending = list(states)
        while pending:
            index = pending.pop()
            if (
                index < len(self.parts)
                and self._segments[index] is None
                and index + 1 not in states
            ):
                states.add(index + 1)
                pending.append(index + 1)
        return states

    def match(self, path: Sequence[str]) -> bool:
        """Whether the path segments match the pattern (``**`` spans any number of names)."""
        spans = [i for i, segment in enumerate(self._segments) if segment is None]
        if len(spans) <= 1:  # the common shapes, 'src/*.py' and '**/*.py', without the automaton
            return self._match_around(spans[0] if spans else None, path)
        return self._run(path)

    def _match_around(self, span: int | None, path: Sequence[str]) -> bool:
        segments = self._segments
        if span is None:
            head, tail = segments, []
            if len(path) != len(head):
                return False
        else:
            head, tail = segments[:span], segments[span + 1 :]
            if len(path) < len(head) + len(tail):
                return False
        pairs = zip(head, path[: len(head)], strict=True)
        ends = zip(tail, path[len(path) - len(tail) :], strict=True)
        return all(s is not None and s(n) for s, n in pairs) and all(
            s is not None and s(n) for s, n in ends
        )

    def _run(self, path: Sequence[str]) -> bool:
        end = len(self.parts)
        states = self._closure({0})
        for name in path:
            following: set[int] = set()
            for index in states:
                if index == end:
                    continue
                segment = self._segments[index]
                if segment is None:
                    following.add(index)  # ** takes this name and may take more
                elif segment(name):
                    following.add(index + 1)
            if not following:
                return False
            states = self._closure(following)
        return end in states


def glob_match(parts: tuple[str, ...], path: Sequence[str]) -> bool:
    """Whether the path segments match the pattern segments (``**`` spans any depth)."""
    return Glob(parts).match(path)
