"""The loop guard on a hard boundary: it names the refused path or host and says to stop and
tell the user, instead of inviting another spelling of the same path."""

from __future__ import annotations

from pathlib import Path

from toolbridge import (
    ErrorKind,
    NetworkViolation,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import ListDirTool, ReadFileTool


async def test_a_path_refused_twice_is_named_and_the_model_told_to_ask_the_user(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    guard = Workspace(workspace)
    registry = ToolRegistry(
        [ReadFileTool(guard), ListDirTool(guard)], context=ToolContext(workspace=workspace)
    )
    executor = ToolExecutor(registry)
    path = "../secret.txt"
    first, second = [
        (await executor.run([ToolCallRequest(f"r{n}", "read_file", {"path": path})]))[0]
        for n in range(2)
    ]
    assert first.kind is ErrorKind.WORKSPACE_VIOLATION and "Warning" not in first.result.text
    assert "Warning: '../secret.txt' has been refused 2 times." in second.result.text
    assert "The path '../secret.txt' is outside the workspace" in second.result.text
    assert "tell the user" in second.result.text

    [again] = await executor.run([ToolCallRequest("r3", "read_file", {"path": path})])
    [other_tool] = await executor.run([ToolCallRequest("l1", "list_dir", {"path": path})])
    for blocked in (again, other_tool):
        assert blocked.kind is ErrorKind.REPEATED_CALL
        text = blocked.result.text
        assert "'../secret.txt'" in text
        assert "Stop trying, and tell the user that you need '../secret.txt'" in text
        assert "Change the arguments" not in text
    [third] = await executor.run([ToolCallRequest("l2", "list_dir", {"path": path})])
    assert third.result.text.count("This is block number 2 for the same thing.") == 1
    assert "tell the user that you need '../secret.txt'" in third.result.text


async def test_a_refused_host_is_named_with_the_network_policy(tmp_path: Path) -> None:
    host = "http://169.254.169.254/latest"

    @tool
    def fetch(url: str) -> str:
        raise NetworkViolation("a link-local address", target=url)

    registry = ToolRegistry([fetch], context=ToolContext(workspace=tmp_path))
    executor = ToolExecutor(registry)
    for n in range(2):
        await executor.run([ToolCallRequest(f"f{n}", "fetch", {"url": host})])
    [blocked] = await executor.run([ToolCallRequest("f3", "fetch", {"url": host})])
    assert blocked.kind is ErrorKind.REPEATED_CALL
    assert f"The address {host!r} is outside what the network policy allows" in blocked.result.text
    assert "tell the user" in blocked.result.text


async def test_ordinary_failures_keep_the_generic_hint(tmp_path: Path) -> None:
    @tool
    def flaky(name: str) -> str:
        raise ValueError(f"{name} is broken")

    executor = ToolExecutor(ToolRegistry([flaky], context=ToolContext(workspace=tmp_path)))
    call = ToolCallRequest("x", "flaky", {"name": "a"})
    for _ in range(2):
        await executor.run([call])
    [blocked] = await executor.run([call])
    assert blocked.kind is ErrorKind.REPEATED_CALL
    assert "Change the arguments or use another approach." in blocked.result.text
    assert "tell the user that you need" not in blocked.result.text
