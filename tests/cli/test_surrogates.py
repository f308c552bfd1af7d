"""A lone surrogate ("\\udc80", which JSON lets a model send) in a model's tool name or
arguments: the run goes on, the model is told what was wrong in a result it can read,
and every request after it is valid UTF-8 (it failed to encode: exit 2, session over)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.scripted_server import (
    ScriptedServer,
    anthropic_stream,
    openai_chat_stream,
    serve,
)
from tests.agent.test_cli import agent

from toolbridge.agent.messages import AssistantMessage, Message, UserMessage
from toolbridge.agent.sendable import Sendable
from toolbridge.core.calls import ToolCallRequest


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


def tool_results(body: dict[str, object]) -> dict[str, str]:
    """Call id -> the text of its tool result, in one Chat Completions request."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


@pytest.mark.parametrize(
    ("name", "arguments", "told"),
    [
        ("read_file", '{"path": "a\udc80.txt"}', "surrogate"),
        ("read_\udc80file", '{"path": "a.txt"}', "Did you mean 'read_file'"),
        ("read_file", '{"path": "a.txt", "\ud800": 1}', "surrogate"),
        ("read_file", '{"path": "a\\udc80.txt"}', "surrogate"),
    ],
)
def test_a_lone_surrogate_from_the_model_is_an_error_it_is_told_and_the_run_goes_on(
    server: ScriptedServer, tmp_path: Path, name: str, arguments: str, told: str
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    # The stream's JSON carries each as an escape: the SDK decodes a lone surrogate into
    # the name or the arguments' text (the last case: into the arguments' own JSON).
    server.add(
        openai_chat_stream(calls=[("c1", name, arguments)]),
        openai_chat_stream(text="done"),
    )
    done = agent(server.url, tmp_path, "read it", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done", done.stdout
    assert "Traceback" not in done.stderr
    [_, second] = server.bodies()
    result = tool_results(second)["c1"]
    assert told in result, result
    # the whole second request is valid UTF-8 JSON (it reached the server as such)
    json.dumps(second, ensure_ascii=False).encode("utf-8")


def test_a_lone_surrogate_in_arguments_given_as_an_object_is_sent_back_escaped(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # Anthropic's arguments are an object: its strings hold the surrogate once parsed.
    (tmp_path / "a.txt").write_text("alpha\n")
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file"}
    server.add(
        anthropic_stream([{**call, "input": {"path": "a\udc80.txt"}}]),
        anthropic_stream([{"type": "text", "text": "done"}]),
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key"}
    command = [sys.executable, "-m", "toolbridge", "agent", "read it", "--no-skills"]
    command += ["--model", "anthropic:claude-test", "--base-url", server.url]
    done = subprocess.run(
        [*command, "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done", done.stdout
    [_, second] = server.bodies()
    [assistant, results] = second["messages"][1:]
    assert assistant["content"][0]["input"] == {"path": "a\\udc80.txt"}
    [result] = results["content"]
    assert result["tool_use_id"] == "toolu_1" and result["is_error"] is True
    assert "surrogate" in json.dumps(result["content"]), result


def test_each_turn_checks_the_new_messages_and_keeps_the_clean_ones() -> None:
    clean = UserMessage("plain ascii, and é")
    call = ToolCallRequest("c1", "read_\udc80file", '{"path": "a\udc80.txt"}')
    dirty = AssistantMessage(text="x\ud800", calls=(call,))
    conversation: list[Message] = [clean, dirty]
    sendable = Sendable()
    sendable(conversation)
    assert conversation[0] is clean  # nothing to escape: the same object
    escaped = conversation[1]
    assert isinstance(escaped, AssistantMessage)
    assert escaped.text == "x\\ud800"
    assert escaped.calls[0].name == "read_\\udc80file"
    assert json.loads(escaped.calls[0].arguments) == {"path": "a\\udc80.txt"}
    assert json.dumps([str(m) for m in conversation], ensure_ascii=False).encode()
    later = UserMessage("next \udc81")
    conversation.append(later)
    sendable(conversation)
    assert conversation[1] is escaped  # checked before: kept as it is
    assert conversation[2] == UserMessage("next \\udc81")
    conversation[0] = UserMessage("replaced \udc82")  # the list rebuilt (a resumed run):
    conversation[2] = later  # its last checked message is another object: all again
    sendable(conversation)
    assert conversation[0] == UserMessage("replaced \\udc82")
    assert conversation[2] == UserMessage("next \\udc81")


def test_a_lone_surrogate_deep_in_nested_arguments_is_escaped_too() -> None:
    """Arguments nested deeper than Python's recursion limit lets a recursive walk go (a
    hostile model's object input, as Anthropic's SDK parses it): their surrogate went
    out as it was, and the next request failed to encode, which ended the run."""
    deep: object = "a\udc80"
    for _ in range(3000):
        deep = [{"k": deep}]
    call = ToolCallRequest("c1", "read_file", {"path": deep, "n": [1, "b"]})
    conversation: list[Message] = [AssistantMessage(text="", calls=(call,))]
    Sendable()(conversation)
    [escaped] = conversation
    assert isinstance(escaped, AssistantMessage)
    arguments = escaped.calls[0].arguments
    assert isinstance(arguments, dict) and arguments["n"] == [1, "b"]
    inner = arguments["path"]
    for _ in range(3000):
        inner = inner[0]["k"]
    assert inner == "a\\udc80"
