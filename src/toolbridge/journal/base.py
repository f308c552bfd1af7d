"""`CallJournal`: the durable record of calls and runs, whatever database holds it.

Every backend gives the same guarantees: a claim is atomic (one process owns a call at a
time, and the database says whether it ran), an outcome is durable when `finish`
returns, and ownership dies with its process (an operating-system or server lock, never
a timer), so a call found running without an owner is known to be interrupted.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from toolbridge.journal.records import (
    CallKey,
    Claim,
    ClaimAction,
    ClaimRequest,
    JournalEntry,
    JournalError,
)

__all__ = ["CallJournal", "Durability", "check_limit", "check_prune", "deliver", "dropped_sessions"]

logger = logging.getLogger(__name__)

Durability = Literal["process", "power"]
"""``process``: a finished outcome survives a crash of the process (the default);
``power``: it also survives a power loss or a kernel crash (an fsync per commit)."""

BUSY_POLL_START = 0.01
BUSY_POLL_MAX = 0.25


def check_limit(limit: int | None) -> None:
    """Refuse a negative `limit` to `CallJournal.entries` (None means no limit)."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more (None for no limit), not {limit}")


def check_prune(older_than: float | None, keep_sessions: int | None) -> None:
    """Refuse a negative amount to `CallJournal.prune`: it would delete what it was asked
    to keep (every finished call, or the oldest sessions)."""
    if older_than is not None and not older_than >= 0:
        raise ValueError(f"older_than must be 0 or more seconds, not {older_than}")
    if keep_sessions is not None and keep_sessions < 0:
        raise ValueError(f"keep_sessions must be 0 or more, not {keep_sessions}")


class CallJournal(abc.ABC):
    """The operations the executor and the agent loop need; backends implement them."""

    close_limit: float | None = None
    """Seconds a stop waits for the journal's server: `close`, and the writes a stopped
    run waits for, all of one stop in one bound (`CallRecorder.while_stopping`); None: no
    bound, for a journal with no server that can hang (SQLite)."""

    @abc.abstractmethod
    async def claim(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> Claim:
        """Ask to run the call `key`: see `ClaimAction` for the four answers.

        `queued`: the call may wait (for a concurrency slot) before its tool starts; it is
        stored as queued, and `start` marks it running when the tool starts. A queued call
        of a process that died never ran: the next claim runs it, as the same attempt.
        """

    async def claim_many(self, calls: Sequence[ClaimRequest]) -> list[Claim | JournalError]:
        """`claim` each of `calls` at once: the answers in their order, a call's
        `JournalError` (a value that cannot be stored, the journal failing) as its answer.
        The executor claims a batch's calls that run together this way, before their tasks
        start. Both backends claim them in one request; this default claims them
        concurrently, one `claim` each."""
        return list(await asyncio.gather(*(self._claim_or_error(call) for call in calls)))

    async def _claim_or_error(self, call: ClaimRequest) -> Claim | JournalError:
        try:
            return await self.claim(*call[:3], approval=call.approval, queued=call.queued)
        except JournalError as exc:
            return exc
        except Exception as exc:  # a bug met on one call is that call's answer: the
            # others' claims go on (nobody would hear them if this one ended the gather)
            logger.exception("the journal's claim failed on call %r", call.key.call_id)
            return JournalError(f"the journal failed: {exc!r}")

    async def claim_when_free(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
        arguments_text: str | None = None,
    ) -> Claim:
        """`claim`, waiting while another live process runs the call (then replaying it);
        `arguments_text` as in `ClaimRequest`.

        Bound the wait with ``asyncio.timeout`` if the other process may hang.
        """
        asked = ClaimRequest(key, tool, arguments, approval, queued, arguments_text)
        delay = BUSY_POLL_START
        while True:
            [claim] = await self.claim_many([asked])
            if isinstance(claim, JournalError):
                raise claim
            if claim.action is not ClaimAction.BUSY:
                return claim
            await asyncio.sleep(delay)
            delay = min(delay * 2, BUSY_POLL_MAX)

    @abc.abstractmethod
    async def start(self, key: CallKey) -> None:
        """Mark an owned, queued call running: its tool starts now (durable when this
        returns, so a crash from here on finds it interrupted). A running call stays so."""

    @abc.abstractmethod
    async def restart(self, key: CallKey, *, queued: bool = False) -> JournalEntry:
        """Run an owned, interrupted call again: its attempt count goes up by one (queued
        until `start` when `queued`)."""

    @abc.abstractmethod
    async def retry(
        self,
        key: CallKey,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> JournalEntry | None:
        """Reopen a call finished as ``interrupted`` because the user approved a retry: it is
        running (or `queued`) again, owned by this process, with its attempt count up by
        one and `approval` stored. None when it is not an interrupted call (any more) or
        another process owns it: claim it again to learn what became of it."""

    @abc.abstractmethod
    async def refuse(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        outcome: Mapping[str, Any],
        *,
        error_kind: str | None,
    ) -> None:
        """Record a call refused before it ran, with its error, as a record of its own
        (`key` from `records.refused_key`): it is never claimed and never answers a call."""

    @abc.abstractmethod
    async def finish(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> None:
        """Store the outcome of an owned call; durable (see `Durability`) when this returns."""

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        """`finish`, started now: a future done once the outcome is durable (or failed with
        the `JournalError` that says why it is not). Called on the event loop. Calls that
        run together hand their outcomes over this way and are waited for once; a backend
        that gathers writes overrides it to queue the write without a task of its own."""
        return asyncio.ensure_future(self.finish(key, outcome, error_kind=error_kind))

    @abc.abstractmethod
    async def abandon(self, key: CallKey) -> None:
        """Give up an owned call without an outcome (it was cancelled and may have partly run).

        It stays running in the journal, so the next claim finds it interrupted.
        """

    async def unclaim(self, key: CallKey) -> None:
        """Let go of an owned call whose tool never started (its run was stopped first): it
        is queued again with no owner, so the next claim runs it as the same attempt. This
        default abandons it instead (found interrupted); both backends queue it again."""
        await self.abandon(key)

    @abc.abstractmethod
    async def entry(self, key: CallKey) -> JournalEntry | None:
        """The stored call `key`, if any."""

    @abc.abstractmethod
    async def entries(
        self,
        *,
        session: str | None = None,
        limit: int | None = None,
        after: JournalEntry | None = None,
    ) -> list[JournalEntry]:
        """Stored calls, oldest first (of one session, or all): at most `limit`, from the
        one after `after` on (a page; see `iter_entries`)."""

    async def iter_entries(
        self, *, session: str | None = None, page: int = 1000
    ) -> AsyncIterator[JournalEntry]:
        """Every stored call, oldest first, read `page` at a time: an export of a large
        journal holds one page in memory, not the journal."""
        after: JournalEntry | None = None
        while True:
            entries = await self.entries(session=session, limit=page, after=after)
            for entry in entries:
                yield entry
            if len(entries) < page:
                return
            after = entries[-1]

    @abc.abstractmethod
    async def counts(self) -> dict[str, int]:
        """How many calls each session has stored."""

    @abc.abstractmethod
    async def hold_session(self, session: str) -> None:
        """Hold the run of `session` for this journal until `release_session`, or raise
        `SessionInUse` when another run holds it (in this process or another, through this
        journal or another over the same database). Released by the system when the
        process dies."""

    @abc.abstractmethod
    def release_session(self, session: str) -> None:
        """Let go of a session `hold_session` took (synchronous, so a `finally` of an
        async generator can call it)."""

    @abc.abstractmethod
    async def save_run(self, session: str, state: Mapping[str, Any]) -> None:
        """Store the state of a session's run (its messages and where it stands), durably."""

    @abc.abstractmethod
    async def load_run(self, session: str) -> dict[str, Any] | None:
        """The stored run state of `session`, if any."""

    @abc.abstractmethod
    async def sessions(self) -> list[tuple[str, float]]:
        """Every session with a stored run or call, with the time of its last change."""

    @abc.abstractmethod
    async def prune(
        self, *, older_than: float | None = None, keep_sessions: int | None = None
    ) -> int:
        """Delete finished (and refused) calls older than `older_than` seconds and sessions
        beyond the newest `keep_sessions`; return how many calls were deleted. Queued and
        running calls stay."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every owned call (they stay running: interrupted) and close."""

    async def __aenter__(self) -> CallJournal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def dropped_sessions(
    journal: CallJournal, older_than: float | None, keep_sessions: int | None
) -> list[str]:
    """What `prune` is asked, checked (`check_prune`), and the sessions it drops: all but
    the newest `keep_sessions` (none when it is None)."""
    check_prune(older_than, keep_sessions)
    sessions = await journal.sessions() if keep_sessions is not None else []
    return [name for name, _ in sessions[keep_sessions or 0 :]]


def deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> bool:
    """Hand a writer's answer to its caller (`value` is raised there unless `ok`); False
    when the caller is gone (cancelled), so what the answer took is the writer's to undo."""
    if future.cancelled():
        return False
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
    return True
