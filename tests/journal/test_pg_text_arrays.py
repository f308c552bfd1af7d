"""The PostgreSQL journal's ``text[]`` parameters (`postgres_sql.text_array`): built in a
few passes over the whole array rather than element by element by psycopg, they must be
the very bytes psycopg's binary list dumper makes, and read back by the server as the
same texts (non-ASCII, long, empty, NULL), and a statement whose texts cannot be sent
fails as one (the writer answers it), never the writer.
"""

from __future__ import annotations

import pytest
from psycopg.adapt import PyFormat, Transformer

from toolbridge.journal.postgres import PostgresJournal
from toolbridge.journal.postgres_sql import TextArray, text_array
from toolbridge.journal.records import CallKey, ClaimAction, ClaimRequest, JournalError

CASES: list[list[str | None]] = [
    ["a", "bc", ""],
    ['{"n": 1}', '{"text": "say \\"hi\\"\\\\"}', "tab\there, new\nline, comma, {brace}"],
    ["é", "日本語", "mixed ascii and ü", "\u2028"],
    ["x" * 127, "y" * 128, "z" * 255, "w" * 256, "v" * 4095, "u" * 4096, "t" * 70_000],
    ["long é" * 5000, "short"],
    ["one"],
    [None, "a", None],
    [None, None, None],
    [None],
    ["a", None],
]


@pytest.mark.parametrize("items", [case for case in CASES if None not in case])
def test_the_bytes_are_psycopgs(items: list[str]) -> None:
    transformer = Transformer()
    (dumped,) = transformer.dump_sequence([items], [PyFormat.BINARY])
    assert dumped is not None
    assert text_array(items) == bytes(dumped)


def test_what_cannot_be_sent_is_an_error_to_answer_not_a_crash() -> None:
    with pytest.raises(ValueError):
        text_array(["ok", "lone \udc80 surrogate"])
    with pytest.raises(TypeError):
        text_array(["ok", 3])  # type: ignore[list-item]


async def test_the_server_reads_the_same_texts(pg_journal: PostgresJournal) -> None:
    for items in [*CASES, []]:
        array = text_array(items)
        assert isinstance(array, TextArray)
        cursor = await pg_journal._conn.execute(
            "SELECT %(a)b::text[], cardinality(%(a)b::text[])", {"a": array}
        )
        row = await cursor.fetchone()
        assert row is not None
        assert row[0] == items
        assert row[1] == len(items)


async def test_a_batch_of_texts_of_every_kind_is_stored_and_read_back(
    pg_journal: PostgresJournal,
) -> None:
    keys = [CallKey("sé", f"call-{i}-ü", "h" * 64) for i in range(3)]
    arguments = [{"text": "日本語"}, {"text": "x" * 5000}, {"quote": '"\\', "none": None}]
    claims = await pg_journal.claim_many(
        [ClaimRequest(key, "tool-é", value) for key, value in zip(keys, arguments, strict=True)]
    )
    assert [claim.action for claim in claims if not isinstance(claim, JournalError)] == [
        ClaimAction.RUN
    ] * 3
    outcomes = [{"text": "done é"}, {"text": "y" * 9000}, {"text": ""}]
    for key, outcome, kind in zip(keys, outcomes, ["é-kind", None, "plain"], strict=True):
        pg_journal.finish_soon(key, outcome, error_kind=kind)
    for key, value, outcome in zip(keys, arguments, outcomes, strict=True):
        entry = await pg_journal.entry(key)
        assert entry is not None
        assert (entry.tool, entry.arguments, entry.outcome) == ("tool-é", value, outcome)


async def test_an_error_kind_that_cannot_be_sent_fails_its_outcome_only(
    pg_journal: PostgresJournal,
) -> None:
    bad, good = CallKey("s", "bad", "h"), CallKey("s", "good", "h")
    for key in (bad, good):
        assert (await pg_journal.claim(key, "t", {})).action is ClaimAction.RUN
    failed = pg_journal.finish_soon(bad, {"text": "x"}, error_kind="lone \udc80")
    with pytest.raises(JournalError):
        await failed
    await pg_journal.finish(good, {"text": "ok"})  # the writer still answers
    entry = await pg_journal.entry(good)
    assert entry is not None
    assert entry.outcome == {"text": "ok"}
