"""A model shown a file whose name is not UTF-8 can open it: the agent's list_dir result
shows the byte as ``\\xe9`` and read_file with that name reads the file (before, the
model saw ``caf\\udce9.txt``, which named no file); ``call --json`` shows it the same way,
and so does exec's output (``ls``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.scripted_server import ScriptedServer, openai_chat_stream, serve
from tests.agent.test_cli import agent
from tests.cli.conftest import Cli

CAFE = os.fsdecode(b"caf\xe9.txt")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


def tool_results(body: dict[str, object]) -> dict[str, str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


def test_the_name_the_model_is_shown_opens_the_file(server: ScriptedServer, tmp_path: Path) -> None:
    (tmp_path / CAFE).write_text("bonjour\n")
    server.add(
        openai_chat_stream(calls=[("c1", "list_dir", "{}")]),
        openai_chat_stream(calls=[("c2", "read_file", '{"path": "caf\\\\xe9.txt"}')]),
        openai_chat_stream(text="read it"),
    )
    done = agent(server.url, tmp_path, "read the file", "--yes")
    assert done.returncode == 0, done.stderr
    _, second, third = server.bodies()
    assert "caf\\xe9.txt  (8 B)" in tool_results(second)["c1"].splitlines()
    assert "bonjour" in tool_results(third)["c2"], tool_results(third)["c2"]


def test_call_shows_the_name_as_the_model_sees_it(cli: Cli) -> None:
    (Path(cli.workspace) / CAFE).write_text("bonjour\n")
    listed = cli("call", "list_dir", "{}", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["content"] == "caf\\xe9.txt  (8 B)"
    read = cli("call", "read_file", json.dumps({"path": "caf\\xe9.txt"}))
    assert read.returncode == 0, read.stderr
    assert "bonjour" in read.stdout


def test_exec_shows_the_name_as_the_file_tools_do(cli: Cli) -> None:
    # Its output was decoded with U+FFFD for the byte: the name seen named no file.
    (Path(cli.workspace) / CAFE).write_text("bonjour\n")
    listed = cli("call", "exec", json.dumps({"command": "ls"}), "--json")
    assert listed.returncode == 0, listed.stderr
    name = json.loads(listed.stdout)["content"].splitlines()[0]
    assert name == "caf\\xe9.txt"
    read = cli("call", "read_file", json.dumps({"path": name}))
    assert read.returncode == 0, read.stderr
    assert "bonjour" in read.stdout
