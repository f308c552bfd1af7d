"""Every ``--json`` output is JSON a strict reader takes: no ``\\udXXX`` escape of a lone
surrogate, which is not a character. ``json.loads`` and JavaScript take one, but Rust's
serde_json refuses it ('lone leading surrogate in hex escape'), jq turns it into U+FFFD,
and I-JSON (RFC 7493) forbids it. A lone surrogate in a value is written as the six
characters the text output shows and the agent sends a model (``\\udc80``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.agent.scripted_server import ScriptedServer, openai_chat_stream, serve
from tests.agent.test_cli import agent
from tests.cli.conftest import Cli
from tests.json_strings import strings

LONE = r'''
    from toolbridge import tool

    @tool
    def lone(path: str = "x") -> str:
        """Returns caf\udce9 and \ud800 (lone surrogates) for the path given."""
        return path + ": caf\udce9 and \ud800 but \U0001f600 is whole"
'''

SURROGATE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def strict(text: str) -> list[Any]:
    """The JSON documents in `text` (one, or one per line), read as a strict reader
    would: no surrogate escape in the text (serde_json's rule) and every string valid
    Unicode (each encodes to UTF-8)."""
    assert not SURROGATE_ESCAPE.search(text), text
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        documents = [json.loads(line) for line in text.splitlines() if line.strip()]
    for document in documents:
        for string in strings(document):
            string.encode("utf-8")  # UnicodeEncodeError on a lone surrogate
    return documents


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


def test_a_tool_result_with_lone_surrogates_is_strict_json(cli: Cli) -> None:
    cli.plugin("lone_plugin", LONE, {"lone": "lone_plugin:lone"})
    done = cli("call", "lone", '{"path": "p"}', "--json")
    assert done.returncode == 0, done.stderr
    [result] = strict(done.stdout)
    assert result["content"] == "p: caf\\udce9 and \\ud800 but \U0001f600 is whole"


@pytest.mark.parametrize("args", [("--json",), ("--format", "anthropic"), ("--format", "gemini")])
def test_tool_definitions_with_lone_surrogates_are_strict_json(
    cli: Cli, args: tuple[str, ...]
) -> None:
    cli.plugin("lone_plugin", LONE, {"lone": "lone_plugin:lone"})
    done = cli("tools", *args)
    assert done.returncode == 0, done.stderr
    [definitions] = strict(done.stdout)
    assert any("caf\\udce9 and \\ud800" in text for text in strings(definitions))


LONE_SCHEMA = r'''
    from typing import Annotated

    from pydantic import Field
    from toolbridge import tool

    @tool
    def lone_schema(
        path: Annotated[str, Field(description="a path, caf\udce9")] = "x\ud800",
    ) -> str:
        """Takes a path."""
        return path
'''

FORMATS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock"]


@pytest.mark.parametrize("args", [("--json",), *(("--format", name) for name in FORMATS)])
def test_tool_schemas_with_lone_surrogates_are_strict_json(cli: Cli, args: tuple[str, ...]) -> None:
    """A parameter's description and default: the schema registers (jsonschema-rs cannot
    take a lone surrogate: the plugin's registry failed), and prints as it is sent."""
    cli.plugin("lone_schema_plugin", LONE_SCHEMA, {"lone_schema": "lone_schema_plugin:lone_schema"})
    done = cli("tools", *args)
    assert done.returncode == 0, done.stderr
    [definitions] = strict(done.stdout)
    printed = set(strings(definitions))
    assert "a path, caf\\udce9" in printed
    if args != ("--format", "gemini"):  # Gemini's parameters form has no default
        assert "x\\ud800" in printed


def test_exec_result_messages_with_lone_surrogates_are_strict_json(cli: Cli) -> None:
    cli.plugin("lone_plugin", LONE, {"lone": "lone_plugin:lone"})
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "lone", "arguments": '{"path": "q"}'}
    response = {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
    done = cli("exec", "-", stdin=json.dumps(response))
    assert done.returncode == 0, done.stderr
    [messages] = strict(done.stdout)
    assert messages[0]["content"] == "q: caf\\udce9 and \\ud800 but \U0001f600 is whole"


def test_agent_events_with_a_lone_surrogate_from_the_model_are_strict_json(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.add(openai_chat_stream(text="done \udc80 here"))
    done = agent(server.url, tmp_path, "hi", "--json")
    assert done.returncode == 0, done.stderr
    events = strict(done.stdout)
    assert "done \\udc80 here" in [event.get("output") for event in events]


def test_a_non_utf8_file_name_in_a_result_is_strict_json(cli: Cli) -> None:
    (Path(cli.workspace).joinpath(b"caf\xe9.txt".decode("utf-8", "surrogateescape"))).write_text(
        "hello\n"
    )
    for args in (("list_dir", "{}"), ("glob", '{"pattern": "*"}'), ("grep", '{"pattern": "h"}')):
        done = cli("call", *args, "--json")
        assert done.returncode == 0, done.stderr
        [result] = strict(done.stdout)
        assert "caf" in result["content"]
