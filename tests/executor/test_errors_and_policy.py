"""Every failure is an outcome with a kind; loop guard, fail_on_tool_error and approval."""

from __future__ import annotations

import asyncio

import pytest

from toolbridge import (
    ErrorKind,
    NetworkViolation,
    PolicyViolation,
    ToolCallRequest,
    ToolExecutionError,
    ToolRegistry,
    WorkspaceViolation,
    tool,
)
from toolbridge.execution.approval import writes_need_approval
from toolbridge.execution.executor import ExecutionPolicy, OutcomeStatus, ToolExecutor


@pytest.fixture
def executor(registry: ToolRegistry) -> ToolExecutor:
    @tool(read_only=True)
    async def wait(seconds: int) -> str:
        return f"waited {seconds}"

    @tool
    def crash() -> str:
        secret = "token=hunter2"
        raise RuntimeError(f"disk on fire near {secret[:5]}")

    @tool
    def polite() -> str:
        raise ToolExecutionError("the queue is closed", hint="Try again tomorrow.")

    @tool
    def escape(path: str) -> str:
        raise WorkspaceViolation(f"{path} is outside the workspace", target=path)

    @tool
    def fetch(url: str) -> str:
        raise NetworkViolation(f"{url} is a private address", target=url)

    @tool
    def forbidden() -> str:
        raise PolicyViolation("deleting the repository is not allowed")

    for item in (wait, crash, polite, escape, fetch, forbidden):
        registry.register(item)
    return ToolExecutor(registry)


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "expected"),
    [
        ("wiat", {}, ErrorKind.UNKNOWN_TOOL, "Did you mean 'wait'?"),
        ("wait", '{"seconds": 1', ErrorKind.ARGUMENTS_NOT_JSON, "not valid JSON"),
        ("wait", "[1]", ErrorKind.ARGUMENTS_NOT_OBJECT, "must be a JSON object"),
        (
            "wait",
            {"seconds": "soon"},
            ErrorKind.INVALID_ARGUMENTS,
            '"soon" is not of type "integer"',
        ),
        ("crash", {}, ErrorKind.EXECUTION_ERROR, "RuntimeError: disk on fire"),
        ("polite", {}, ErrorKind.EXECUTION_ERROR, "Try again tomorrow."),
        ("escape", {"path": "../x"}, ErrorKind.WORKSPACE_VIOLATION, "hard boundary"),
        ("fetch", {"url": "http://10.0.0.1/"}, ErrorKind.NETWORK_VIOLATION, "hard boundary"),
        ("forbidden", {}, ErrorKind.POLICY_VIOLATION, "not a transient failure"),
    ],
)
async def test_each_failure_is_an_outcome_with_its_kind_and_advice(
    executor: ToolExecutor, name: str, arguments: object, kind: ErrorKind, expected: str
) -> None:
    [outcome] = await executor.run([ToolCallRequest("id1", name, arguments)])

    assert outcome.status is OutcomeStatus.ERROR
    assert outcome.kind is kind
    assert outcome.error is not None and outcome.result.error_kind is kind
    assert outcome.result.is_error
    assert outcome.result.text.startswith("Error")
    assert expected in outcome.result.text
    assert "Traceback" not in outcome.result.text


async def test_the_model_text_has_no_traceback_but_the_log_does(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="toolbridge")  # the traceback is logged at DEBUG
    [outcome] = await executor.run([ToolCallRequest("id1", "crash", {})])

    assert "Traceback" not in outcome.result.text
    assert "Traceback" in caplog.text and "disk on fire" in caplog.text


async def test_repairs_are_kept_on_the_outcome(executor: ToolExecutor) -> None:
    [outcome] = await executor.run([ToolCallRequest("id1", "wait", {"seconds": "5"})])

    assert outcome.ok and outcome.result.text == "waited 5"
    assert [(r.action, r.before, r.after) for r in outcome.repairs] == [("cast", "5", 5)]


async def test_loop_guard_warns_then_blocks_with_a_firmer_message_each_time(
    registry: ToolRegistry,
) -> None:
    runs: list[str] = []

    @tool
    def flaky(path: str) -> str:
        runs.append(path)
        raise ValueError(f"{path} not found")

    registry.register(flaky)
    executor = ToolExecutor(registry)
    same = ToolCallRequest("x", "flaky", {"path": "a.txt"})

    first = (await executor.run([same]))[0]
    second = (await executor.run([same]))[0]
    third = (await executor.run([same]))[0]
    fourth = (await executor.run([same]))[0]
    other = (await executor.run([ToolCallRequest("y", "flaky", '{"path": "b.txt"}')]))[0]

    assert "Warning" not in first.result.text
    assert "has now failed 2 times" in second.result.text
    assert third.kind is ErrorKind.REPEATED_CALL
    assert "already failed 2 times" in third.result.text
    assert "block number 2" in fourth.result.text
    assert runs == ["a.txt", "a.txt", "b.txt"]  # blocked calls never ran
    assert other.kind is ErrorKind.EXECUTION_ERROR


async def test_loop_guard_blocks_a_refused_target_whatever_tool_tries_it(
    registry: ToolRegistry,
) -> None:
    runs: list[str] = []
    metadata = "http://169.254.169.254/latest"

    @tool
    def fetch(url: str, attempt: int) -> str:
        runs.append(url)
        raise NetworkViolation("link-local address", target=metadata)

    @tool
    def browse(address: str) -> str:
        runs.append(address)
        return "page"

    registry.register(fetch)
    registry.register(browse)
    executor = ToolExecutor(registry)
    for attempt in range(2):
        await executor.run(
            [ToolCallRequest(f"f{attempt}", "fetch", {"url": metadata, "attempt": attempt})]
        )
    [blocked] = await executor.run([ToolCallRequest("b", "browse", {"address": metadata})])
    [allowed] = await executor.run(
        [ToolCallRequest("c", "browse", {"address": "https://a.example"})]
    )

    assert blocked.kind is ErrorKind.REPEATED_CALL
    assert "refused 2 times" in blocked.result.text
    assert allowed.ok
    assert runs == [metadata] * 2 + ["https://a.example"]


async def test_fail_on_tool_error_keeps_finished_work_and_skips_the_rest(
    registry: ToolRegistry,
) -> None:
    runs: list[str] = []

    @tool(read_only=True)
    async def read(name: str) -> str:
        await asyncio.sleep(0)
        runs.append(name)
        return f"read {name}"

    @tool(read_only=True)
    async def broken() -> str:
        raise OSError("device gone")

    @tool
    def write(name: str) -> str:
        runs.append(f"write {name}")
        return "written"

    for item in (read, broken, write):
        registry.register(item)
    executor = ToolExecutor(registry, ExecutionPolicy(fail_on_tool_error=True))
    outcomes = await executor.run(
        [
            ToolCallRequest("a", "read", {"name": "one"}),
            ToolCallRequest("b", "broken", {}),
            ToolCallRequest("c", "read", {"name": "two"}),
            ToolCallRequest("d", "write", {"name": "three"}),
        ]
    )

    assert [o.status for o in outcomes] == [
        OutcomeStatus.OK,
        OutcomeStatus.ERROR,
        OutcomeStatus.OK,
        OutcomeStatus.SKIPPED,
    ]
    assert [o.fatal for o in outcomes] == [False, True, False, False]
    assert sorted(runs) == ["one", "two"]  # the group that was running finished
    assert outcomes[3].kind is ErrorKind.CANCELLED


async def test_approval_is_bound_to_the_exact_arguments_and_used_once(
    registry: ToolRegistry,
) -> None:
    deleted: list[str] = []

    @tool
    def delete(path: str) -> str:
        deleted.append(path)
        return f"deleted {path}"

    delete.requires_approval = True  # type: ignore[attr-defined]
    registry.register(delete)
    executor = ToolExecutor(registry)
    call = ToolCallRequest("d1", "delete", {"path": "old.log"})

    [pending] = await executor.run([call])
    assert pending.status is OutcomeStatus.PENDING_APPROVAL
    assert pending.approval is not None and pending.approval.arguments == {"path": "old.log"}
    assert deleted == []

    executor.approve(pending)
    [changed] = await executor.run([ToolCallRequest("d1", "delete", {"path": "main.py"})])
    assert changed.status is OutcomeStatus.PENDING_APPROVAL  # other arguments, new approval
    [done] = await executor.run([ToolCallRequest("d2", "delete", '{"path": "old.log"}')])
    assert done.ok and deleted == ["old.log"]
    [again] = await executor.run([call])
    assert again.status is OutcomeStatus.PENDING_APPROVAL  # an approval is used once

    executor.deny(again, "keep the logs")
    [denied] = await executor.run([call])
    assert denied.kind is ErrorKind.APPROVAL_DENIED
    assert "keep the logs" in denied.result.text and "Do not repeat" in denied.result.text
    assert deleted == ["old.log"]


async def test_a_policy_rule_can_require_approval_for_every_write(registry: ToolRegistry) -> None:
    @tool(read_only=True)
    def look() -> str:
        return "seen"

    @tool
    def touch() -> str:
        return "touched"

    registry.register(look)
    registry.register(touch)
    executor = ToolExecutor(registry, ExecutionPolicy(approval=writes_need_approval))
    outcomes = await executor.run(
        [ToolCallRequest("a", "look", {}), ToolCallRequest("b", "touch", {})]
    )

    assert [o.status for o in outcomes] == [OutcomeStatus.OK, OutcomeStatus.PENDING_APPROVAL]
    with pytest.raises(ValueError, match="not waiting for approval"):
        executor.approve(outcomes[0])
