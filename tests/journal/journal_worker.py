"""A separate process that uses a journal, for the crash and sharing tests (run as a script).

journal_worker.py share DB EFFECTS N            claim calls 0..N-1; for each one it runs,
                                                append a line to EFFECTS, then finish it
journal_worker.py hang DB CALL_ID               claim the call, print "claimed", hang
journal_worker.py fork DB CALL_ID               claim the call, fork a child that lives on
                                                (as a tool's multiprocessing worker does), print
                                                the child's pid, hang
journal_worker.py orphans DB EFFECTS N          claim calls 0..N-1 of session "orphans" at
                                                once; take over each interrupted one (restart,
                                                effect, finish) or retry it (finished as
                                                interrupted); print how many it ran
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

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


async def fork(url: str, call_id: str) -> None:
    journal = await open_journal(url)

    await journal.claim(CallKey("crash", call_id, "h"), "slow", {})
    child = os.fork()
    if child == 0:  # no exec: it keeps every descriptor the parent had (but the test's pipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        time.sleep(3600)  # noqa: ASYNC251 - the forked child has no running loop
        os._exit(0)
    print(child, flush=True)
    await asyncio.sleep(3600)


async def orphans(url: str, effects: str, count: int) -> None:
    journal = await open_journal(url)

    async def one(index: int) -> int:
        key = CallKey("orphans", f"call-{index}", "h")
        claim = await journal.claim_when_free(key, "effect", {"index": index})
        if claim.action is ClaimAction.INTERRUPTED:
            await journal.restart(key)
        elif claim.action is ClaimAction.REPLAY and claim.entry.error_kind == "interrupted":
            if await journal.retry(key) is None:
                return 0  # the other process retried it first
        else:
            assert claim.action is ClaimAction.REPLAY, claim
            return 0
        with open(effects, "a", encoding="utf-8") as file:  # noqa: ASYNC230 - the effect
            file.write(f"{index} {os.getpid()}\n")
        await journal.finish(key, {"text": f"done {index}"})
        return 1

    ran = sum(await asyncio.gather(*(one(index) for index in range(count))))
    await journal.close()
    print(ran)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "share":
        asyncio.run(share(args[0], args[1], int(args[2])))
    elif command == "fork":
        asyncio.run(fork(args[0], args[1]))
    elif command == "orphans":
        asyncio.run(orphans(args[0], args[1], int(args[2])))
    elif command == "hang":
        asyncio.run(hang(args[0], args[1]))
    else:
        raise SystemExit(f"unknown command {command!r}")
