"""docs/guide/cli.md stays in step with the program: every command has its section
naming each of its options (and no option it does not have), every config section the
loader accepts is documented and every documented one is accepted, and the guide's TOML
examples use sections the ``--config`` file accepts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from toolbridge.cli.app import COMMANDS, app
from toolbridge.cli.config import SECTIONS, _settable_policy_fields
from toolbridge.cli.loading import _CliLoader, _config_sections

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide"
CLI_MD = (GUIDE / "cli.md").read_text()
FLAG = re.compile(r"(?<![\w-])--?[a-z][a-z-]*")


def commands() -> Iterator[tuple[str, Any]]:
    """Every command of the program, as ``("journal export", click command)``."""
    root = typer.main.get_command(app)
    context = typer.Context(root)

    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(context):
                yield from walk(command.get_command(context, name), [*path, name])
        else:
            yield " ".join(path), command

    yield from walk(root, [])


def flags(command: Any) -> set[str]:
    return {
        flag
        for parameter in command.params
        for flag in [*parameter.opts, *getattr(parameter, "secondary_opts", [])]
        if flag.startswith("-")
    }


def section(path: str) -> str:
    """The text under the ``### `toolbridge ...` `` heading that names `path`: a command
    (```toolbridge agent```) or a group's commands (```toolbridge journal list`, `show```)."""
    for part in re.split(r"^### ", CLI_MD, flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        first, *more = re.findall(r"`([^`]+)`", heading) or [""]
        words = first.split()
        named = {" ".join(words[1:])}
        if len(words) == 3:  # toolbridge GROUP COMMAND, then more COMMANDs of the group
            named |= {f"{words[1]} {name}" for name in more}
        if words[:1] == ["toolbridge"] and path in named:
            return body
    raise AssertionError(f"docs/guide/cli.md has no '### `toolbridge {path}`' section")


def options_lines(body: str) -> str:
    """The ``Options...:`` paragraphs of a section: where its flags are listed."""
    paragraphs = body.split("\n\n")
    return "\n".join(p for p in paragraphs if p.startswith("Options"))


ALL = list(commands())


def test_the_walk_finds_every_command() -> None:
    found = {path.split()[0] for path, _ in ALL}
    assert found == set(COMMANDS)
    assert {"journal export", "mcp serve", "skills validate", "agent"} <= {p for p, _ in ALL}


@pytest.mark.parametrize(("path", "command"), ALL, ids=[path for path, _ in ALL])
def test_every_command_and_option_is_in_the_guide(path: str, command: Any) -> None:
    listed = options_lines(section(path))
    assert listed, f"the section of {path!r} has no 'Options' paragraph"
    named = set(FLAG.findall(listed))
    missing = flags(command) - named
    assert not missing, f"cli.md does not list {sorted(missing)} of `toolbridge {path}`"
    # Every flag the group's paragraph lists belongs to one of the group's commands.
    group = path.split(maxsplit=1)[0]
    known = set().union(*(flags(c) for p, c in ALL if p.split()[0] == group))
    assert named <= known, f"cli.md lists {sorted(named - known)} that no {group} command has"


def test_the_short_help_of_each_command_is_its_own() -> None:
    root = typer.main.get_command(app)
    context = typer.Context(root)
    for name, entry in COMMANDS.items():
        command = root.get_command(context, name)  # type: ignore[attr-defined]
        assert command.get_short_help_str(limit=1000) == entry.help, name


def test_every_config_section_is_documented_and_every_documented_one_is_read() -> None:
    readers = _config_sections(_CliLoader())
    documented = set(re.findall(r"\[tools\.([a-z_]+)\]", CLI_MD))
    assert documented == readers, "cli.md's [tools.<key>] sections differ from the tools'"
    for name in SECTIONS:
        assert f"[{name}" in CLI_MD, name
    keys = {*_settable_policy_fields(), "approval"}
    block = CLI_MD[CLI_MD.index("- `[executor]` takes") :].split("\n- ")[0]
    listed = set(re.findall(r"`([a-z_]+)`", block))
    assert listed == keys, f"[executor] keys: documented {sorted(listed)}, read {sorted(keys)}"


def test_the_guides_toml_examples_use_sections_the_config_file_accepts() -> None:
    readers = _config_sections(_CliLoader())
    accepted = {"executor", *(f"tools.{key}" for key in readers)}
    for page in sorted(GUIDE.glob("*.md")):
        for block in re.findall(r"^```toml\n(.*?)^```", page.read_text(), re.M | re.S):
            for table in re.findall(r"^\[([^\]]+)\]", block, re.M):
                if table.startswith("project."):  # pyproject.toml, not a config file
                    continue
                assert table in accepted, f"{page.name}: [{table}] is not a --config section"
