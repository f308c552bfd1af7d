"""Untrusted text is shown as plain, inert text by every command and output mode.

A hostile corpus (tests/cli/hostile_text.py: rich markup, emoji codes, 7- and 8-bit
escape sequences, BEL, backspace, CR, NUL, DEL, bidi overrides) is put where text from
outside enters: a tool's result and description, a file, the model's answer, tool
names, call ids and arguments, a skill's description, body and requirement names, an
MCP server's error, tool list and stderr, the journal's sessions, ids, tools, outcomes
and approvers. Each command runs as a user runs it (a real subprocess, a scripted model
server on 127.0.0.1, real MCP server processes, a real journal file), and its output
must hold no character that acts on a terminal, no traceback, the expected exit code,
and the markup as literal text (``--json``: the exact text, escaped).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.scripted_server import Reply, ScriptedServer, openai_chat_stream, serve
from tests.cli.conftest import Cli
from tests.cli.hostile_text import HOSTILE, IN_ARGV, LITERAL, MARKUP, assert_inert
from tests.json_strings import strings

from toolbridge.journal import CallKey, SQLiteJournal

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

PLUGIN = """
    from toolbridge import tool
    from hostile_text import HOSTILE

    @tool(description=HOSTILE, read_only=True)
    def evil(q: str = "") -> str:
        return HOSTILE + "\\nsecond line " + HOSTILE

    @tool(read_only=True)
    def evil_fail(q: str = "") -> str:
        \"\"\"Fails with the corpus.\"\"\"
        raise RuntimeError(HOSTILE)
"""


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


@pytest.fixture
def hostile(cli: Cli) -> Cli:
    """The CLI with the corpus on its path, a plugin that returns it, and a file holding it."""
    (cli.site / "hostile_text.py").write_text((HERE / "hostile_text.py").read_text())
    cli.plugin("evil_plugin", PLUGIN, {"evil": "evil_plugin:evil", "fail": "evil_plugin:evil_fail"})
    text = HOSTILE.replace("\x00", "")  # read_file refuses a file with NUL bytes as binary
    (cli.workspace / "evil.txt").write_text(f"{text}\n{text}\n", encoding="utf-8")
    return cli


def run(
    cli: Cli, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m toolbridge ARGS`` in the workspace; raw bytes out (checked as UTF-8)."""
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(cli.site), str(REPO / "src"), str(REPO)]),
        "HOME": str(cli.site),  # no user skills from the real home
        "COLUMNS": "400",  # tables wide enough to keep each cell on one line
        "OPENAI_API_KEY": "test-key",
        "USER": "tester",
        "LOGNAME": "tester",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", *args],
        cwd=cli.workspace,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
        env=full_env,
    )


inert = assert_inert


# --- tools, call, exec ------------------------------------------------------------------


def test_tools_lists_a_hostile_description_as_text(hostile: Cli) -> None:
    out, _ = inert(run(hostile, "tools"), 0)
    assert "evil" in out and LITERAL in out
    for mode in (("--json",), ("--format", "anthropic"), ("--format", "gemini")):
        out, _ = inert(run(hostile, "tools", *mode), 0)
        assert any(HOSTILE in text for text in strings(json.loads(out)))


def test_call_shows_a_hostile_result_and_error_as_text(hostile: Cli) -> None:
    out, _ = inert(run(hostile, "call", "evil"), 0)
    assert LITERAL in out and "\\x1b]0;pwned-title\\x07" in out
    out, _ = inert(run(hostile, "call", "evil", "--json"), 0)
    assert json.loads(out)["content"].startswith(HOSTILE)

    out, _ = inert(run(hostile, "call", "read_file", '{"path": "evil.txt"}'), 0)
    assert LITERAL in out
    out, _ = inert(run(hostile, "call", "read_file", '{"path": "evil.txt"}', "--json"), 0)
    assert "[/x]" in json.loads(out)["content"] and "\x9b" in json.loads(out)["content"]

    _, err = inert(run(hostile, "call", "evil_fail"), 1)
    assert LITERAL in err
    _, err = inert(run(hostile, "call", "evil_fail", "-v"), 1, traceback=True)  # logged too
    assert LITERAL in err and "RuntimeError" in err

    # a model-chosen name, argument keys and values that come back in the error text
    _, err = inert(run(hostile, "call", IN_ARGV), 1)
    arguments = json.dumps({HOSTILE: HOSTILE, "q": 5})
    _, err = inert(run(hostile, "call", "evil", "-", stdin=arguments.encode()), 1)
    assert "unknown key '[/x] [bold red]" in err
    out, _ = inert(run(hostile, "call", "evil", arguments, "--json"), 1)
    assert json.loads(out)["is_error"] is True


def test_exec_shows_hostile_calls_and_results_as_text(hostile: Cli, tmp_path: Path) -> None:
    calls = [
        (HOSTILE, HOSTILE, {}),  # a hostile id and tool name
        ("c2", "read_file", {"path": "evil.txt"}),
        ("c3", "evil", {"q": HOSTILE}),
        ("c4", "evil", {"q": 1}),  # cast: "repaired" on stderr
    ]
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": HOSTILE,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for call_id, name, args in calls
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    (tmp_path / "response.json").write_text(json.dumps(response))
    out, err = inert(run(hostile, "exec", str(tmp_path / "response.json")), 1)
    messages = json.loads(out)
    assert messages[0]["tool_call_id"] == HOSTILE
    assert "\x1b]0;pwned-title\x07" in messages[1]["content"]
    assert "[/x]" in err
    out, _ = inert(run(hostile, "exec", "-", stdin=json.dumps(response).encode()), 1)
    assert json.loads(out)[2]["content"].startswith(HOSTILE)


# --- agent ------------------------------------------------------------------------------


def _script_hostile_run(server: ScriptedServer) -> None:
    server.add(
        openai_chat_stream(
            text=HOSTILE,
            calls=[
                (HOSTILE, HOSTILE, json.dumps({"q": HOSTILE})),  # unknown, hostile name
                ("c2", "read_file", '{"path": "evil.txt"}'),  # a hostile first line
                ("c3", "evil", HOSTILE),  # arguments that are not JSON
                ("c4", "write_file", json.dumps({"path": "w.txt", "content": HOSTILE})),
            ],
        ),
        openai_chat_stream(text=f"done {HOSTILE}"),
    )


def _agent(
    hostile: Cli, server: ScriptedServer, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    base = ["--model", "openai:gpt-test", "--base-url", f"{server.url}/v1"]
    return run(hostile, "agent", "Look around.", *base, *args, stdin=stdin)


def test_agent_shows_the_models_text_and_calls_as_text(
    hostile: Cli, server: ScriptedServer
) -> None:
    _write_hostile_skills(hostile.workspace / ".toolbridge" / "skills")
    _script_hostile_run(server)
    out, err = inert(_agent(hostile, server, stdin=b"n\n"), 0)
    assert LITERAL in out and "done" in out
    assert "[/x]" in err and "read_file" in err
    assert not (hostile.workspace / "w.txt").exists()  # asked, declined

    _script_hostile_run(server)
    out, err = inert(_agent(hostile, server, "--yes", "-v", "--session", "s1"), 0, traceback=True)
    assert LITERAL in out
    assert (hostile.workspace / "w.txt").read_bytes() == HOSTILE.encode()

    _script_hostile_run(server)
    out, _ = inert(_agent(hostile, server, "--json", "--yes"), 0)
    events = [json.loads(line) for line in out.splitlines()]
    assert any(e.get("name") == HOSTILE for e in events)
    assert events[-1]["output"].startswith(f"done {MARKUP}")


def test_agent_shows_a_hostile_server_error_as_text(hostile: Cli, server: ScriptedServer) -> None:
    server.add(Reply(400, {"error": {"message": HOSTILE, "type": "invalid_request_error"}}))
    _, err = inert(_agent(hostile, server, "--no-skills"), 1)
    assert "[/x]" in err


# --- skills -----------------------------------------------------------------------------


def _write_hostile_skills(root: Path) -> None:
    quoted = json.dumps(HOSTILE)  # a YAML double-quoted scalar with the escapes
    for name, extra in (
        ("hostile", ""),
        ("needy", f"metadata:\n  requires:\n    env: [{quoted}]\n    bins: [{quoted}]\n"),
    ):
        folder = root / name
        folder.mkdir(parents=True)
        front = f"name: {name}\ndescription: {quoted}\n{extra}"
        (folder / "SKILL.md").write_text(f"---\n{front}---\n{HOSTILE}\n", encoding="utf-8")
    broken = root / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text(f"---\nname: {quoted}\ndescription: [/x]\n---\n")


def test_skills_commands_show_hostile_skills_as_text(hostile: Cli) -> None:
    root = hostile.workspace / ".toolbridge" / "skills"
    _write_hostile_skills(root)
    out, err = inert(run(hostile, "skills", "list"), 0)
    assert "hostile" in out and "needy" in out and LITERAL in out
    assert "unavailable" in out and "broken" in err
    out, _ = inert(run(hostile, "skills", "list", "--json"), 0)
    rows = {row["name"]: row for row in json.loads(out)}
    assert "[/x]" in rows["hostile"]["description"] and "\x9b" in rows["hostile"]["description"]
    out, _ = inert(run(hostile, "skills", "show", "hostile"), 0)
    assert LITERAL in out
    inert(run(hostile, "skills", "show", "needy"), 2)
    _, err = inert(run(hostile, "skills", "validate", str(root)), 1)
    assert "broken" in err


# --- journal ----------------------------------------------------------------------------


async def _fill(path: Path) -> None:
    async with SQLiteJournal(path) as journal:
        key = CallKey(IN_ARGV, HOSTILE, "h")
        await journal.claim(key, HOSTILE, {HOSTILE: HOSTILE}, approval={"by": HOSTILE})
        await journal.finish(key, {"text": HOSTILE}, error_kind=HOSTILE)
        await journal.claim(CallKey("plain", "c1", "h"), "read_file", {"path": HOSTILE})


def test_journal_commands_show_hostile_records_as_text(hostile: Cli) -> None:
    path = hostile.workspace / ".toolbridge" / "journal.sqlite3"
    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_fill(path))
    out, _ = inert(run(hostile, "journal", "list"), 0)
    assert "[/x]" in out and "plain" in out
    out, _ = inert(run(hostile, "journal", "show", IN_ARGV), 0)
    assert LITERAL in out
    inert(run(hostile, "journal", "show", f"missing {IN_ARGV}"), 2)
    out, _ = inert(run(hostile, "journal", "export"), 0)
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0]["session"] == IN_ARGV and rows[0]["outcome"] == {"text": HOSTILE}


# --- mcp --------------------------------------------------------------------------------


def _servers_config(tmp_path: Path) -> Path:
    script = str(HERE / "hostile_mcp_server.py")
    config = tmp_path / "mcp.json"
    servers = {
        "bad": {"command": sys.executable, "args": [script, "--fail-init"], "connect_timeout": 30},
        "evil": {"command": sys.executable, "args": [script], "connect_timeout": 30},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    return config


def test_mcp_servers_shows_hostile_servers_as_text(hostile: Cli, tmp_path: Path) -> None:
    config = _servers_config(tmp_path)
    out, err = inert(run(hostile, "mcp", "servers", str(config)), 1)
    assert "mcp_evil_echo" in out
    assert "[/x]" in err  # the failed server's error, the refused tool's name


def test_mcp_servers_prints_no_traceback_for_a_message_the_sdk_refused(
    hostile: Cli, tmp_path: Path
) -> None:
    """A lone surrogate escape in a server's message: the MCP SDK logs its parse error with
    a traceback (toolbridge reads the message again), which the last-resort handler
    printed; without -v it is one line."""
    script = str(HERE / "hostile_mcp_server.py")
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [script, "--lone-surrogate"]}
    config.write_text(json.dumps({"mcpServers": {"evil": {**server, "connect_timeout": 30}}}))
    out, err = inert(run(hostile, "mcp", "servers", str(config)), 0)
    assert "mcp_evil_echo" in out
    assert "Failed to parse JSONRPC message" in err  # the SDK's warning, in one line


def test_mcp_serve_shows_hostile_servers_and_logs_as_text(hostile: Cli, tmp_path: Path) -> None:
    config = _servers_config(tmp_path)
    for verbose in ((), ("-v",)):
        # stdin is closed at once: the stdio server ends after starting the gateway
        _, err = inert(run(hostile, "mcp", "serve", "--servers", str(config), *verbose), 0)
        assert "[/x]" in err


def test_the_approval_question_shows_hostile_arguments_as_text(hostile: Cli) -> None:
    (hostile.workspace / "approve.toml").write_text('[executor]\napproval = "writes"\n')
    arguments = json.dumps({"path": "w.txt", "content": HOSTILE})
    done = hostile("call", "write_file", arguments, "-c", "approve.toml", tty_input="n\n")
    raw = subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.encode(), done.stderr.encode()
    )
    _, err = inert(raw, 1)
    assert "asks for approval" in err and "[/x] [bold red]" in err
    assert not (hostile.workspace / "w.txt").exists()


# --- the command line's own errors ----------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("call", "--x" + IN_ARGV.replace("=", "")),  # no such option (ends at a '=')
        ("call", "read_file", "{}", IN_ARGV),  # an extra argument
        ("tools", "--format", IN_ARGV),  # not one of the choices
        ("mcp", "serve", "--http", IN_ARGV),  # a value its callback refuses
        (IN_ARGV,),  # no such command
    ],
)
def test_a_usage_error_quotes_the_command_line_as_text(cli: Cli, args: tuple[str, ...]) -> None:
    """A command line pasted from a web page: the parser's error quotes it. Its C0 and C1
    controls were escaped, but bidi controls, zero-width characters and tags were not."""
    _, err = inert(run(cli, *args), 2)
    assert "Error: " in err and "\\u202e" in err
