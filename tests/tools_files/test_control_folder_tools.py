"""The file and search tools never read, write or list toolbridge's own folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolRegistry
from toolbridge.search.ripgrep import find_ripgrep
from toolbridge.security.workspace import Workspace
from toolbridge.tools.search import GlobTool, GrepTool, SearchConfig

JOURNAL = b"SQLite format 3\x00 JOURNAL-SECRET other sessions' calls\n"


@pytest.fixture
def control(workspace: Path) -> Path:
    folder = workspace / ".toolbridge"
    (folder / "skills" / "mine").mkdir(parents=True)
    (folder / "journal.sqlite3").write_bytes(JOURNAL)
    (folder / "skills" / "mine" / "SKILL.md").write_text("---\nname: mine\n---\nJOURNAL-SECRET\n")
    (workspace / "sub").mkdir()
    (workspace / "notes.txt").write_text("plain JOURNAL-SECRET-free notes\n")
    return folder


def refused(result: object) -> None:
    assert getattr(result, "is_error", False), result
    assert result.error_kind is ErrorKind.WORKSPACE_VIOLATION  # type: ignore[attr-defined]
    assert "toolbridge's own folder" in result.text  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"path": ".toolbridge/journal.sqlite3", "content": ""}),
        ("write_file", {"path": "./.toolbridge/skills/evil/SKILL.md", "content": "x"}),
        ("write_file", {"path": "sub/../.toolbridge/journal.sqlite3", "content": ""}),
        ("edit_file", {"path": ".toolbridge/journal.sqlite3", "old_string": "S", "new_string": ""}),
        ("read_file", {"path": ".toolbridge/journal.sqlite3"}),
        ("read_file", {"path": ".toolbridge/skills/mine/SKILL.md"}),
        ("list_dir", {"path": ".toolbridge"}),
        ("glob", {"pattern": "*", "path": ".toolbridge"}),
        ("glob", {"pattern": ".toolbridge/**"}),
        ("grep", {"pattern": "SECRET", "path": ".toolbridge/journal.sqlite3"}),
        ("grep", {"pattern": "SECRET", "path": ".toolbridge"}),
    ],
)
async def test_the_tools_refuse_the_control_folder(
    registry: ToolRegistry, control: Path, tool: str, arguments: dict[str, object]
) -> None:
    refused(await registry.execute(tool, arguments))
    assert (control / "journal.sqlite3").read_bytes() == JOURNAL
    assert not (control / "skills" / "evil").exists()


async def test_a_symlink_into_the_control_folder_is_refused(
    registry: ToolRegistry, control: Path, workspace: Path
) -> None:
    (workspace / "j").symlink_to(".toolbridge/journal.sqlite3")
    (workspace / "c").symlink_to(".toolbridge")
    refused(await registry.execute("write_file", {"path": "j", "content": ""}))
    refused(await registry.execute("read_file", {"path": "c/journal.sqlite3"}))
    refused(await registry.execute("write_file", {"path": "c/skills/x/SKILL.md", "content": ""}))
    assert (control / "journal.sqlite3").read_bytes() == JOURNAL


async def test_listings_leave_the_control_folder_out(registry: ToolRegistry, control: Path) -> None:
    listed = await registry.execute("list_dir", {"path": ".", "recursive": True, "max_depth": 5})
    assert "notes.txt" in listed.text and ".toolbridge" not in listed.text
    found = await registry.execute("glob", {"pattern": "**/*"})
    assert "notes.txt" in found.text and ".toolbridge" not in found.text
    grep = await registry.execute("grep", {"pattern": "JOURNAL-SECRET"})
    assert "notes.txt" in grep.text and ".toolbridge" not in grep.text


ENGINES = ["python", *(["ripgrep"] if find_ripgrep() else [])]


@pytest.mark.parametrize("engine", ENGINES)
async def test_both_search_engines_leave_it_out(
    control: Path, workspace: Path, engine: str
) -> None:
    guard = Workspace(workspace)
    config = SearchConfig(engine=engine)  # type: ignore[arg-type]
    registry = ToolRegistry(
        [GlobTool(guard, config), GrepTool(guard, config)],
        context=ToolContext(workspace=workspace),
    )
    found = await registry.execute("glob", {"pattern": "**/*.{sqlite3,md,txt}"})
    assert found.text == "notes.txt"
    grep = await registry.execute("grep", {"pattern": "SECRET", "include": "*"})
    assert grep.text.startswith("notes.txt:1:") and ".toolbridge" not in grep.text
