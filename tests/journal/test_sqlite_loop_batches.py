"""SQLite's batches run on the event loop when the database is free, and go to the writer
thread when another process holds the write lock: a claim then waits, it does not fail."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from toolbridge.journal import CallKey, ClaimAction, SQLiteJournal


async def test_a_claim_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    db = tmp_path / "journal.sqlite3"
    async with SQLiteJournal(db) as journal:
        other = sqlite3.connect(db, isolation_level=None)  # another writer of the file
        other.execute("BEGIN IMMEDIATE")
        claim = asyncio.ensure_future(journal.claim(CallKey("s", "c1", "h"), "t", {}))
        await asyncio.sleep(0.05)  # its first try finds the write lock taken
        assert not claim.done()  # waiting for the lock (on the writer thread), not failed
        other.execute("COMMIT")
        other.close()
        assert (await asyncio.wait_for(claim, 30)).action is ClaimAction.RUN
        again = await journal.claim(CallKey("s", "c2", "h"), "t", {})  # the loop's turn again
        assert again.action is ClaimAction.RUN


def test_two_event_loops_share_one_journal(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "journal.sqlite3")
    errors: list[BaseException] = []

    def run(name: str) -> None:
        async def calls() -> None:
            for n in range(50):
                key = CallKey(name, f"c{n}", "h")
                assert (await journal.claim(key, "t", {})).action is ClaimAction.RUN
                await journal.finish(key, {"text": f"{name} {n}"})

        try:
            asyncio.run(calls())
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"loop{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []

    async def check() -> None:
        counts = await journal.counts()
        await journal.close()
        assert counts == {"loop0": 50, "loop1": 50, "loop2": 50}

    asyncio.run(check())
