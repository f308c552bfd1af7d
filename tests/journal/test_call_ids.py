"""Call ids from a hostile model payload: an id that is a list or an object (unhashable)
is an error of its own call, the batch goes on, and the journal records the refusal."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry, tool
from toolbridge.core.errors import ErrorKind
from toolbridge.journal import CallState, open_journal


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("bad_id", [["x", 1], {"id": "x"}])
async def test_an_unhashable_call_id_is_refused_and_recorded_the_batch_goes_on(
    journal_target: str, tmp_path: Path, bad_id: Any
) -> None:
    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        before, bad, after = await executor.run([
            ToolCallRequest("a", "add", {"a": 1, "b": 2}),
            ToolCallRequest(bad_id, "add", {"a": 3, "b": 4}),
            ToolCallRequest("b", "add", {"a": 5, "b": 6}),
        ])  # fmt: skip
        assert before.ok and before.result.text == "3"
        assert after.ok and after.result.text == "11"
        assert bad.kind is ErrorKind.INVALID_ARGUMENTS
        assert "call id" in bad.result.text and "not text" in bad.result.text
        entries = await journal.entries(session="s")
    refused = [e for e in entries if e.state is CallState.REFUSED]
    assert len(refused) == 1
    assert refused[0].tool == "add" and refused[0].error_kind == ErrorKind.INVALID_ARGUMENTS
    assert refused[0].arguments == {"a": 3, "b": 4}
    assert json.loads(refused[0].key.call_id) == bad_id  # the id as JSON text
    finished = sorted(e.key.call_id for e in entries if e.state is CallState.FINISHED)
    assert finished == ["a", "b"]


async def test_an_unhashable_call_id_without_a_journal_is_an_error_of_that_call(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    executor = ToolExecutor(registry)
    bad, fine = await executor.run([
        ToolCallRequest([1], "add", {"a": 3, "b": 4}),  # type: ignore[arg-type]
        ToolCallRequest("b", "add", {"a": 5, "b": 6}),
    ])  # fmt: skip
    assert fine.ok and fine.result.text == "11"
    assert bad.kind is ErrorKind.INVALID_ARGUMENTS and "[1]" in bad.result.text


async def test_a_refusal_whose_call_id_or_tool_name_the_database_cannot_hold_is_recorded(
    journal_target: str, tmp_path: Path
) -> None:
    """A surrogate or NUL in a refused call's id or name is stored as U+FFFD: a refusal's
    record has a key of its own, so a changed id cannot make two calls share it."""
    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        (outcome,) = await executor.run([ToolCallRequest("c\x00\udcff", "no\x00such\udcff", {})])
        assert outcome.kind is ErrorKind.UNKNOWN_TOOL
        entries = await journal.entries(session="s")
    assert [(e.state, e.key.call_id, e.tool) for e in entries] == [
        (CallState.REFUSED, "c\ufffd\ufffd", "no\ufffdsuch\ufffd")
    ]


async def test_a_deeply_nested_or_huge_call_id_gives_a_short_error(
    journal_target: str, tmp_path: Path
) -> None:
    """The id from a hostile payload may be nested as deep as JSON allows, or huge: its
    error names it shortly, and the batch goes on."""
    deep: Any = "x"
    for _ in range(900):
        deep = [deep]
    huge = ["y" * 1000] * 10_000
    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        nested, big, fine = await executor.run([
            ToolCallRequest(deep, "add", {"a": 1, "b": 2}),
            ToolCallRequest(huge, "add", {"a": 1, "b": 2}),
            ToolCallRequest("c", "add", {"a": 5, "b": 6}),
        ])  # fmt: skip
        assert fine.ok and fine.result.text == "11"
        for outcome in (nested, big):
            assert outcome.kind is ErrorKind.INVALID_ARGUMENTS
            assert "invalid call id" in outcome.result.text
            assert len(outcome.result.text) < 500
        entries = await journal.entries(session="s")
    refused = [e.key.call_id for e in entries if e.state is CallState.REFUSED]
    assert len(refused) == 2  # recorded, shortened (an index holds a few kB)
    assert all(len(call_id) < 600 and "characters in all" in call_id for call_id in refused)


async def test_a_huge_text_call_id_fails_alone_not_its_batch(
    journal_target: str, tmp_path: Path
) -> None:
    """A text id too long for a key (PostgreSQL's index holds about 2.7 kB) is refused
    before the database sees it: the other claims of its batch go in."""
    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        huge, fine = await executor.run([
            ToolCallRequest(secrets.token_hex(10_000), "add", {"a": 1, "b": 2}),
            ToolCallRequest("c", "add", {"a": 5, "b": 6}),
        ])  # fmt: skip
        assert fine.ok and fine.result.text == "11"
        assert not huge.ok and "call id" in huge.result.text
        assert "characters" in huge.result.text and len(huge.result.text) < 1000


@tool
def echo(text: str) -> str:
    """Echo a text."""
    return text


@pytest.mark.parametrize(
    "bad_id",
    ["s\udcff", "n\x00ul", 7, None, ("t",)],
    ids=["surrogate", "nul", "int", "none", "tuple"],
)
async def test_a_valid_call_whose_id_the_journal_cannot_hold_is_refused_and_recorded(
    journal_target: str, tmp_path: Path, bad_id: Any
) -> None:
    """A known tool with valid arguments, under an id no database holds (a lone surrogate,
    a NUL on PostgreSQL, or a hashable value that is not text): the model is told to send
    it again with a valid id (not to wait for the journal), and the audit trail has it."""
    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        bad, fine = await executor.run([
            ToolCallRequest(bad_id, "add", {"a": 1, "b": 2}),
            ToolCallRequest("c", "add", {"a": 5, "b": 6}),
        ])  # fmt: skip
        assert fine.ok and fine.result.text == "11"
        entries = await journal.entries(session="s")
    stored = (
        "n\x00ul" if bad_id == "n\x00ul" and not journal_target.startswith("postgres") else None
    )
    if stored is not None:  # SQLite holds a NUL: the call ran as any other
        assert bad.ok and bad.result.text == "3"
        return
    assert bad.kind is ErrorKind.INVALID_ARGUMENTS
    assert "call id" in bad.result.text and "journal needs attention" not in bad.result.text
    refused = [e for e in entries if e.state is CallState.REFUSED]
    assert len(refused) == 1, entries
    assert refused[0].tool == "add" and refused[0].arguments == {"a": 1, "b": 2}
    assert refused[0].error_kind == ErrorKind.INVALID_ARGUMENTS
