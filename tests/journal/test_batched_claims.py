"""Claims and outcomes sent together in one batch of the writer, where the row count of
its one statement is not the number of calls: a key claimed twice, a call already stored
(finished, or running elsewhere), an outcome of a call not owned. Each answer must be the
one a claim alone would get. On SQLite and a real PostgreSQL server."""

from __future__ import annotations

import asyncio

import pytest

from toolbridge.journal import CallKey, CallState, ClaimAction, JournalError, open_journal


def key(name: str) -> CallKey:
    return CallKey("s", name, "d" * 64)


async def test_a_batch_of_claims_that_meets_stored_and_repeated_keys(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        done = await journal.claim(key("done"), "t", {"n": 0})
        assert done.action is ClaimAction.RUN
        await journal.finish(key("done"), {"text": "stored"})
        mine = await journal.claim(key("mine"), "t", {})
        assert mine.action is ClaimAction.RUN
        names = ["new1", "twice", "twice", "done", "mine", "new2"]
        claims = await asyncio.gather(*(journal.claim(key(n), "t", {"n": 1}) for n in names))
        actions = [claim.action for claim in claims]
        assert actions == [
            ClaimAction.RUN,  # new
            ClaimAction.RUN,  # the first claim of a key runs it...
            ClaimAction.BUSY,  # ...a repeat in the same batch waits for it
            ClaimAction.REPLAY,  # finished before
            ClaimAction.BUSY,  # this journal runs it now
            ClaimAction.RUN,
        ]
        assert claims[3].entry.outcome == {"text": "stored"}
        assert all(claims[i].entry.attempt == 1 for i in (0, 1, 5))
        # Outcomes of owned calls and of a call never claimed, in one batch.
        results = await asyncio.gather(
            journal.finish(key("new1"), {"text": "1"}),
            journal.finish(key("twice"), {"text": "2"}),
            journal.finish(key("never"), {"text": "x"}),
            journal.finish(key("new2"), {"text": "3"}),
            return_exceptions=True,
        )
        assert results[0] is None and results[1] is None and results[3] is None
        assert isinstance(results[2], JournalError) and "not owned" in str(results[2])
        for name, text in (("new1", "1"), ("twice", "2"), ("new2", "3")):
            entry = await journal.entry(key(name))
            assert entry is not None and entry.state is CallState.FINISHED
            assert entry.outcome == {"text": text}
        assert await journal.entry(key("never")) is None


@pytest.mark.parametrize(
    "names",
    [["new1", "done", "new2"], ["new1", "twice", "twice", "new2"], ["done"]],
    ids=["stored-call-between-new-ones", "a-key-twice", "only-a-stored-call"],
)
async def test_new_claims_beside_a_key_that_is_not_new(
    journal_target: str, names: list[str]
) -> None:
    # No call of the batch is held by this journal: only the stored rows (or an earlier
    # claim of the same batch) tell the new claims from the others.
    async with await open_journal(journal_target) as journal:
        assert (await journal.claim(key("done"), "t", {})).action is ClaimAction.RUN
        await journal.finish(key("done"), {"text": "stored"})
        claims = await asyncio.gather(*(journal.claim(key(n), "t", {"n": 1}) for n in names))
        expected = {"new1": ClaimAction.RUN, "new2": ClaimAction.RUN, "done": ClaimAction.REPLAY}
        actions = [claim.action for claim in claims]
        wanted = [expected.get(n, ClaimAction.RUN) for n in names]
        if "twice" in names:  # the first claim of a key runs it, the second finds it busy
            wanted[names.index("twice") + 1] = ClaimAction.BUSY
        assert actions == wanted
        for name in {n for n in names if n != "done"}:
            await journal.finish(key(name), {"text": name})
            entry = await journal.entry(key(name))
            assert entry is not None and entry.state is CallState.FINISHED
            assert entry.attempt == 1 and entry.outcome == {"text": name}


@pytest.mark.parametrize("queued", [False, True])
async def test_a_batch_of_new_claims_is_stored_as_claimed(
    journal_target: str, queued: bool
) -> None:
    async with await open_journal(journal_target) as journal:
        keys = [key(f"c{i}") for i in range(50)]
        claims = await asyncio.gather(
            *(journal.claim(k, "t", {"i": i}, queued=queued) for i, k in enumerate(keys))
        )
        assert {claim.action for claim in claims} == {ClaimAction.RUN}
        state = CallState.QUEUED if queued else CallState.RUNNING
        entries = await journal.entries(session="s")
        assert sorted(e.key.call_id for e in entries) == sorted(k.call_id for k in keys)
        assert {e.state for e in entries} == {state}
        assert all(e.arguments == {"i": int(e.key.call_id[1:])} for e in entries)


async def test_claims_starts_and_outcomes_of_one_batch_go_together(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        assert (await journal.claim(key("q"), "t", {}, queued=True)).action is ClaimAction.RUN
        assert (await journal.claim(key("r"), "t", {})).action is ClaimAction.RUN
        started, finished, claimed = await asyncio.gather(
            journal.start(key("q")),
            journal.finish(key("r"), {"text": "done"}),
            journal.claim(key("n"), "t", {"n": 1}, queued=True),
        )
        assert started is None and finished is None and claimed.action is ClaimAction.RUN
        states = {e.key.call_id: e.state for e in await journal.entries(session="s")}
        assert states == {"q": CallState.RUNNING, "r": CallState.FINISHED, "n": CallState.QUEUED}


async def test_a_failing_part_of_a_batch_fails_only_its_own_operations(postgres_url: str) -> None:
    """The batch's one statement fails (a trigger refuses one claim): its outcomes are
    still stored, each kind sent again on its own; only the claims get the error."""
    import psycopg

    async with await open_journal(postgres_url) as journal:
        assert (await journal.claim(key("r"), "t", {})).action is ClaimAction.RUN
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.call_id = 'boom' THEN RAISE EXCEPTION 'no boom here'; END IF; "
                "RETURN NEW; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse_boom BEFORE INSERT ON toolbridge_calls "
                "FOR EACH ROW EXECUTE FUNCTION refuse_boom()"
            )
        finished, boom, other = await asyncio.gather(
            journal.finish(key("r"), {"text": "kept"}),
            journal.claim(key("boom"), "t", {}),
            journal.claim(key("other"), "t", {}),
            return_exceptions=True,
        )
        assert finished is None
        assert isinstance(boom, JournalError) and "no boom here" in str(boom)
        assert isinstance(other, JournalError)  # one statement: the claims share it
        entry = await journal.entry(key("r"))
        assert entry is not None and entry.outcome == {"text": "kept"}
        assert await journal.entry(key("other")) is None
        again = await journal.claim(key("other"), "t", {})
        assert again.action is ClaimAction.RUN
