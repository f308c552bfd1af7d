"""The two tools that disclose skills on demand: `load_skill` and `read_skill_file`.

Both are read-only and bound to one `SkillSet` (any `SkillCatalog`). A resource is
reached only through the workspace guard rooted at the skill's own folder, so ``..``
and links cannot leave it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Protocol

from toolbridge.core.errors import ToolExecutionError
from toolbridge.core.tool import Tool, ToolResult, tool_parameters
from toolbridge.execution.result_store import PAGE_METADATA_KEY
from toolbridge.security.workspace import Workspace
from toolbridge.skills.skill import SKILL_FILE, Skill
from toolbridge.tools._fs import human_size

__all__ = ["LoadSkill", "ReadSkillFile", "SkillCatalog"]

MAX_LISTED_FILES = 50
PAGE_CHARS = 20_000
MAX_PAGE_CHARS = 100_000
MAX_RESOURCE_BYTES = 10 * 1024 * 1024  # pages are cut from the decoded text, read whole


class SkillCatalog(Protocol):
    """What the tools ask of their skills (a `SkillSet` is one): look up, explain, suggest."""

    @property
    def names(self) -> list[str]: ...

    def get(self, name: str) -> Skill | None: ...

    def unavailable_reason(self, name: str) -> str | None: ...

    def suggest(self, name: str) -> list[str]: ...


_NAME = {"type": "string", "minLength": 1, "description": "The skill's name, as listed."}


class _SkillTool(Tool):
    read_only = True

    def __init__(self, skills: SkillCatalog) -> None:
        self.skills = skills

    def skill(self, name: str) -> Skill:
        """The available skill `name`, or an error that says why not and what to ask instead."""
        skill = self.skills.get(name)
        if skill is not None:
            return skill
        reason = self.skills.unavailable_reason(name)
        if reason is not None:
            raise ToolExecutionError(
                f"skill {name!r} is not available on this machine: {reason}.",
                hint="Do the task without it, or tell the user what it needs.",
            )
        suggestions = self.skills.suggest(name)
        did_you_mean = (
            f" Did you mean {' or '.join(map(repr, suggestions))}?" if suggestions else ""
        )
        known = ", ".join(self.skills.names) or "none"
        raise ToolExecutionError(
            f"unknown skill {name!r}.{did_you_mean}", hint=f"Available skills: {known}."
        )


@tool_parameters(
    {
        "type": "object",
        "properties": {"name": _NAME},
        "required": ["name"],
        "additionalProperties": False,
    }
)
class LoadSkill(_SkillTool):
    """Returns a skill's instructions and the files it comes with."""

    name = "load_skill"
    description = (
        "Load a skill: its full instructions, and the list of files in its folder that "
        "read_skill_file can read. Use it when a task matches a skill's description."
    )

    async def execute(self, **kwargs: Any) -> str:
        skill = self.skill(kwargs["name"])
        files = await asyncio.to_thread(_list_files, skill.folder)
        text = f"# Skill: {skill.name}\n\n{skill.body.rstrip()}\n"
        if files:
            listed = "\n".join(f"- {path}" for path in files[:MAX_LISTED_FILES])
            more = len(files) - MAX_LISTED_FILES
            tail = f"\n- ... and {more} more" if more > 0 else ""
            text += f"\nFiles of this skill (read_skill_file):\n{listed}{tail}\n"
        return text


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "name": _NAME,
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Path of the file inside the skill's folder, e.g. reference.md.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Where to start, in characters: 0, then the offset given at "
                "the end of the previous page.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PAGE_CHARS,
                "default": PAGE_CHARS,
                "description": f"How many characters to read (at most {MAX_PAGE_CHARS}).",
            },
        },
        "required": ["name", "path"],
        "additionalProperties": False,
    }
)
class ReadSkillFile(_SkillTool):
    """Reads a text file of a skill, in pages, confined to the skill's folder."""

    name = "read_skill_file"
    description = (
        "Read a file that comes with a skill (a reference, a template, a script), by its "
        "path inside the skill's folder. Long files come in pages: continue with offset."
    )

    async def execute(self, **kwargs: Any) -> ToolResult:
        skill = self.skill(kwargs["name"])
        offset: int = kwargs.get("offset", 0)
        limit: int = kwargs.get("limit", PAGE_CHARS)
        text, shown = await asyncio.to_thread(_read_resource, skill.folder, kwargs["path"])
        end = min(len(text), offset + limit)
        page = text[offset:end]
        if end < len(text):
            footer = (
                f"[characters {offset:,}-{end:,} of {len(text):,}; more: call read_skill_file "
                f"with offset={end}]"
            )
        else:
            footer = f"[end of {shown}]"
        # A page is what the model asked for: the executor must not cap it into a file again.
        return ToolResult(
            f"{page}\n{footer}",
            metadata={
                PAGE_METADATA_KEY: {
                    "skill": skill.name,
                    "path": shown,
                    "offset": offset,
                    "next_offset": end,
                    "size": len(text),
                    "at_end": end >= len(text),
                }
            },
        )


def _read_resource(folder: Path, path: str) -> tuple[str, str]:
    guard = Workspace(folder)
    real = guard.resolve(path)
    shown = guard.relative(real)
    with guard.open_read(real) as handle:
        data = handle.read(MAX_RESOURCE_BYTES + 1)
        if len(data) > MAX_RESOURCE_BYTES:
            size = max(os.fstat(handle.fileno()).st_size, len(data))
            raise ToolExecutionError(
                f"{shown} is {human_size(size)}; read_skill_file reads files up to "
                f"{human_size(MAX_RESOURCE_BYTES)}.",
                hint="Use the skill's instructions on how to use this file instead of reading it.",
            )
    try:
        return data.decode("utf-8"), shown
    except UnicodeDecodeError:
        raise ToolExecutionError(
            f"{shown} is not UTF-8 text ({len(data):,} bytes); read_skill_file reads text only.",
            hint="Use the skill's instructions on how to use this file instead of reading it.",
        ) from None


def _list_files(folder: Path) -> list[str]:
    """The skill's files, relative and sorted, without SKILL.md; links are not followed."""
    files: list[str] = []
    for directory, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(directory)
        for name in sorted(names):
            relative = (base / name).relative_to(folder).as_posix()
            if relative != SKILL_FILE and not name.startswith("."):
                files.append(relative)
        if len(files) > MAX_LISTED_FILES * 4:
            break
    return files
