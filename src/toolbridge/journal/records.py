"""What the journal keeps about a call, and what it answers when a call asks to run.

A call is identified by its session, its call id and the hash of its prepared
arguments: the same id with other arguments is another call. `Claim` is the journal's
one answer to "may this call run?": run it, replay the stored outcome, it was
interrupted by a crash, or another live process is running it right now.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, TypeVar, cast

from toolbridge.core.errors import ToolbridgeError

__all__ = [
    "REFUSED_PREFIX",
    "STARTED",
    "CallKey",
    "CallState",
    "Claim",
    "ClaimAction",
    "ClaimRequest",
    "JournalEntry",
    "JournalError",
    "SessionInUse",
    "UnstorableKey",
    "refused_key",
    "tuple_maker",
]


_Tuple = TypeVar("_Tuple", bound=tuple[Any, ...])


def tuple_maker(cls: type[_Tuple]) -> Callable[[tuple[Any, ...]], _Tuple]:
    """The fast constructor of a named tuple class, from a plain tuple of every field in
    order: half the time of calling the class, whose ``__new__`` is a Python function
    (0.3 against 0.6 µs here), for the few named tuples the journal makes per call."""
    return cast(Callable[[tuple[Any, ...]], _Tuple], partial(tuple.__new__, cls))


class JournalError(ToolbridgeError):
    """The journal cannot be used (corrupt, locked, full, newer): what happened and what to do."""


class UnstorableKey(JournalError):
    """A claim whose session, call id or tool name (`part`) no database can hold: an error
    of that call alone, raised before the database sees it (`rows.check_storable`)."""

    def __init__(self, message: str, part: str) -> None:
        super().__init__(message)
        self.part = part


class NoJournal(JournalError):
    """A journal opened to read (``create=False``) is not there (no file, or a file or
    database that holds no journal), and nothing was made."""


class SessionInUse(JournalError):
    """Another run (in this process or another) holds the session: two runs going on from
    one stored conversation would each save their turns over the other's."""


class CallState(enum.StrEnum):
    """What happened to a call, as far as the journal can prove it."""

    QUEUED = "queued"
    """Claimed, waiting for a concurrency slot: its tool has not started. If its process
    dies, the next claim runs it as a new call (the same attempt, nothing to approve)."""
    RUNNING = "running"
    """Its tool has started, in a process that is still alive."""
    FINISHED = "finished"
    """Its outcome is stored (an ``interrupted`` error kind when it was given up)."""
    INTERRUPTED = "interrupted"
    """Its tool started in a process that died (or let it go) before it finished: it may
    have partly run. Never stored: read from a running call whose owner's lock is gone."""
    REFUSED = "refused"
    """Refused before it ran (invalid arguments, an unknown tool, denied or unanswered
    approval, a loop-guard stop, a hook): recorded for the audit, never claimed."""


STARTED = (CallState.RUNNING, CallState.INTERRUPTED)
"""The states of a call whose tool started and has no stored outcome."""


class ClaimAction(enum.StrEnum):
    RUN = "run"
    """Nobody ran this call (it is new, or it was queued in a process that died): it is
    now owned by this process, queued or running as it was claimed."""
    REPLAY = "replay"
    """It finished before: `Claim.entry.outcome` is what it produced; do not run it again."""
    INTERRUPTED = "interrupted"
    """It was running in a process that died: it may have partly run. Owned by this process
    now: `restart` it (read-only or idempotent tools) or `finish` it with an error."""
    BUSY = "busy"
    """Another live process is running it now; ask again later to get its outcome."""


class CallKey(NamedTuple):
    """A call's identity in the journal; its parts in stored order (session, call id,
    digest), as query parameters take them. A tuple: it is hashed and compared several
    times per call (the owned set, the batch's rows), and a tuple does that in C."""

    session: str
    call_id: str
    args_hash: str


@dataclass(slots=True)
class JournalEntry:
    """One call as stored: identity, what ran, its state and (when finished) its outcome.
    A copy of the row as read: changing it changes nothing stored. (Not frozen: one is
    made per claim, and a frozen one sets each field through `object.__setattr__`.)"""

    key: CallKey
    tool: str
    arguments: Any
    state: CallState
    attempt: int
    outcome: Mapping[str, Any] | None
    error_kind: str | None
    approval: Mapping[str, Any] | None
    created_at: float
    started_at: float | None
    finished_at: float | None


def journal_closed(where: str) -> JournalError:
    """The error of an operation on a closed journal (`where`: its file, or "at" its server)."""
    return JournalError(f"the journal {where} is closed")


def session_in_use(session: str) -> SessionInUse:
    return SessionInUse(
        f"session {session!r} is in use by another run (this process or another); wait for "
        "it to end, or use another session"
    )


def session_lock_number(session: str) -> int:
    """A stable 60-bit number for a session's run lock (collisions only cost a refusal)."""
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") >> 4


REFUSED_PREFIX = "refused-"
"""How the key of a refused call's record starts where a digest of arguments would be: it
never meets a claim (whose digest is hex), so a refusal never answers a later call."""


def refused_key(session: str, call_id: str) -> CallKey:
    """The key of one refusal's record: each refusal is a record of its own."""
    return CallKey(session, call_id, REFUSED_PREFIX + secrets.token_hex(8))


class ClaimRequest(NamedTuple):
    """One call of `CallJournal.claim_many`: what `CallJournal.claim` takes for it."""

    key: CallKey
    tool: str
    arguments: Any
    approval: Mapping[str, Any] | None = None
    queued: bool = False
    arguments_text: str | None = None
    """`arguments` as canonical JSON, when the caller has it (plain JSON data:
    `approval.plain_canonical`): stored as it is, not written again."""


class Claim(NamedTuple):
    """The journal's answer to a claim (see `ClaimAction`), with the call as stored. (A
    tuple, made once per call: a frozen dataclass took three times as long.)"""

    action: ClaimAction
    entry: JournalEntry
