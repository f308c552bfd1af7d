"""Glob patterns of the glob tool and grep's include: parsing, matching, fixed prefixes.

``*`` and ``?`` stay within one name, ``[...]`` is a character class, ``**`` spans
directories and ``{a,b}`` is alternation. Matching is memoised over segments, so its
cost stays polynomial whatever the pattern.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from functools import cache

from toolbridge.errors import ToolExecutionError

__all__ = ["expand_braces", "glob_match", "has_magic", "pattern_parts", "split_fixed_prefix"]

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


def glob_match(parts: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether the path segments match the pattern segments (``**`` spans any depth)."""

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(parts):
            return j == len(path)
        if parts[i] == "**":
            return match(i + 1, j) or (j < len(path) and match(i, j + 1))
        return j < len(path) and fnmatchcase(path[j], parts[i]) and match(i + 1, j + 1)

    return match(0, 0)
