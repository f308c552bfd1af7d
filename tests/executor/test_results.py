"""Results back to the model: conversion, the cap, persistence, pruning, and the pager."""

from __future__ import annotations

import dataclasses
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest

from toolbridge import ImageBlock, ToolCallRequest, ToolContext, ToolRegistry, tool
from toolbridge.core.results import EMPTY_RESULT
from toolbridge.core.tool import ToolResult
from toolbridge.execution.executor import ExecutionPolicy, ToolExecutor
from toolbridge.execution.result_store import (
    PAGE_METADATA_KEY,
    SAVED_METADATA_KEY,
    ResultStore,
    cap_result,
    safe_file_name,
)
from toolbridge.formats.openai_chat import tool_result_messages
from toolbridge.tools.tool_results import ReadToolResult

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


class Point(pydantic.BaseModel):
    x: int
    label: str


@dataclasses.dataclass
class Size:
    width: int
    height: int


def _returning(value: object) -> Callable[[], object]:
    def give() -> object:
        return value

    return give


async def test_values_become_content_json_never_a_python_repr(registry: ToolRegistry) -> None:
    values = {
        "text": "plain",
        "mapping": {"a": [1, 2], "é": None},
        "model": Point(x=1, label="p"),
        "record": Size(2, 3),
        "image": PNG,
        "nothing": None,
        "blank": "   ",
    }
    for name, value in values.items():
        registry.register(tool(name=name)(_returning(value)))
    outcomes = await ToolExecutor(registry).run([ToolCallRequest(n, n, {}) for n in values])
    texts = {o.call.id: o.result.content for o in outcomes}

    assert texts["text"] == "plain"
    assert texts["mapping"] == '{"a": [1, 2], "é": null}'
    assert texts["model"] == '{"x": 1, "label": "p"}'
    assert texts["record"] == '{"width": 2, "height": 3}'
    assert texts["image"] == [ImageBlock(PNG, "image/png")]
    assert texts["nothing"] == EMPTY_RESULT and texts["blank"] == EMPTY_RESULT
    assert outcomes[2].value == Point(x=1, label="p")


async def test_a_long_result_is_previewed_and_persisted_for_the_pager(
    registry: ToolRegistry, workspace: Path
) -> None:
    body = "".join(f"line {i:05d}\n" for i in range(10_000))

    @tool(read_only=True)
    def dump() -> str:
        return body

    registry.register(dump)
    policy = ExecutionPolicy(max_result_chars=5_000, preview_chars=900)
    executor = ToolExecutor(registry, policy)
    assert isinstance(registry.get("read_tool_result"), ReadToolResult)  # registered for us
    [outcome] = await executor.run([ToolCallRequest("call/../1", "dump", {})])

    text = outcome.result.text
    assert len(text) < 5_000
    assert "line 00000" in text and "line 09999" in text and "line 05000" not in text
    assert 'read_tool_result(call_id="call/../1"' in text
    saved = Path(outcome.result.metadata[SAVED_METADATA_KEY]["path"])
    assert saved.parent == ResultStore.for_workspace(workspace, "test-session").directory
    assert not (workspace / ".toolbridge").exists()  # nothing written into the workspace
    assert saved.stat().st_size == len(body)  # noqa: ASYNC240 - a test's own check
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no temp files left

    pages: list[str] = []
    offset = 0
    while True:
        [page] = await executor.run(
            [
                ToolCallRequest(
                    f"r{offset}",
                    "read_tool_result",
                    {"call_id": "call/../1", "offset": offset, "limit": 30_000},
                )
            ]
        )
        header, _, rest = page.result.text.partition("\n")
        chunk, _, footer = rest.rpartition("\n")
        pages.append(chunk)
        meta = page.result.metadata[PAGE_METADATA_KEY]
        assert header == f"[characters {offset:,}-{meta['next_offset']:,} of {len(body):,}]"
        if meta["at_end"]:
            assert footer == "[end of the saved result]"
            break
        offset = meta["next_offset"]
    assert "".join(pages) == body
    assert len(pages) == 4


def test_pages_count_characters_and_never_split_one(workspace: Path) -> None:
    store = ResultStore.in_workspace(workspace, "s")
    text = "aé€😀" * 100_000  # multi-byte characters across the reader's blocks
    store.save("c1", text)
    pieces = []
    offset = 0
    while True:
        page = store.read("c1", offset, 70_001)
        assert page.size == len(text)
        pieces.append(page.text)
        offset = page.next_offset
        if page.at_end:
            break
    assert "".join(pieces) == text
    assert store.read("c1", 1, 4).text == "é€😀a"  # offsets and limits are characters
    assert store.read("c1", 399_998, 10).text == "€😀"
    assert store.read("c1", 10**9, 10).text == ""


def test_a_50_mb_result_is_saved_and_paged_without_loading_it_all_twice(
    workspace: Path,
) -> None:
    text = "0123456789abcdef" * (50 * 1024 * 1024 // 16)
    store = ResultStore.in_workspace(workspace, "big")
    result = ToolResult(text)

    tracemalloc.start()
    try:
        capped = cap_result(result, call_id="huge", max_chars=30_000, store=store)
        _, save_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        page = store.read("huge", 40 * 1024 * 1024, 20_000)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert store.path_for("huge").stat().st_size == len(text)
    assert len(capped.text) < 30_000
    assert save_peak < 8 * 1024 * 1024  # chunks, never a second 50 MB copy
    assert read_peak < 1024 * 1024  # one page, not the file
    assert page.text == text[40 * 1024 * 1024 : 40 * 1024 * 1024 + 20_000]


def test_old_results_are_pruned_by_age_and_by_count(workspace: Path) -> None:
    store = ResultStore.in_workspace(workspace, "s", max_age=3600, max_count=3)
    old = store.save("old", "x")
    past = time.time() - 7200
    os.utime(old, (past, past))
    assert store.prune() == 1 and not old.exists()

    paths = []
    for i in range(5):
        path = store.save(f"c{i}", "x")
        stamp = time.time() - 100 + i
        os.utime(path, (stamp, stamp))
        paths.append(path)
    store.prune()
    assert [p.exists() for p in paths] == [False, False, True, True, True]


def test_unsafe_ids_stay_inside_the_results_folder(workspace: Path) -> None:
    store = ResultStore.in_workspace(workspace, "../../etc")
    path = store.save("../../passwd", "x")
    assert path.resolve().is_relative_to((workspace / ".toolbridge" / "results").resolve())
    assert safe_file_name("call_1-ok") == "call_1-ok"
    assert "/" not in safe_file_name("a/b") and safe_file_name("a/b") != safe_file_name("a_b")


def test_a_results_folder_symlinked_out_of_the_workspace_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / ".toolbridge").mkdir()
    (workspace / ".toolbridge" / "results").symlink_to(outside, target_is_directory=True)
    store = ResultStore.in_workspace(workspace, "s")
    from toolbridge import WorkspaceViolation

    with pytest.raises(WorkspaceViolation):
        store.save("c1", "x")
    assert list(outside.iterdir()) == []


async def test_read_tool_result_reports_a_missing_result_clearly(
    registry: ToolRegistry,
) -> None:
    registry.register(ReadToolResult())
    [outcome] = await ToolExecutor(registry).run(
        [ToolCallRequest("r", "read_tool_result", {"call_id": "nope"})]
    )
    assert outcome.result.text.startswith("Error: no saved result for call id 'nope'")


async def test_a_read_only_workspace_still_gets_a_preview(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")

    @tool
    def dump() -> str:
        return "y" * 1000

    registry = ToolRegistry([dump], context=ToolContext(workspace=blocker))
    policy = ExecutionPolicy(max_result_chars=100, preview_chars=50, results_dir="results")
    [outcome] = await ToolExecutor(registry, policy).run([ToolCallRequest("c", "dump", {})])
    assert outcome.ok and "Output too long" in outcome.result.text
    assert SAVED_METADATA_KEY not in outcome.result.metadata
    assert "read_tool_result" not in outcome.result.text  # nothing saved: no pager named


async def test_tool_result_messages_answer_every_call_in_order(registry: ToolRegistry) -> None:
    @tool
    def hello(name: str) -> str:
        return f"hi {name}"

    registry.register(hello)
    outcomes = await ToolExecutor(registry).run(
        [ToolCallRequest("1", "hello", {"name": "a"}), ToolCallRequest("2", "nope", {})]
    )
    messages = tool_result_messages(outcomes)
    assert messages[0] == {"role": "tool", "tool_call_id": "1", "name": "hello", "content": "hi a"}
    assert messages[1]["tool_call_id"] == "2" and messages[1]["content"].startswith("Error")
