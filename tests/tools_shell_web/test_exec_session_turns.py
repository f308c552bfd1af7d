"""Exec sessions served to several callers at once (an MCP server's clients, concurrent
batches of one executor): a long wait on one session holds no other call, and the calls on
one session take turns."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from tests.journal.waiting import until
from tests.tools_shell_web.test_exec_sessions import describe, gone, marker, running

from toolbridge import ToolCallRequest, ToolContext, ToolRegistry
from toolbridge.execution.executor import ToolExecutor
from toolbridge.execution.outcomes import EventType, ToolEvent, ToolOutcome
from toolbridge.tools.shell import ExecConfig, ExecTool

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
WAIT = 60_000  # wait_timeout_ms: only a real hang reaches it
# Waits until the file `go` exists in the workspace: the test decides when.
GATE = "while [ ! -e go ]; do sleep 0.02; done"
LATE = f"{GATE}; echo late"
# Says whether input waits on stdin, without reading it.
PENDING = (
    'python3 -c "import select; '
    "print('late:', 'input waiting' if select.select([0], [], [], 0)[0] else 'nothing')\""
)


class Started:
    """The executor's call_started events, by call id, as events to wait for."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}

    def __call__(self, event: ToolEvent) -> None:
        if event.type is EventType.CALL_STARTED:
            self.of(event.call.id).set()

    def of(self, call_id: str) -> asyncio.Event:
        return self.events.setdefault(call_id, asyncio.Event())


async def one(executor: ToolExecutor, call_id: str, name: str, **args: Any) -> ToolOutcome:
    [outcome] = await executor.run([ToolCallRequest(call_id, name, args)])
    return outcome


async def open_session(executor: ToolExecutor, command: str) -> int:
    outcome = await one(executor, f"start-{command}", "exec", command=command, yield_time_ms=0)
    assert outcome.result.metadata["running"] is True, outcome.result.text
    return int(outcome.result.metadata["session_id"])


async def test_a_long_wait_on_one_session_holds_no_call_on_another(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="none", unsandboxed="allow"), environ=ENV)
    started = Started()
    registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
    executor = ToolExecutor(registry, listeners=[started])
    try:
        slow, quick = await open_session(executor, LATE), await open_session(executor, "cat")
        waiting = asyncio.create_task(
            one(executor, "slow", "write_stdin", session_id=slow, wait_for="late",
                wait_timeout_ms=WAIT)
        )  # fmt: skip
        await started.of("slow").wait()
        answering = asyncio.create_task(
            one(executor, "quick", "write_stdin", session_id=quick, chars="hello\n",
                wait_for="hello", wait_timeout_ms=WAIT)
        )  # fmt: skip
        done, _ = await asyncio.wait({waiting, answering}, return_when=asyncio.FIRST_COMPLETED)
        # An exclusive write_stdin held the executor: the quick call waited for `late`.
        assert done == {answering}, "the call on the other session waited for the slow one"
        assert answering.result().result.text.splitlines()[0] == "hello"
        ordinary = await one(executor, "exec", "exec", command="echo meanwhile")
        assert ordinary.result.text == "meanwhile\nExit code: 0"
        assert not waiting.done()
        (workspace / "go").touch()
        assert (await waiting).result.text.splitlines()[0] == "late"
    finally:
        await executor.aclose()
        tool.close()


async def test_two_calls_on_one_session_take_turns_in_their_order(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="none", unsandboxed="allow"), environ=ENV)
    started = Started()
    registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
    executor = ToolExecutor(registry, listeners=[started])
    try:
        # It reads a line, says when the test lets it whether more input is waiting, then
        # echoes what comes next.
        session = await open_session(executor, f"read line; {GATE}; {PENDING}; cat")
        first = asyncio.create_task(
            one(executor, "first", "write_stdin", session_id=session, chars="one\n",
                wait_for="late", wait_timeout_ms=WAIT)
        )  # fmt: skip
        await started.of("first").wait()
        second = asyncio.create_task(
            one(executor, "second", "write_stdin", session_id=session, chars="two\n",
                wait_for="two", wait_timeout_ms=WAIT)
        )  # fmt: skip
        await started.of("second").wait()
        assert not first.done() and not second.done()
        (workspace / "go").touch()
        done, _ = await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {first}
        # The second call wrote only once the first had its answer.
        answer = first.result().result.text
        assert answer.splitlines()[0] == "late: nothing", answer
        assert (await second).result.text.splitlines()[0] == "two"
        # A terminate does not wait for a long poll: it ends the command, the poll returns
        # with the end, and the terminate, after it, finds it reported already: it says so,
        # not that there is no such session (an error, for a stop that worked).
        polling = asyncio.create_task(
            one(executor, "poll", "write_stdin", session_id=session, wait_for="never",
                wait_timeout_ms=WAIT)
        )  # fmt: skip
        await started.of("poll").wait()
        stopped = await one(executor, "stop", "write_stdin", session_id=session, terminate=True)
        assert polling.done()
        ended = polling.result().result
        assert ended.metadata["running"] is False and ended.metadata["signal"] == 9, ended.text
        assert stopped.ok, stopped.result.text
        assert f"Exec session {session} was stopped" in stopped.result.text
    finally:
        await executor.aclose()
        tool.close()


async def test_a_call_cancelled_while_its_session_starts_leaves_nothing(workspace: Path) -> None:
    # The session starts in a thread (with the context's first sandbox: bubblewrap starts
    # first); a call cancelled meanwhile left it running, out of anyone's reach, holding
    # the first turn on it.
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    started = Started()
    registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
    executor = ToolExecutor(registry, listeners=[started])
    token = marker()
    finished = threading.Event()
    start = tool.sessions.start

    def starting(*args: Any, **kwargs: Any) -> Any:
        try:
            return start(*args, **kwargs)
        finally:
            finished.set()

    tool.sessions.start = starting  # type: ignore[method-assign]
    try:
        call = asyncio.create_task(
            one(executor, "start", "exec", command=f"sleep {token}", yield_time_ms=0)
        )
        await started.of("start").wait()
        call.cancel()
        await asyncio.wait([call])
        # Once the start's thread is done, its session is ended and forgotten.
        assert await asyncio.to_thread(finished.wait, 30)
        await until(lambda: tool.sessions.listing("default") == [], "the session stays")
        assert await gone(token), describe(running(token))
    finally:
        await executor.aclose()
        tool.close()


async def test_ending_a_context_session_forgets_its_numbering(workspace: Path) -> None:
    # An MCP server ends a context session of its own per request without a key (the 2026
    # protocol): each one's session numbering was kept for ever, one entry per request on
    # a long-lived server.
    from toolbridge.core.tool import reset_session, set_session

    tool = ExecTool(workspace, ExecConfig(sandbox="none", unsandboxed="allow"), environ=ENV)
    registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
    executor = ToolExecutor(registry)
    try:
        for n in range(3):
            token = set_session(f"request-{n}")
            try:
                await open_session(executor, "sleep 30")
            finally:
                reset_session(token)
            assert await tool.end_session(f"request-{n}")
        assert not any(key.startswith("request-") for key in tool.sessions._next_id)
    finally:
        await executor.aclose()
        tool.close()
