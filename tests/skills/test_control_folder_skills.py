"""Workspace skills are read from ``.toolbridge/skills`` only as they lie there: a link
(which could lead to files the model can write) is reported, never followed."""

from __future__ import annotations

from pathlib import Path

from toolbridge.skills import SkillSet


def write_skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    text = f"---\nname: {name}\ndescription: The {name} skill.\n---\nDo.\n"
    (folder / "SKILL.md").write_text(text)


def test_a_linked_skill_folder_in_the_workspace_is_not_read(workspace: Path) -> None:
    skills = workspace / ".toolbridge" / "skills"
    write_skill(skills / "good", "good")
    write_skill(workspace / "model-made" / "evil", "evil")  # where the model can write
    (skills / "evil").symlink_to(workspace / "model-made" / "evil")
    found = SkillSet.discover(workspace, user=False, entry_points=False)
    assert found.names == ["good"]
    [problem] = found.problems
    assert problem.file == skills / "evil" and "symbolic link" in problem.rule


def test_a_linked_skills_root_in_the_workspace_is_not_read(workspace: Path) -> None:
    write_skill(workspace / "model-made" / "evil", "evil")
    (workspace / ".toolbridge").mkdir()
    (workspace / ".toolbridge" / "skills").symlink_to(workspace / "model-made")
    found = SkillSet.discover(workspace, user=False, entry_points=False)
    assert found.names == []
    assert [p.rule for p in found.problems] == [found.problems[0].rule]
    assert "symbolic link" in found.problems[0].rule


def test_a_linked_control_folder_is_not_read(workspace: Path, tmp_path: Path) -> None:
    write_skill(tmp_path / "elsewhere" / "skills" / "evil", "evil")
    (workspace / ".toolbridge").symlink_to(tmp_path / "elsewhere")
    found = SkillSet.discover(workspace, user=False, entry_points=False)
    assert found.names == [] and "symbolic link" in found.problems[0].rule


def test_links_in_other_roots_are_still_followed(tmp_path: Path) -> None:
    write_skill(tmp_path / "repo" / "shared", "shared")
    root = tmp_path / "user-skills"
    root.mkdir()
    (root / "shared").symlink_to(tmp_path / "repo" / "shared")
    assert SkillSet([root], entry_points=False).names == ["shared"]
