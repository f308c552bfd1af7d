"""Discovery over ordered roots, availability, the summary and the two tools, for real."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import ToolCallRequest, ToolExecutor, ToolRegistry
from toolbridge.skills import SkillSet, default_roots

WriteSkill = Callable[..., Path]


async def call(skills: SkillSet, tool: str, **arguments: object) -> tuple[str, str | None]:
    registry = ToolRegistry(skills.tools())
    [outcome] = await ToolExecutor(registry).run([ToolCallRequest("c1", tool, arguments)])
    kind = outcome.error.kind if outcome.error is not None else None
    return outcome.result.text, kind


def test_roots_in_order_first_wins_with_a_warning(
    tmp_path: Path, write_skill: WriteSkill, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_skill(first, "pdf", "From the first root.")
    write_skill(second, "pdf", "From the second root.")
    write_skill(second, "csv", "Only in the second root.")
    with caplog.at_level(logging.WARNING, logger="toolbridge.skills"):
        skills = SkillSet([first, second], entry_points=False)
    assert skills.names == ["csv", "pdf"]
    pdf = skills.get("pdf")
    assert pdf is not None and pdf.description == "From the first root."
    assert "skill 'pdf'" in caplog.text and str(first / "pdf") in caplog.text


def test_a_root_may_be_one_skill_folder(tmp_path: Path, write_skill: WriteSkill) -> None:
    folder = write_skill(tmp_path, "single")
    assert SkillSet([folder], entry_points=False).names == ["single"]


def test_workspace_then_user_roots(tmp_path: Path) -> None:
    roots = default_roots(tmp_path)
    assert roots[0] == tmp_path / ".toolbridge" / "skills"
    assert roots[1] == Path("~/.toolbridge/skills").expanduser()


def test_invalid_skills_are_kept_aside_with_their_problems(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    write_skill(tmp_path, "good")
    write_skill(tmp_path, "Bad", folder="Bad")
    skills = SkillSet([tmp_path], entry_points=False)
    assert skills.names == ["good"]
    assert [(p.file.parent.name, p.field) for p in skills.problems] == [("Bad", "name")]
    assert "Bad" not in skills.summary()


def test_unmet_requirements_make_a_skill_unavailable_with_reasons(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    write_skill(
        tmp_path,
        "needs-things",
        extra='metadata: {"openclaw": {"requires": {"bins": ["tb-no-such-binary"], '
        '"env": ["TB_NO_SUCH_VARIABLE"]}}}\n',
    )
    write_skill(tmp_path, "has-things", extra="metadata:\n  requires:\n    bins: [sh]\n")
    skills = SkillSet([tmp_path], entry_points=False, environ={})
    assert skills.names == ["has-things"]
    [entry] = skills.unavailable
    assert entry.skill.name == "needs-things"
    assert entry.reasons == (
        "binary 'tb-no-such-binary' is not on PATH",
        "environment variable TB_NO_SUCH_VARIABLE is not set",
    )
    assert "needs-things" not in skills.summary()
    available = SkillSet(
        [tmp_path],
        entry_points=False,
        environ={"TB_NO_SUCH_VARIABLE": "1"},
        which=lambda name: f"/usr/bin/{name}",
    )
    assert available.names == ["has-things", "needs-things"]


def test_summary_one_line_per_skill_sorted_and_cached(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    write_skill(tmp_path, "zeta", "Last one.")
    write_skill(tmp_path, "alpha", "First one,\n  over two lines.")
    skills = SkillSet([tmp_path], entry_points=False)
    summary = skills.summary()
    assert summary.splitlines()[1:] == ["- alpha: First one, over two lines.", "- zeta: Last one."]
    assert "load_skill" in summary.splitlines()[0]
    assert skills.summary() is summary
    assert SkillSet([tmp_path / "none"], entry_points=False).summary() == ""


SUMMARY_HASH = (
    "from toolbridge.skills import SkillSet; import sys; "
    "print(SkillSet([sys.argv[1]], entry_points=False).summary_hash)"
)


def summary_hash_in_a_new_process(root: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SUMMARY_HASH, str(root)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "random"},
    )
    return done.stdout.strip()


def test_summary_hash_is_stable_across_runs_and_changed_by_an_edit(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    for index in range(5):
        write_skill(tmp_path, f"skill-{index}", f"Skill number {index}.")
    first = summary_hash_in_a_new_process(tmp_path)
    assert summary_hash_in_a_new_process(tmp_path) == first
    assert SkillSet([tmp_path], entry_points=False).summary_hash == first
    write_skill(tmp_path, "skill-3", "Skill number three, edited.")
    assert summary_hash_in_a_new_process(tmp_path) != first


async def test_load_skill_returns_the_body_and_the_files(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    write_skill(
        tmp_path,
        "pdf",
        body="# PDF\n\nRead reference.md first.\n",
        files={"reference.md": "fields...", "scripts/fill.py": "print(1)", ".hidden": "x"},
    )
    text, kind = await call(SkillSet([tmp_path], entry_points=False), "load_skill", name="pdf")
    assert kind is None
    assert text.startswith("# Skill: pdf\n\n# PDF\n\nRead reference.md first.\n")
    assert "- reference.md\n- scripts/fill.py" in text
    assert ".hidden" not in text and "SKILL.md" not in text


async def test_unknown_and_unavailable_names(tmp_path: Path, write_skill: WriteSkill) -> None:
    write_skill(tmp_path, "pdf-forms")
    write_skill(tmp_path, "gone", extra="metadata:\n  requires:\n    env: [TB_UNSET_VAR]\n")
    skills = SkillSet([tmp_path], entry_points=False, environ={})
    text, kind = await call(skills, "load_skill", name="pdf_form")
    assert kind == "execution_error"
    assert "unknown skill 'pdf_form'. Did you mean 'pdf-forms'?" in text
    text, _ = await call(skills, "load_skill", name="gone")
    assert "skill 'gone' is not available on this machine: environment variable" in text


async def test_read_skill_file_pages_in_characters(tmp_path: Path, write_skill: WriteSkill) -> None:
    content = "é" * 25_000 + "END"
    write_skill(tmp_path, "big", files={"data/long.txt": content})
    skills = SkillSet([tmp_path], entry_points=False)
    text, kind = await call(skills, "read_skill_file", name="big", path="data/long.txt")
    assert kind is None
    page, footer = text.rsplit("\n", 1)
    assert page == "é" * 20_000
    assert "offset=20000" in footer
    text, _ = await call(skills, "read_skill_file", name="big", path="data/long.txt", offset=20_000)
    assert text == "é" * 5_000 + "END\n[end of data/long.txt]"


@pytest.mark.parametrize("path", ["../other/SKILL.md", "/etc/passwd", "link/secret.txt"])
async def test_read_skill_file_cannot_leave_the_skill_folder(
    tmp_path: Path, write_skill: WriteSkill, path: str
) -> None:
    root = tmp_path / "skills"
    folder = write_skill(root, "pdf")
    write_skill(root, "other")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (folder / "link").symlink_to(outside)
    text, kind = await call(
        SkillSet([root], entry_points=False), "read_skill_file", name="pdf", path=path
    )
    assert kind == "workspace_violation"
    assert "secret" not in text.replace("secret.txt", "")


async def test_read_skill_file_refuses_binary(tmp_path: Path, write_skill: WriteSkill) -> None:
    write_skill(tmp_path, "img", files={"logo.png": b"\x89PNG\r\n\x1a\n\xff\xfe"})
    text, kind = await call(
        SkillSet([tmp_path], entry_points=False), "read_skill_file", name="img", path="logo.png"
    )
    assert kind == "execution_error"
    assert "logo.png is not UTF-8 text" in text


def test_the_tools_are_read_only_and_concurrency_safe(tmp_path: Path) -> None:
    tools = SkillSet([tmp_path], entry_points=False).tools()
    assert [tool.name for tool in tools] == ["load_skill", "read_skill_file"]
    assert all(tool.read_only and tool.concurrency_safe for tool in tools)


async def test_read_skill_file_refuses_a_huge_file_without_reading_it(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    # A sparse 2 GB file: reading it whole to page 20,000 characters would exhaust memory.
    folder = write_skill(tmp_path, "big")
    (folder / "dump.txt").touch()
    os.truncate(folder / "dump.txt", 2 * 1024**3)
    text, kind = await call(
        SkillSet([tmp_path], entry_points=False), "read_skill_file", name="big", path="dump.txt"
    )
    assert kind == "execution_error"
    assert "dump.txt is 2.0 GB" in text and "read_skill_file reads files up to" in text
