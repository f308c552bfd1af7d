"""SKILL.md front matter has limits: too deep, too large or self-referring YAML, and values
YAML cannot read, make that one skill invalid with the reason, never an exception.

Checked for library users (`SkillSet`, `read_skill`) and on the command line (`skills
list`, `skills validate`, and `agent`, which reads the workspace's skills as it starts).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.agent.scripted_server import openai_chat_stream, serve

from toolbridge.skills import SkillFormatError, SkillSet, read_skill
from toolbridge.skills.skill import MAX_FRONT_MATTER_DEPTH, MAX_FRONT_MATTER_NODES

REPO = Path(__file__).resolve().parents[2]
DEEP = 5_000


def front(fields: str, name: str) -> str:
    return f"---\nname: {name}\ndescription: Does a thing.\n{fields}---\nBody.\n"


HOSTILE_FRONT = {
    "deep-flow": "metadata:\n  x: " + "[" * DEEP + "]" * DEEP + "\n",
    "deep-block": "metadata:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 600)),
    "deep-json": 'metadata: "' + '{\\"a\\": ' * DEEP + "1" + "}" * DEEP + '"\n',
    "aliases": "metadata:\n  a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
    + "".join(
        f"  {chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n"
        for i in range(8)
    ),
    "self-alias": "metadata:\n  a: &a [1, *a]\n",
    "bad-date": "metadata:\n  when: 2024-13-45\n",
    "huge-number": "metadata:\n  n: " + "9" * 5_000 + "\n",
}


def write(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write(root, "fine", front("", "fine"))
    for name, fields in HOSTILE_FRONT.items():
        write(root, name, front(fields, name))
    return root


def test_limits_are_what_the_docs_say() -> None:
    assert MAX_FRONT_MATTER_DEPTH == 64 and MAX_FRONT_MATTER_NODES == 100_000


@pytest.mark.parametrize("name", sorted(HOSTILE_FRONT))
def test_read_skill_reports_the_problem(skills_root: Path, name: str) -> None:
    with pytest.raises(SkillFormatError) as caught:
        read_skill(skills_root / name)
    problems = caught.value.problems
    assert len(problems) == 1 and problems[0].field in ("(front matter)", "metadata")
    expected = {
        "deep-flow": "nested more than 64 levels",
        "deep-block": "nested more than 64 levels",
        "deep-json": "must nest at most 64 levels",
        "aliases": "more than 100,000 values",
        "self-alias": "alias *a is inside its own anchor",
        "bad-date": "month must be in 1..12",
        "huge-number": "Exceeds the limit (4300 digits)",
    }[name]
    assert expected in problems[0].rule, problems[0].rule


def test_a_skill_set_keeps_the_others_and_says_why(skills_root: Path) -> None:
    skills = SkillSet([skills_root], entry_points=False)
    assert skills.names == ["fine"]
    invalid = {problem.file.parent.name for problem in skills.problems}
    assert invalid == set(HOSTILE_FRONT)


def test_modest_nesting_and_aliases_still_load(tmp_path: Path) -> None:
    nested = "metadata:\n  x: " + "[" * 60 + "]" * 60 + "\n  y: &y {a: 1}\n  z: [*y, *y]\n"
    skill = read_skill(write(tmp_path, "ok", front(nested, "ok")))
    assert skill.metadata["z"] == [{"a": 1}, {"a": 1}]


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "HOME": str(cwd), "PYTHONPATH": str(REPO / "src"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=full_env,
    )


def test_the_command_line_lists_validates_and_starts_the_agent(
    skills_root: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".toolbridge").mkdir(parents=True)
    skills_root.rename(workspace / ".toolbridge" / "skills")

    listed = cli("skills", "list", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    assert "fine" in listed.stdout and "Traceback" not in listed.stderr
    assert "deep-flow" in listed.stderr and "nested more than 64 levels" in listed.stderr

    validated = cli("skills", "validate", str(workspace / ".toolbridge" / "skills"), cwd=workspace)
    assert validated.returncode == 1
    assert "Traceback" not in validated.stderr
    assert validated.stderr.count("SKILL.md") == len(HOSTILE_FRONT)

    server = serve()
    scripted = next(server)
    try:
        scripted.add(openai_chat_stream(text="Hello."))
        base = ["--model", "openai:gpt-test", "--base-url", f"{scripted.url}/v1"]
        started = cli("agent", "hi", *base, cwd=workspace, env={"OPENAI_API_KEY": "k"})
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == "Hello."
        system = scripted.bodies()[0]["messages"][0]["content"]
        assert "- fine: Does a thing." in system and "deep-flow" not in system
    finally:
        server.close()
