"""Hooks steer calls by what they return (issue 9 §4), and results point somewhere real (§2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import (
    PAGE_METADATA_KEY,
    SAVED_METADATA_KEY,
    ErrorKind,
    ExecutorHook,
    OutcomeStatus,
    PreparedCall,
    Tool,
    ToolCallRequest,
    ToolDefinitionError,
    ToolError,
    ToolExecutor,
    ToolOutcome,
    ToolRegistry,
    ToolResult,
    tool,
)
from toolbridge.execution.executor import ExecutionPolicy
from toolbridge.execution.result_store import ResultStore, private_results_root


@pytest.fixture
def counted(registry: ToolRegistry) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = []

    @tool
    def move(src: str, n: int = 1) -> str:
        runs.append({"src": src, "n": n})
        return f"moved {src} x{n}"

    @tool
    def other() -> str:
        return "other"

    registry.register(move)
    registry.register(other)
    return runs


class Steer(ExecutorHook):
    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def before_call(
        self, call: ToolCallRequest, prepared: PreparedCall
    ) -> ToolResult | ToolError | PreparedCall | None:
        args = prepared.arguments or {}
        if args.get("src") == "cached":
            return ToolResult("from the cache")
        if args.get("src") == "secret":
            return ToolError(ErrorKind.POLICY_VIOLATION, "secret files are off limits")
        if args.get("src") == "rewrite":
            return self.registry.prepare_call("move", {"src": "rewritten", "n": "3"})
        if args.get("src") == "invalid":
            return self.registry.prepare_call("move", {"src": "x", "n": "many"})
        if args.get("src") == "elsewhere":
            return self.registry.prepare_call("other", {})
        return None

    async def after_call(self, outcome: ToolOutcome) -> ToolResult | None:
        if "x9" in outcome.result.text:
            kind = ErrorKind.POLICY_VIOLATION
            return ToolResult("Error: redacted", is_error=True, error_kind=kind)
        return None


async def test_before_call_answers_refuses_or_rewrites_by_its_return_value(
    registry: ToolRegistry, counted: list[dict[str, object]]
) -> None:
    executor = ToolExecutor(registry, hooks=[Steer(registry)])
    sources = ["cached", "secret", "rewrite", "invalid", "elsewhere", "plain"]
    outcomes = await executor.run([ToolCallRequest(s, "move", {"src": s}) for s in sources])
    by_id = {o.call.id: o for o in outcomes}
    assert by_id["cached"].ok and by_id["cached"].result.text == "from the cache"
    assert by_id["secret"].kind is ErrorKind.POLICY_VIOLATION
    assert "secret files are off limits" in by_id["secret"].result.text
    assert by_id["rewrite"].result.text == "moved rewritten x3"  # cast and validated
    assert by_id["invalid"].kind is ErrorKind.INVALID_ARGUMENTS
    assert by_id["elsewhere"].kind is ErrorKind.POLICY_VIOLATION  # never another tool
    assert by_id["plain"].result.text == "moved plain x1"
    assert counted == [{"src": "rewritten", "n": 3}, {"src": "plain", "n": 1}]


async def test_after_call_replaces_the_result_and_the_status_follows(
    registry: ToolRegistry, counted: list[dict[str, object]]
) -> None:
    errors: list[str] = []

    class Watch(ExecutorHook):
        async def on_error(self, outcome: ToolOutcome) -> None:
            errors.append(outcome.result.text)

    executor = ToolExecutor(
        registry, ExecutionPolicy(fail_on_tool_error=True), hooks=[Steer(registry), Watch()]
    )
    outcomes = await executor.run([ToolCallRequest("1", "move", {"src": "a", "n": 9})])
    [outcome] = outcomes
    assert outcome.status is OutcomeStatus.ERROR and outcome.kind is ErrorKind.POLICY_VIOLATION
    assert outcome.result.text == "Error: redacted"
    assert outcomes.fatal is outcome and errors == ["Error: redacted"]


async def test_a_rewritten_call_needs_its_own_approval(registry: ToolRegistry) -> None:
    @tool(requires_approval=True)
    def rm(path: str) -> str:
        return f"removed {path}"

    registry.register(rm)

    class Retarget(ExecutorHook):
        async def before_call(
            self, call: ToolCallRequest, prepared: PreparedCall
        ) -> PreparedCall | None:
            return registry.prepare_call("rm", {"path": "other"})

    executor = ToolExecutor(registry, hooks=[Retarget()])
    [pending] = await executor.run([ToolCallRequest("1", "rm", {"path": "a"})])
    executor.approve(pending)
    [again] = await executor.run([pending.call])
    assert again.status is OutcomeStatus.PENDING_APPROVAL
    assert again.approval is not None and again.approval.arguments == {"path": "other"}


# --- where long results go, and the pager they name ------------------------------------


@tool(read_only=True)
def dump() -> str:
    return "".join(f"ligne {i:05d} é\n" for i in range(3_000))


async def test_nothing_is_written_into_the_current_directory_without_a_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    registry = ToolRegistry([dump])  # no context, no workspace given
    executor = ToolExecutor(registry, ExecutionPolicy(max_result_chars=1_000))
    [outcome] = await executor.run([ToolCallRequest("c1", "dump", {})])
    saved = outcome.result.metadata[SAVED_METADATA_KEY]
    assert list(cwd.iterdir()) == []
    assert Path(saved["path"]).is_relative_to(private_results_root())
    mode = os.stat(private_results_root().parent).st_mode & 0o777
    assert mode == 0o700
    assert saved["size"] == len(dump.fn())  # characters, as the notice says
    assert f"Output too long: {len(dump.fn()):,} characters" in outcome.result.text

    [page] = await executor.run(
        [ToolCallRequest("p", "read_tool_result", {"call_id": "c1", "limit": 100})]
    )
    meta = page.result.metadata[PAGE_METADATA_KEY]
    assert page.ok and meta["next_offset"] == 100 and meta["size"] == saved["size"]
    assert page.result.text.startswith(f"[characters 0-100 of {saved['size']:,}]")


async def test_results_dir_inside_the_workspace(registry: ToolRegistry, workspace: Path) -> None:
    registry.register(dump)
    policy = ExecutionPolicy(max_result_chars=1_000, results_dir=".toolbridge/results")
    [outcome] = await ToolExecutor(registry, policy).run([ToolCallRequest("c", "dump", {})])
    path = Path(outcome.result.metadata[SAVED_METADATA_KEY]["path"])
    assert path.parent == workspace / ".toolbridge" / "results" / "test-session"
    store = ResultStore.in_workspace(workspace, "test-session")
    assert store.read("c", 0, 12).text == "ligne 00000 "


async def test_the_pager_named_in_a_notice_is_always_callable_or_refused(
    registry: ToolRegistry,
) -> None:
    registry.register(dump)
    assert "read_tool_result" not in registry
    ToolExecutor(registry, ExecutionPolicy(persist_results=False))
    assert "read_tool_result" not in registry  # nothing saved: nothing to page
    ToolExecutor(registry)
    ToolExecutor(registry)  # a second executor adds its store to the same pager
    assert "read_tool_result" in registry

    class Impostor(Tool):
        name = "read_tool_result"

        async def execute(self, **kwargs: object) -> str:
            return "something else"

    clash = ToolRegistry([Impostor()])
    with pytest.raises(ToolDefinitionError, match="rename that tool"):
        ToolExecutor(clash)
