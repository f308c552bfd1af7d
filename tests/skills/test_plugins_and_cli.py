"""A skill shipped by a distribution that pip really installed, and the ``skills`` commands."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolbridge.skills import SkillSet

WriteSkill = Callable[..., Path]

GROUP = "toolbridge_test.skills"
SKILL = "---\nname: from-plugin\ndescription: Shipped in a wheel.\n---\n\nPlugin body.\n"


def build_wheel(directory: Path) -> Path:
    """A minimal, valid wheel whose package holds a skill folder and names it by entry point."""
    wheel = directory / "tbskills-1.0-py3-none-any.whl"
    dist = "tbskills-1.0.dist-info"
    files = {
        "tbskills/__init__.py": "",
        "tbskills/skills/__init__.py": "",
        "tbskills/skills/from-plugin/SKILL.md": SKILL,
        "tbskills/skills/from-plugin/notes.md": "notes",
        "tbskills/paths.py": "from pathlib import Path\n\n"
        "def roots():\n    return [Path(__file__).parent / 'skills']\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: tbskills\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[{GROUP}]\npackaged = tbskills.skills\n"
        "by-callable = tbskills.paths:roots\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{dist}/RECORD", record)
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The wheel installed by pip into a target directory put on sys.path."""
    work = tmp_path_factory.mktemp("wheel")
    target = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--target", str(target), str(build_wheel(work))],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(target))
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        for name in [name for name in sys.modules if name.startswith("tbskills")]:
            del sys.modules[name]


def test_a_distribution_ships_skills_through_the_entry_point(installed: Path) -> None:
    from importlib import metadata

    assert metadata.distribution("tbskills").version == "1.0"
    skills = SkillSet(group=GROUP)
    assert skills.names == ["from-plugin"]  # named twice, by package and callable: once
    skill = skills.get("from-plugin")
    assert skill is not None and skill.body == "Plugin body.\n"
    assert skill.folder.is_relative_to(installed)


def test_roots_come_before_plugins(
    installed: Path, tmp_path: Path, write_skill: WriteSkill
) -> None:
    write_skill(tmp_path, "from-plugin", "The user's own copy.")
    skill = SkillSet([tmp_path], group=GROUP).get("from-plugin")
    assert skill is not None and skill.description == "The user's own copy."


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", "skills", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_list_show_and_validate(tmp_path: Path, write_skill: WriteSkill) -> None:
    root = tmp_path / ".toolbridge" / "skills"
    write_skill(root, "pdf", "Fill PDF forms.", "# PDF body\n")
    write_skill(root, "gh", extra="metadata:\n  requires:\n    bins: [tb-no-such-binary]\n")
    listed = run_cli("list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row["status"] for row in json.loads(listed.stdout)}
    assert rows == {
        "pdf": "available",
        "gh": "unavailable: binary 'tb-no-such-binary' is not on PATH",
    }

    shown = run_cli("show", "pdf", cwd=tmp_path)
    assert (shown.returncode, shown.stdout) == (0, "# PDF body\n\n")
    missing = run_cli("show", "pdff", cwd=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "error: no skill 'pdff'; did you mean pdf?"

    valid = run_cli("validate", str(root), cwd=tmp_path)
    assert (valid.returncode, valid.stdout.strip()) == (0, "2 skill(s) valid")


def test_cli_validate_lists_every_problem(tmp_path: Path, write_skill: WriteSkill) -> None:
    write_skill(tmp_path, "x", raw="---\nname: Wrong\n---\n", folder="bad")
    write_skill(tmp_path, "fine")
    done = run_cli("validate", str(tmp_path), str(tmp_path / "nowhere"), cwd=tmp_path)
    assert done.returncode == 1
    skill_file = tmp_path / "bad" / "SKILL.md"
    assert done.stderr.splitlines() == [
        f"{tmp_path / 'nowhere'}: no such file or directory",
        f"{skill_file}: name: may contain only lowercase letters, digits and hyphens",
        f"{skill_file}: name: must equal the folder name 'bad'",
        f"{skill_file}: description: is required",
    ]
