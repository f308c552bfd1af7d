"""Real skill folders on disk, written the way users and other agents write them."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

WriteSkill = Callable[..., Path]


def skill_text(name: str, description: str, body: str = "", extra: str = "") -> str:
    front = f"name: {name}\ndescription: {description}\n{textwrap.dedent(extra)}"
    return f"---\n{front.rstrip()}\n---\n\n{textwrap.dedent(body)}"


@pytest.fixture
def write_skill() -> WriteSkill:
    """Write ``root/<folder>/SKILL.md`` (and resource files); return the skill folder."""

    def write(
        root: Path,
        name: str,
        description: str = "Does a thing.",
        body: str = "# Steps\n\n1. Do it.\n",
        *,
        extra: str = "",
        folder: str | None = None,
        files: dict[str, str | bytes] | None = None,
        raw: str | None = None,
    ) -> Path:
        path = root / (folder or name)
        path.mkdir(parents=True, exist_ok=True)
        text = raw if raw is not None else skill_text(name, description, body, extra)
        (path / "SKILL.md").write_text(text, encoding="utf-8")
        for relative, content in (files or {}).items():
            target = path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
        return path

    return write
