"""SKILL.md front matter: what the open format requires, reported with file, field and rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge.skills import SkillFormatError, read_skill

WriteSkill = Callable[..., Path]


def problems_of(folder: Path) -> list[tuple[str, str]]:
    with pytest.raises(SkillFormatError) as caught:
        read_skill(folder)
    for problem in caught.value.problems:
        assert problem.file == folder / "SKILL.md"
        assert str(folder / "SKILL.md") in str(caught.value)
    return [(p.field, p.rule) for p in caught.value.problems]


def test_a_complete_skill_is_read_with_every_field(tmp_path: Path, write_skill: WriteSkill) -> None:
    folder = write_skill(
        tmp_path,
        "pdf-forms",
        "Fill PDF forms. Use when the user gives a PDF with fields.",
        "# Filling forms\n\nSee reference.md.\n",
        extra="""
        license: Apache-2.0
        compatibility: Needs Python 3.10+
        allowed-tools: read_file exec
        metadata:
          author: someone
          version: "1.2"
        """,
    )
    skill = read_skill(folder)
    assert skill.name == "pdf-forms"
    assert skill.description.startswith("Fill PDF forms.")
    assert skill.body == "# Filling forms\n\nSee reference.md.\n"
    assert skill.license == "Apache-2.0"
    assert skill.compatibility == "Needs Python 3.10+"
    assert skill.allowed_tools == ("read_file", "exec")
    assert skill.metadata == {"author": "someone", "version": "1.2"}
    assert skill.folder == folder


def test_unknown_front_matter_keys_of_other_agents_are_accepted(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    folder = write_skill(tmp_path, "notes", extra="user-invocable: true\nversion: 2\n")
    assert read_skill(folder).name == "notes"


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("PDF", "may contain only lowercase letters, digits and hyphens"),
        ("pdf_forms", "may contain only lowercase letters, digits and hyphens"),
        ("-pdf", "must not start or end with a hyphen or contain '--'"),
        ("pdf-", "must not start or end with a hyphen or contain '--'"),
        ("pdf--forms", "must not start or end with a hyphen or contain '--'"),
        ("a" * 65, "must be 1 to 64 characters (65)"),
    ],
)
def test_name_rules(tmp_path: Path, write_skill: WriteSkill, name: str, rule: str) -> None:
    folder = write_skill(tmp_path, name)
    assert ("name", rule) in problems_of(folder)


def test_name_must_equal_the_folder(tmp_path: Path, write_skill: WriteSkill) -> None:
    folder = write_skill(tmp_path, "pdf", folder="pdf-tools")
    assert problems_of(folder) == [("name", "must equal the folder name 'pdf-tools'")]


def test_every_problem_is_reported_at_once(tmp_path: Path, write_skill: WriteSkill) -> None:
    folder = write_skill(
        tmp_path,
        "x",
        raw="---\nname: Bad_Name\ndescription: ''\ncompatibility: ''\nmetadata: [1]\n---\nbody\n",
        folder="bad",
    )
    fields = [field for field, _ in problems_of(folder)]
    assert fields == ["name", "name", "description", "compatibility", "metadata"]


def test_description_limits(tmp_path: Path, write_skill: WriteSkill) -> None:
    long = write_skill(tmp_path, "long", "d" * 1025)
    assert problems_of(long) == [("description", "must be at most 1024 characters (1025)")]
    missing = write_skill(tmp_path, "missing", raw="---\nname: missing\n---\nbody\n")
    assert problems_of(missing) == [("description", "is required")]
    number = write_skill(tmp_path, "number", raw="---\nname: number\ndescription: 5\n---\n")
    assert problems_of(number) == [("description", "must be a string, not int")]


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ("no front matter\n", "the file must start with a '---' line opening front matter"),
        ("---\nname: x\n", "no closing '---' line after the front matter"),
        ("---\n- a\n- b\n---\n", "must be a YAML mapping of fields (name: ..., description: ...)"),
        ("---\nname: [unclosed\n---\n", "is not valid YAML (line 3): "),
    ],
)
def test_broken_front_matter(tmp_path: Path, write_skill: WriteSkill, raw: str, rule: str) -> None:
    folder = write_skill(tmp_path, "x", raw=raw)
    [(field, got)] = problems_of(folder)
    assert field == "(front matter)"
    assert got.startswith(rule)


def test_yaml_is_loaded_safely(tmp_path: Path, write_skill: WriteSkill) -> None:
    raw = "---\nname: x\ndescription: !!python/object/apply:os.system ['touch pwned']\n---\n"
    folder = write_skill(tmp_path, "x", raw=raw)
    [(field, rule)] = problems_of(folder)
    assert field == "(front matter)" and "not valid YAML" in rule
    assert not (tmp_path / "pwned").exists()


def test_missing_file_and_non_utf8(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert problems_of(empty) == [("(file)", "a skill folder must contain SKILL.md")]
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "SKILL.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    assert problems_of(latin) == [("(file)", "must be UTF-8 text (invalid byte at offset 32)")]


def test_requirements_in_the_shapes_existing_skills_use(
    tmp_path: Path, write_skill: WriteSkill
) -> None:
    openclaw = write_skill(
        tmp_path,
        "gh",
        extra='metadata: {"openclaw": {"requires": {"bins": ["gh"], "env": ["GH_TOKEN"]}}}\n',
    )
    nanobot = write_skill(
        tmp_path,
        "tmux",
        extra="""metadata: '{"nanobot": {"requires": {"bins": ["tmux"]}, "always": false}}'\n""",
    )
    plain = write_skill(tmp_path, "jq", extra="metadata:\n  requires:\n    anyBins: [jq, gojq]\n")
    assert read_skill(openclaw).requires.bins == ("gh",)
    assert read_skill(openclaw).requires.env == ("GH_TOKEN",)
    assert read_skill(nanobot).requires.bins == ("tmux",)
    assert read_skill(plain).requires.any_bins == ("jq", "gojq")
    bad = write_skill(tmp_path, "bad", extra="metadata:\n  requires:\n    bins: gh\n")
    assert problems_of(bad) == [("metadata.requires.bins", "must be a list of non-empty strings")]


def test_a_skill_file_linked_to_a_file_elsewhere_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("---\nname: leak\ndescription: the secret is s3cr3t-w0rd\n---\n")
    folder = tmp_path / "skills" / "leak"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").symlink_to(secret)
    [(field, rule)] = problems_of(folder)
    assert field == "(file)" and rule.startswith("cannot be read:")
    assert "s3cr3t-w0rd" not in rule  # not a digit pair a temporary path may hold
