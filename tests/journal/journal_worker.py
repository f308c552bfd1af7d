"""A separate process that uses a journal, for the crash and sharing tests (run as a script).

journal_worker.py share DB EFFECTS N            claim calls 0..N-1; for each one it runs,
                                                append a line to EFFECTS, then finish it
journal_worker.py hang DB CALL_ID               claim the call, print "claimed", hang
"""

from __future__ import annotations

import asyncio
import os
import sys

from toolbridge.journal import CallKey, ClaimAction, open_journal


async def share(url: str, effects: str, count: int) -> None:
    journal = await open_journal(url)

    ran = replayed = 0
    for index in range(count):
        key = CallKey("shared", f"call-{index}", "h")
        claim = await journal.claim_when_free(key, "effect", {"index": index})
        if claim.action is ClaimAction.RUN:
            with open(effects, "a", encoding="utf-8") as file:  # noqa: ASYNC230 - the effect
                file.write(f"{index} {os.getpid()}\n")
            await journal.finish(key, {"text": f"done {index} by {os.getpid()}"})
            ran += 1
        else:
            assert claim.action is ClaimAction.REPLAY, claim
            assert claim.entry.outcome is not None
            replayed += 1
    await journal.close()
    print(ran, replayed)


async def hang(url: str, call_id: str) -> None:
    journal = await open_journal(url)

    claim = await journal.claim(CallKey("crash", call_id, "h"), "slow", {})
    print(claim.action, flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "share":
        asyncio.run(share(args[0], args[1], int(args[2])))
    elif command == "hang":
        asyncio.run(hang(args[0], args[1]))
    else:
        raise SystemExit(f"unknown command {command!r}")
