"""What the journal decides about a call from its stored row, the same on both backends.

Whether a claim replays the call, finds it busy, or takes it over (to run, or as
interrupted); what a reader can prove of a running call; what undoes a claim nobody
heard; which state a claim is stored in. A backend reads the rows and its owners' locks
and writes what these decide, in its own SQL.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import replace
from typing import Any

from toolbridge.core.errors import ErrorKind
from toolbridge.journal.records import (
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    JournalEntry,
    JournalError,
)

__all__ = [
    "LetGo",
    "claim_action",
    "claimed_state",
    "interrupted",
    "not_owned",
    "once_each",
    "proven",
    "running_entry",
    "started_at",
    "unheard",
]

Alive = Callable[[Any], bool]
"""Whether the owner stored in a row is another journal that is open now (its lock held)."""


def once_each(calls: Iterable[Collection[CallKey]]) -> int:
    """How many of a batch's jobs, from the first, name each call once (the calls each
    names in `calls`; at least one job). A writer applies a batch's parts in an order of
    its own (PostgreSQL's one statement, SQLite's rows written at commit), so a job on a
    call an earlier one named waits for the next part, as it would alone."""
    jobs = list(calls)
    named = [key for keys in jobs for key in keys]
    if len(set(named)) == len(named):  # the common case: every call once
        return len(jobs)
    seen: set[CallKey] = set()
    count = 0
    for keys in jobs:
        if count and not seen.isdisjoint(keys):
            return count
        seen.update(keys)
        count += 1
    return count


def claimed_state(queued: bool) -> str:
    """The state a claimed call is stored in: queued (its tool waits for a slot) or running."""
    return "queued" if queued else "running"


def started_at(queued: bool, now: float) -> float | None:
    """When a claimed call's tool started: `now`, unless it is queued (not yet)."""
    return None if queued else now


def running_entry(
    key: CallKey,
    tool: str,
    arguments: Any,
    approval: Mapping[str, Any] | None = None,
    now: float | None = None,
    *,
    queued: bool = False,
) -> JournalEntry:
    """The entry of a call claimed now: running (or `queued`), first attempt, no outcome."""
    now = time.time() if now is None else now
    if queued:
        return JournalEntry(key, tool, arguments, CallState.QUEUED, 1, None, None, approval,
                            now, None, None)  # fmt: skip
    return JournalEntry(key, tool, arguments, CallState.RUNNING, 1, None, None, approval, now,
                        now, None)  # fmt: skip


def claim_action(
    entry: JournalEntry, owner: Any, *, held: Container[CallKey], alive: Alive
) -> ClaimAction:
    """What a claim of the stored call `entry` (owned by `owner` in its row) gets: its
    outcome replayed once it finished; busy while this journal (`held`) or another open one
    runs it; else its owner is gone and the claim takes it over, to run (it was queued: its
    tool never started, so the same attempt, nothing to approve) or as interrupted (it
    started, and may have partly run)."""
    if entry.state is CallState.FINISHED:
        return ClaimAction.REPLAY
    if entry.key in held or alive(owner):
        return ClaimAction.BUSY
    if entry.state is CallState.QUEUED:
        return ClaimAction.RUN
    return ClaimAction.INTERRUPTED


def proven(
    entry: JournalEntry, owner: Any, *, held: Container[CallKey], alive: Alive
) -> JournalEntry:
    """`entry` as a reader can prove it: a running call that this journal does not hold
    (`held`) and whose owner's lock is gone was interrupted."""
    if entry.state is CallState.RUNNING and not (entry.key in held or alive(owner)):
        return replace(entry, state=CallState.INTERRUPTED)
    return entry


def interrupted(entry: JournalEntry | None) -> bool:
    """Whether `entry` is a call finished as interrupted: the only kind a retry reopens."""
    return (
        entry is not None
        and entry.state is CallState.FINISHED
        and entry.error_kind == ErrorKind.INTERRUPTED
    )


class LetGo(enum.Enum):
    """How an owned call is let go of without an outcome."""

    DELETE = "delete"
    """The row a claim inserted goes: the call never ran."""
    REQUEUE = "requeue"
    """A queued row a claim took over is queued again, with no owner: it never started."""
    DISOWN = "disown"
    """The call is left running with no owner: it may have partly run, so it is found
    interrupted (`abandon`, and an interrupted call taken over)."""


def unheard(claim: Claim, *, inserted: bool) -> LetGo | None:
    """What undoes `claim` when nobody heard it (its caller was cancelled first, so it did
    not run the call): `inserted` says whether the claim made the row. None when the claim
    took nothing (a replay, or busy)."""
    if claim.action is ClaimAction.RUN:
        return LetGo.DELETE if inserted else LetGo.REQUEUE
    if claim.action is ClaimAction.INTERRUPTED:
        return LetGo.DISOWN
    return None


def not_owned(key: CallKey) -> JournalError:
    """The error of an operation on a call this journal does not own."""
    return JournalError(
        f"call {key.call_id!r} of session {key.session!r} is not owned by this journal: "
        "claim it first (its outcome was not recorded)"
    )
