"""``toolbridge agent``: the command in a real subprocess against a scripted server."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.agent.scripted_server import ScriptedServer, openai_chat_stream
from tests.cli.conftest import run_on_tty

from toolbridge.cli.loading import LoadOptions, load_tools
from toolbridge.execution.approval import arguments_digest
from toolbridge.journal import CallKey, SQLiteJournal

REPO = Path(__file__).resolve().parents[2]


def agent(
    server_url: str, workspace: Path, *args: str, stdin: str = "", tty_input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command; `tty_input` gives it a terminal as stdin and types that text (the
    approval questions are asked only at a terminal)."""
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "HOME": str(workspace.parent)}
    env.update(USER="tester", LOGNAME="tester")  # who answers the prompts
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *sys.path])
    command = [sys.executable, "-m", "toolbridge", "agent", *args]
    command += ["--model", "openai:gpt-test", "--base-url", f"{server_url}/v1"]
    command += ["--workspace", str(workspace), "--no-skills"]
    if tty_input is not None:
        return run_on_tty(command, workspace, env, tty_input)
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_json_events(server: ScriptedServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(
        openai_chat_stream(calls=[("c1", "read_file", '{"path": "a.txt"}')]),
        openai_chat_stream(text="It says alpha."),
    )
    done = agent(server.url, workspace, "What is in a.txt?", "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "tool_call" and kinds[-1] == "run_finished"
    finished = next(e for e in events if e["type"] == "tool_finished")
    assert finished["name"] == "read_file" and finished["status"] == "ok"
    assert "alpha" in finished["result"]
    assert events[-1]["stop_reason"] == "final" and events[-1]["output"] == "It says alpha."
    tools = [t["function"]["name"] for t in server.bodies()[0]["tools"]]
    assert "read_file" in tools and "write_file" in tools


def test_writes_ask_first_and_yes_approves(server: ScriptedServer, workspace: Path) -> None:
    write = [("c1", "write_file", '{"path": "b.txt", "content": "beta"}')]
    server.add(openai_chat_stream(calls=write), openai_chat_stream(text="Declined."))
    declined = agent(server.url, workspace, "Write b.txt", tty_input="n\n")
    assert declined.returncode == 0, declined.stderr
    assert "Allow write_file" in declined.stderr
    assert not (workspace / "b.txt").exists()
    assert "declined" in server.bodies()[1]["messages"][-1]["content"]
    assert declined.stdout.strip() == "Declined."

    server.add(openai_chat_stream(calls=write), openai_chat_stream(text="Written."))
    approved = agent(server.url, workspace, "Write b.txt", "--yes")
    assert approved.returncode == 0, approved.stderr
    assert (workspace / "b.txt").read_text() == "beta"
    assert "final: 2 turns, 1 tool calls" in approved.stderr


def test_interactive_session_keeps_history(server: ScriptedServer, workspace: Path) -> None:
    server.add(openai_chat_stream(text="Hello."), openai_chat_stream(text="Still here."))
    done = agent(server.url, workspace, stdin="hi\nare you there?\n")
    assert done.returncode == 0, done.stderr
    assert "Hello." in done.stdout and "Still here." in done.stdout
    second = server.bodies()[1]["messages"]
    assert [(m["role"], m.get("content")) for m in second[1:]] == [
        ("user", "hi"),
        ("assistant", "Hello."),
        ("user", "are you there?"),
    ]


def test_unreachable_server_is_one_line(workspace: Path) -> None:
    done = agent("http://127.0.0.1:9", workspace, "hi")
    assert done.returncode == 1
    assert done.stderr.strip().startswith("Error: cannot reach the model server")
    assert "http://127.0.0.1:9/v1" in done.stderr  # the URL that failed
    assert "Traceback" not in done.stderr


def test_a_session_goes_on_across_runs_and_never_runs_a_call_twice(
    server: ScriptedServer, workspace: Path
) -> None:
    write = [("c1", "write_file", '{"path": "log.txt", "content": "once"}')]
    server.add(openai_chat_stream(calls=write), openai_chat_stream(text="Wrote it."))
    first = agent(server.url, workspace, "Write log.txt", "--yes", "--session", "work")
    assert first.returncode == 0, first.stderr
    assert (workspace / "log.txt").read_text() == "once"

    # A second run of the session sees the conversation so far; a model that repeats the
    # same call id and arguments gets the stored result, and the file is not written again.
    (workspace / "log.txt").write_text("changed by the user")
    server.add(openai_chat_stream(calls=write), openai_chat_stream(text="Done again."))
    second = agent(server.url, workspace, "Write it again", "--yes", "--session", "work")
    assert second.returncode == 0, second.stderr
    sent = server.bodies()[2]["messages"]
    assert [m.get("content") for m in sent if m["role"] == "user"] == [
        "Write log.txt",
        "Write it again",
    ]
    assert (workspace / "log.txt").read_text() == "changed by the user"  # not run twice

    listed = subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", "show", "work", "-w", str(workspace)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert "write_file" in listed.stdout and "finished" in listed.stdout


def journal_cli(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", *args, "-w", str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},  # one table row per line
    )


def approvals(workspace: Path, session: str) -> dict[str, object]:
    exported = journal_cli(workspace, "export", "--session", session)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    return {row["call_id"]: row["approval"] for row in rows}


def test_the_journal_says_who_approved_each_call(server: ScriptedServer, workspace: Path) -> None:
    write = [("c1", "write_file", '{"path": "b.txt", "content": "beta"}')]
    server.add(openai_chat_stream(calls=write), openai_chat_stream(text="Written."))
    asked = agent(server.url, workspace, "Write b.txt", "--session", "s", tty_input="y\n")
    assert asked.returncode == 0, asked.stderr
    write = [("c2", "write_file", '{"path": "c.txt", "content": "gamma"}')]
    read = [("c3", "read_file", '{"path": "c.txt"}')]
    server.add(openai_chat_stream(calls=write + read), openai_chat_stream(text="Done."))
    flagged = agent(server.url, workspace, "Write c.txt", "--session", "s", "--yes")
    assert flagged.returncode == 0, flagged.stderr

    stored = approvals(workspace, "s")
    assert stored["c1"] == {
        "approved": True,
        "digest": stored["c1"]["digest"],  # type: ignore[index]
        "by": "user:tester",
    }
    assert stored["c2"]["by"] == "--yes"  # type: ignore[index]
    assert stored["c3"] is None  # read-only: it needed no approval
    shown = journal_cli(workspace, "show", "s")
    assert "approved by" in shown.stdout and "user:tester" in shown.stdout
    assert "--yes" in shown.stdout


async def leave_interrupted(
    workspace: Path, session: str, call_id: str, args: dict[str, str]
) -> None:
    """What a process killed while running `write_file(args)` leaves in the journal."""
    registry = load_tools(LoadOptions(workspace, "default", None, False, False)).registry
    prepared = registry.prepare_call("write_file", args).arguments
    assert prepared is not None
    key = CallKey(session, call_id, arguments_digest("write_file", prepared))
    async with SQLiteJournal.in_workspace(workspace) as journal:
        await journal.claim(key, "write_file", dict(prepared))
        await journal.abandon(key)


@pytest.mark.parametrize("retry", [True, False])
def test_an_interrupted_call_asks_whether_to_retry_it(
    server: ScriptedServer, workspace: Path, retry: bool
) -> None:
    args = {"path": "d.txt", "content": "delta"}
    asyncio.run(leave_interrupted(workspace, "s", "c1", args))
    server.add(
        openai_chat_stream(calls=[("c1", "write_file", json.dumps(args))]),
        openai_chat_stream(text="Handled."),
    )
    answers = "y\n" if retry else "n\n"
    done = agent(server.url, workspace, "Write d.txt", "--session", "s", tty_input=answers)
    assert done.returncode == 0, done.stderr
    assert "Allow write_file" not in done.stderr  # the journal answers it: no approval to give
    assert "may have partly run" in done.stderr
    assert "Retry this call that may have partly run? [y/N]" in done.stderr
    sent = server.bodies()[1]["messages"][-1]
    assert sent["role"] == "tool"
    if retry:
        assert (workspace / "d.txt").read_text() == "delta"
        stored = approvals(workspace, "s")["c1"]
        assert stored["retry"] is True and stored["by"] == "user:tester"  # type: ignore[index]
    else:
        assert not (workspace / "d.txt").exists()
        assert "interrupted" in sent["content"] and "not to run it again" in sent["content"]


def test_yes_approves_calls_but_not_the_retry_of_an_interrupted_one(
    server: ScriptedServer, workspace: Path
) -> None:
    # The call may have partly run: a person checks its effects before it runs again.
    args = {"path": "e.txt", "content": "echo"}
    asyncio.run(leave_interrupted(workspace, "s", "c1", args))
    server.add(
        openai_chat_stream(calls=[("c1", "write_file", json.dumps(args))]),
        openai_chat_stream(text="Handled."),
    )
    done = agent(server.url, workspace, "Write e.txt", "--session", "s", "--yes")
    assert done.returncode == 0, done.stderr
    assert not (workspace / "e.txt").exists()
    sent = server.bodies()[1]["messages"][-1]
    assert sent["role"] == "tool" and "interrupted" in sent["content"]
    assert "--yes approves calls, not retries" in sent["content"]


def test_a_stored_run_that_cannot_be_read_is_one_line(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(openai_chat_stream(text="Hello."))
    first = agent(server.url, workspace, "hi", "--session", "s")
    assert first.returncode == 0, first.stderr
    database = sqlite3.connect(workspace / ".toolbridge" / "journal.sqlite3")
    with database:  # another tool (or a person) edited the stored run
        stored = json.loads(database.execute("SELECT state FROM toolbridge_runs").fetchone()[0])
        stored["usage"] = "lots"
        database.execute("UPDATE toolbridge_runs SET state = ?", (json.dumps(stored),))
    database.close()
    again = agent(server.url, workspace, "go on", "--session", "s")
    assert again.returncode == 2, again.stderr
    assert "Traceback" not in again.stderr
    [line] = again.stderr.strip().splitlines()
    assert "session 's'" in line and "usage" in line
    assert len(server.requests) == 1  # the model was not asked with a broken history


def bare_agent(workspace: Path, model: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The command with `model` and no provider key or region in the environment."""
    keep = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "AWS_"))
    }
    keep.update(env, HOME=str(workspace.parent))  # no ~/.aws config either
    keep["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *sys.path])
    command = [sys.executable, "-m", "toolbridge", "agent", "hi", "--model", model]
    command += ["--workspace", str(workspace), "--no-skills"]
    return subprocess.run(
        command, capture_output=True, text=True, env=keep, timeout=120, check=False
    )


def test_a_missing_anthropic_key_is_one_line(workspace: Path) -> None:
    done = bare_agent(workspace, "anthropic:claude-sonnet-4-5")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "ANTHROPIC_API_KEY" in line


def test_bedrock_without_a_region_is_one_line(workspace: Path) -> None:
    done = bare_agent(
        workspace,
        "bedrock:anthropic.claude-sonnet-4-5",
        AWS_CONFIG_FILE=str(workspace / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(workspace / "none"),
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "region" in line and "AWS_REGION" in line


def test_the_config_files_executor_policy_applies(server: ScriptedServer, workspace: Path) -> None:
    # [executor] applies to the agent's calls as to `tools call` and `mcp serve`; the
    # agent still asks before every call that writes.
    (workspace / "big.txt").write_text("a line of the file\n" * 1000)
    config = workspace / "toolbridge.toml"
    config.write_text("[executor]\nmax_result_chars = 2000\npreview_chars = 500\n")
    read = [("c1", "read_file", '{"path": "big.txt"}')]
    write = [("c2", "write_file", '{"path": "c.txt", "content": "x"}')]
    server.add(
        openai_chat_stream(calls=read + write),
        openai_chat_stream(text="Read it."),
    )
    done = agent(server.url, workspace, "Read big.txt", "--config", str(config), tty_input="n\n")
    assert done.returncode == 0, done.stderr
    assert "Allow write_file" in done.stderr
    sent = server.bodies()[1]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert len(results["c1"]) < 2000, len(results["c1"])  # 24 kB uncapped
