"""Calls that need approval: a y/n prompt on a terminal, --yes, denied without a terminal.

Every call goes through `ToolExecutor.run`, so a tool's own timeout holds on the command
line too (it did not when `call` ran the registry directly).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.conftest import EXAMPLES, Cli

from toolbridge import (
    ErrorKind,
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolOutcome,
    ToolRegistry,
    tool,
)
from toolbridge.cli.approval import Verdict, run_calls
from toolbridge.execution.approval import arguments_digest
from toolbridge.journal import CallKey, SQLiteJournal


@pytest.fixture
def cli(cli_in_process: Cli) -> Cli:
    """These tests check what a command prints and its exit code: run in this process
    (tests/cli/in_process.py), the same command gives the same output for less CPU."""
    return cli_in_process


PLUGIN = """
    import asyncio
    from pathlib import Path
    from toolbridge import tool, current_context

    @tool(requires_approval=True)
    def touch(name: str) -> str:
        \"\"\"Create an empty file in the workspace.\"\"\"
        (current_context().workspace / name).write_text("")
        return f"created {name}"

    @tool(timeout=0.2)
    async def sleepy() -> str:
        \"\"\"Sleeps longer than its own time limit.\"\"\"
        await asyncio.sleep(30)
        return "woke up"
"""


def _install(cli: Cli) -> None:
    cli.plugin(
        "approval_plugin",
        PLUGIN,
        {"touch": "approval_plugin:touch", "sleepy": "approval_plugin:sleepy"},
    )


def test_without_a_terminal_a_call_needing_approval_is_denied(cli: Cli) -> None:
    _install(cli)
    done = cli("call", "touch", '{"name": "made.txt"}', "--json", stdin="")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["error_kind"] == "approval_denied"
    assert "run it again with --yes" in result["content"]
    assert not (cli.workspace / "made.txt").exists()


def test_yes_approves_every_call(cli: Cli) -> None:
    _install(cli)
    done = cli("call", "touch", '{"name": "made.txt"}', "--yes", stdin="")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "created made.txt\n"
    assert (cli.workspace / "made.txt").exists()


def test_the_prompt_shows_tool_and_arguments_and_y_runs_it(cli: Cli) -> None:
    _install(cli)
    done = cli("call", "touch", '{"name": "made.txt"}', tty_input="y\n")
    assert done.returncode == 0, done.stderr
    assert "tool 'touch' asks for approval" in done.stderr
    assert '"name": "made.txt"' in done.stderr and "Run it? [y/N]" in done.stderr
    assert (cli.workspace / "made.txt").exists()


def test_the_prompt_shows_control_and_bidi_characters_escaped(cli: Cli) -> None:
    # JSON escapes C0 controls only: an 8-bit CSI (U+009B), DEL or a right-to-left
    # override (U+202E) in the model's arguments reached the terminal as they are, so
    # the arguments the user approves could be redrawn or shown reordered.
    _install(cli)
    name = "a\u009b2Jb\u007fc\u202etxt.exe\u200bd"
    done = cli("call", "touch", json.dumps({"name": name}), tty_input="n\n")
    assert done.returncode == 1
    for raw in ("\u009b", "\u007f", "\u202e", "\u200b"):
        assert raw not in done.stderr
    assert '"name": "a\\u009b2Jb\\u007fc\\u202etxt.exe\\u200bd"' in done.stderr


def test_the_prompt_answered_n_denies_it(cli: Cli) -> None:
    _install(cli)
    done = cli("call", "touch", '{"name": "made.txt"}', tty_input="n\n")
    assert done.returncode == 1
    assert "the user denied the call to 'touch'" in done.stderr
    assert not (cli.workspace / "made.txt").exists()


def test_exec_asks_for_each_pending_call_and_answers_every_call(cli: Cli) -> None:
    _install(cli)
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "touch", "input": {"name": "a.txt"}},
            {"type": "tool_use", "id": "t2", "name": "glob", "input": {"pattern": "*.txt"}},
            {"type": "tool_use", "id": "t3", "name": "touch", "input": {"name": "b.txt"}},
        ],
        "stop_reason": "tool_use",
    }
    (cli.workspace / "response.json").write_text(json.dumps(response))
    done = cli("exec", "response.json", tty_input="y\nn\n")
    assert done.returncode == 1  # one call was denied
    blocks = json.loads(done.stdout)[0]["content"]
    assert [b["tool_use_id"] for b in blocks] == ["t1", "t2", "t3"]
    assert blocks[0]["content"] == "created a.txt" and not blocks[0]["is_error"]
    assert blocks[2]["is_error"] and "denied" in blocks[2]["content"]
    assert (cli.workspace / "a.txt").exists() and not (cli.workspace / "b.txt").exists()
    assert done.stderr.count("asks for approval") == 2


def test_call_honours_the_tools_own_timeout(cli: Cli) -> None:
    _install(cli)
    done = cli("call", "sleepy", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["error_kind"] == "timeout"


def test_the_examples_need_no_approval(cli: Cli) -> None:
    (cli.workspace / "README.md").write_text("a\n")
    done = cli("exec", str(EXAMPLES / "anthropic_response.json"), stdin="")
    assert done.returncode == 0, done.stderr
    assert "approval" not in done.stderr


async def test_run_calls_offers_the_retry_of_an_interrupted_call(tmp_path: Path) -> None:
    """`run_calls` (behind ``call``/``exec``) with a journal: the retry of a call a crash
    interrupted is asked (once, with no approval asked first); a denied retry keeps its
    error."""
    effects: list[str] = []

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send a message (an effect outside the process)."""
        effects.append(to)
        return f"sent to {to}"

    asked: list[tuple[str, bool]] = []

    def decide(outcome: ToolOutcome) -> Verdict:
        assert outcome.approval is not None
        asked.append((outcome.call.id, outcome.approval.retry))
        return Verdict(outcome.call.id == "a" or not outcome.approval.retry, by="user:test")

    async with SQLiteJournal(tmp_path / "journal.sqlite3") as journal:
        for call_id in ("a", "b"):  # both were running in a process that died
            key = CallKey("default", call_id, arguments_digest("send", {"to": call_id}))
            await journal.claim(key, "send", {"to": call_id})
            await journal.abandon(key)
        registry = ToolRegistry([send], context=ToolContext(workspace=tmp_path))
        executor = ToolExecutor(registry, ExecutionPolicy(persist_results=False), journal=journal)
        calls = [ToolCallRequest(cid, "send", {"to": cid}) for cid in ("a", "b", "c")]
        outcomes = await run_calls(executor, calls, decide)
        stored = {e.key.call_id: e.approval for e in await journal.entries()}
    # a and b are asked only about their retry (the journal answers them: no approval to
    # give first); c, a new call, for its approval.
    assert asked == [("a", True), ("b", True), ("c", False)]
    assert [o.result.text for o in outcomes][::2] == ["sent to a", "sent to c"]
    assert outcomes[1].kind is ErrorKind.INTERRUPTED  # the retry was denied
    assert effects == ["a", "c"]  # a once more on its approved retry; c on its approval
    assert stored["a"] is not None and stored["a"]["retry"] is True
    assert stored["a"]["by"] == "user:test" and stored["c"]["by"] == "user:test"  # type: ignore[index]
