"""The audit trail has every call: calls refused before they ran (unknown tool, invalid
arguments, unanswered or denied approval, a loop-guard stop) are recorded with their
kind, never claimed, and listed by ``journal show`` and ``export``; SQLite and a real
PostgreSQL server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.core.errors import ErrorKind
from toolbridge.journal import CallState, open_journal


def registry(workspace: Path, log: list[str]) -> ToolRegistry:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a text."""
        log.append(text)
        return f"published {text}"

    @tool(read_only=True)
    def lookup(n: int) -> str:
        """Look a number up (it is never there)."""
        raise ValueError(f"no entry {n}")

    return ToolRegistry([publish, lookup], context=ToolContext(workspace=workspace, session="s"))


async def test_refused_calls_are_recorded_with_their_kind_and_never_answer_a_call(
    journal_target: str, tmp_path: Path
) -> None:
    log: list[str] = []
    async with await open_journal(journal_target) as journal:
        policy = ExecutionPolicy(persist_results=False, block_after=2, warn_after=1)
        executor = ToolExecutor(registry(tmp_path, log), policy, journal=journal)
        publish = ToolCallRequest("p1", "publish", {"text": "x"})
        first = await executor.run([
            ToolCallRequest("u1", "no_such_tool", {"a": 1}),
            ToolCallRequest("i1", "lookup", {"n": "not a number"}),
            publish,  # nobody answered yet
        ])  # fmt: skip
        assert [o.kind for o in first] == [ErrorKind.UNKNOWN_TOOL, ErrorKind.INVALID_ARGUMENTS,
                                          ErrorKind.APPROVAL_REQUIRED]  # fmt: skip
        assert first[2].approval is not None
        executor.deny(first[2].approval, "not now")
        [denied] = await executor.run([publish])
        assert denied.kind is ErrorKind.APPROVAL_DENIED
        for n in range(3):  # fails twice (run), then the loop guard stops it
            [looked] = await executor.run([ToolCallRequest(f"l{n}", "lookup", {"n": 7})])
        assert looked.kind is ErrorKind.REPEATED_CALL
        executor.approve(first[2].approval)  # now approved: the call runs, once
        [ran] = await executor.run([publish])
        assert ran.ok and log == ["x"]

        entries = await journal.entries(session="s")
        refused = [(e.key.call_id, e.tool, e.error_kind) for e in entries
                   if e.state is CallState.REFUSED]  # fmt: skip
        assert refused == [
            ("u1", "no_such_tool", "unknown_tool"),
            ("i1", "lookup", "invalid_arguments"),
            ("p1", "publish", "approval_required"),
            ("p1", "publish", "approval_denied"),
            ("l2", "lookup", "repeated_call"),
        ]
        for entry in entries:
            if entry.state is CallState.REFUSED:  # never started, never claimed
                assert entry.attempt == 0 and entry.started_at is None
                assert entry.outcome is not None and entry.outcome["is_error"] is True
        by_id = {e.key.call_id: e for e in entries if e.state is not CallState.REFUSED}
        assert {call: e.state for call, e in by_id.items()} == {
            "l0": CallState.FINISHED, "l1": CallState.FINISHED, "p1": CallState.FINISHED,
        }  # fmt: skip
        assert [e.arguments for e in entries if e.key.call_id == "u1"] == [{"a": 1}]


def test_show_and_export_list_refused_calls(tmp_path: Path) -> None:
    import asyncio

    async def refuse() -> None:
        async with await open_journal(str(tmp_path / "j.sqlite3")) as journal:
            executor = ToolExecutor(registry(tmp_path, []), journal=journal)
            await executor.run([ToolCallRequest("u1", "no_such_tool", {})])

    asyncio.run(refuse())

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "toolbridge", "journal", *args, "--journal", "j.sqlite3"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "COLUMNS": "200"},  # a table wide enough for every cell
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    [row] = map(json.loads, cli("export").splitlines())
    assert (row["call_id"], row["state"], row["error_kind"]) == ("u1", "refused", "unknown_tool")
    shown = cli("show", "s")
    assert "u1" in shown and "refused" in shown and "unknown_tool" in shown
