"""Outcomes sent one after the other in one turn of the loop (SQLite stores them as one
writer job, `sqlite_writer.Outcomes`) are answered and stored as the same outcomes sent
one at a time: each call's own answer, whoever owns it, whatever state it is in, a call
given two outcomes, and more outcomes than one job holds. Two journals (two owners) on
one real SQLite file or one real PostgreSQL database, both durabilities for SQLite."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolbridge.journal import CallJournal, CallKey, JournalError, open_journal
from toolbridge.journal.sqlite_writer import AT_ONCE

STATES = ["mine running", "mine queued", "theirs running", "finished", "absent"]


async def prepare(mine: CallJournal, other: CallJournal, key: CallKey, state: str) -> None:
    if state == "absent":
        return
    owner = mine if state.startswith("mine") else other
    await owner.claim(key, "t", {"x": 1}, queued=state.endswith("queued"))
    if state == "finished":
        await other.finish(key, {"text": "theirs"})


def seen(answer: Any) -> str:
    if isinstance(answer, JournalError):
        return "not owned" if "not owned" in str(answer) else f"error: {answer}"
    if isinstance(answer, BaseException):
        raise answer
    return repr(answer)


async def stored(journal: CallJournal, key: CallKey) -> str:
    entry = await journal.entry(key)
    return "none" if entry is None else f"{entry.state} {entry.outcome}"


@pytest.mark.parametrize("durability", ["process", "power"])
async def test_outcomes_in_a_row_answer_as_one_at_a_time(
    journal_target: str, durability: Any
) -> None:
    # Every state twice over, and the first call's outcome sent again at the end: its
    # second outcome is not the call's (the first one let it go).
    plan = [state for _ in range(2) for state in STATES]
    async with (
        await open_journal(journal_target, durability=durability) as mine,
        await open_journal(journal_target, durability=durability) as other,
    ):
        results: dict[str, list[tuple[str, str]]] = {}
        for way in ("alone", "in a row"):
            keys = [CallKey(way, f"{index}:{state}", "h") for index, state in enumerate(plan)]
            for key, state in zip(keys, plan, strict=True):
                await prepare(mine, other, key, state)
            sent = [*keys, keys[0]]
            outcomes = [{"text": f"outcome {place}"} for place in range(len(sent))]
            if way == "alone":
                answers = [
                    (await asyncio.gather(mine.finish(key, outcome), return_exceptions=True))[0]
                    for key, outcome in zip(sent, outcomes, strict=True)
                ]
            else:
                answers = await asyncio.gather(
                    *(mine.finish(key, outcome) for key, outcome in zip(sent, outcomes,
                                                                       strict=True)),
                    return_exceptions=True,
                )  # fmt: skip
            results[way] = [
                (seen(answer), await stored(other, key))
                for key, answer in zip(sent, answers, strict=True)
            ]
        assert results["alone"] == results["in a row"]
        # What the rows say, spelled out for the first round of states.
        first = results["in a row"][: len(STATES)]
        assert [answer for answer, _ in first] == ["None", "None", *["not owned"] * 3]
        assert first[0][1] == "finished {'text': 'outcome 0'}"
        assert first[2][1] == "running None"  # the other journal's call is left as it was
        assert results["in a row"][-1] == ("not owned", "finished {'text': 'outcome 0'}")


async def test_more_outcomes_in_a_row_than_one_job_holds(journal_target: str) -> None:
    # All of them this journal's, and the first call's outcome sent again at the end.
    count = AT_ONCE * 2 + 5
    keys = [CallKey("many", f"call {index}", "h") for index in range(count)]
    async with await open_journal(journal_target) as journal:
        for key in keys:
            await journal.claim(key, "t", {})
        answers = await asyncio.gather(
            *(journal.finish(key, {"text": key.call_id}) for key in keys),
            journal.finish(keys[0], {"text": "again"}),
            return_exceptions=True,
        )
        assert [seen(answer) for answer in answers] == ["None"] * count + ["not owned"]
        entries = await journal.entries(session="many")
        assert sorted(entry.outcome["text"] for entry in entries if entry.outcome) == sorted(
            key.call_id for key in keys
        )


async def test_a_second_outcome_in_the_same_row_is_not_the_calls(journal_target: str) -> None:
    first, second = CallKey("twice", "first", "h"), CallKey("twice", "second", "h")
    async with await open_journal(journal_target) as journal:
        for key in (first, second):
            await journal.claim(key, "t", {})
        answers = await asyncio.gather(
            journal.finish(first, {"text": "one"}),
            journal.finish(second, {"text": "two"}),
            journal.finish(first, {"text": "again"}),
            return_exceptions=True,
        )
        assert [seen(answer) for answer in answers] == ["None", "None", "not owned"]
        assert await stored(journal, first) == "finished {'text': 'one'}"
