"""Exec sessions under races a hostile user makes: the idle limit against a poll that is
waiting on the session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import ToolContext, ToolRegistry
from toolbridge.tools.shell import ExecConfig, ExecTool

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


@pytest.mark.parametrize("mode", ["bwrap", "none"])
async def test_the_idle_limit_spares_a_session_a_poll_is_waiting_on(
    workspace: Path, mode: str
) -> None:
    config = ExecConfig(sandbox=mode, unsandboxed="allow", session_idle_s=0.2)
    tool = ExecTool(workspace, config, environ=ENV)
    try:
        registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
        started = await registry.execute("exec", {"command": "cat", "yield_time_ms": 0})
        session_id = started.metadata["session_id"]
        # waits ten idle limits for a text that never comes: being waited on is being used
        waited = await registry.execute(
            "write_stdin", {"session_id": session_id, "wait_for": "never", "wait_timeout_ms": 2000}
        )
        assert waited.metadata["running"] is True, waited.text
        assert "'never' did not appear" in waited.text
    finally:
        tool.close()


async def test_a_wait_for_cut_short_by_the_end_of_the_command_says_so(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    try:
        registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
        started = await registry.execute("exec", {"command": "read x", "yield_time_ms": 0})
        ended = await registry.execute(
            "write_stdin",
            {"session_id": started.metadata["session_id"], "chars": "\n", "wait_for": "never"},
        )
        assert ended.metadata["exit_code"] == 0, ended.text
        assert ended.text.startswith("Note: the command ended before 'never' appeared"), ended.text
    finally:
        tool.close()


@pytest.mark.parametrize("mode", ["bwrap", "none"])
async def test_a_character_or_sequence_cut_by_a_poll_is_whole_in_the_next(
    workspace: Path, mode: str
) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox=mode, unsandboxed="allow"), environ=ENV)
    script = (
        r"read w; printf 'a\303'; read x; printf '\251b\033[3'; read y; printf '1mRED\n'; read z"
    )
    try:
        registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
        started = await registry.execute("exec", {"command": script, "yield_time_ms": 0})
        session_id = started.metadata["session_id"]
        texts = []
        for wanted in ("a", "b", "RED"):
            polled = await registry.execute(
                "write_stdin",
                {"session_id": session_id, "chars": "\n", "wait_for": wanted},
            )
            assert polled.metadata["running"] is True, polled.text
            texts.append(polled.text.partition("\nstill running")[0])
        assert texts == ["a", "\u00e9b", "RED"]
    finally:
        tool.close()


async def test_the_session_cap_names_the_ended_sessions_a_poll_frees(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap", max_sessions=2), environ=ENV)
    try:
        registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
        first = await registry.execute("exec", {"command": "read x", "yield_time_ms": 0})
        await registry.execute("exec", {"command": "read x", "yield_time_ms": 0})
        ended = tool.sessions.get("default", first.metadata["session_id"])
        assert ended is not None
        ended.close_stdin()  # `read` ends; nobody polls it
        await ended.wait(30)
        refused = await registry.execute("exec", {"command": "true", "yield_time_ms": 0})
        assert refused.is_error
        assert f"1 running; {ended.id} ended but not polled since" in refused.text
        polled = await registry.execute("write_stdin", {"session_id": ended.id})
        assert polled.metadata["exit_code"] == 1
        again = await registry.execute("exec", {"command": "true", "yield_time_ms": 10_000})
        assert again.metadata["exit_code"] == 0, again.text
    finally:
        tool.close()


async def test_session_ids_say_nothing_of_another_context_session(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    try:
        ids = []
        for session in ("alice", "bob", "alice"):
            registry = ToolRegistry(
                [tool, *tool.companions()], context=ToolContext(workspace, session=session)
            )
            started = await registry.execute("exec", {"command": "cat", "yield_time_ms": 0})
            ids.append(started.metadata["session_id"])
        assert ids == [1, 1, 2]  # bob's first is 1 whatever alice started
        bob = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace, "bob"))
        refused = await bob.execute("write_stdin", {"session_id": 2, "terminate": True})
        assert refused.error_kind is not None and "no exec session 2" in refused.text
        assert tool.sessions.get("alice", 2) is not None
    finally:
        tool.close()


@pytest.mark.parametrize(
    "sabotage",
    [
        "rm -rf /tmp/toolbridge-home; ln -s /nonexistent /tmp/toolbridge-home",
        "rm -rf /tmp/toolbridge-home; touch /tmp/toolbridge-home",
        "rm -rf /tmp/toolbridge-home",
    ],
)
async def test_a_command_that_replaces_the_home_folder_does_not_break_the_next(
    workspace: Path, sabotage: str
) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    try:
        registry = ToolRegistry([tool], context=ToolContext(workspace))
        done = await registry.execute("exec", {"command": sabotage})
        assert done.metadata["exit_code"] == 0, done.text
        for _ in range(2):
            after = await registry.execute("exec", {"command": 'echo "home $HOME"; ls -A "$HOME"'})
            assert after.metadata["exit_code"] == 0, after.text
            assert after.text.startswith("home /tmp/toolbridge-home/toolbridge-home-")
    finally:
        tool.close()
