"""`CallRecorder`: what the executor asks the journal before a call runs and tells it after.

The executor stays a scheduler: for each prepared call it asks `begin` (run it, or here
is its stored result, or it was interrupted), runs the call only when told to, and
hands the outcome to `finish` before anyone sees it. A call that may wait for a slot is
claimed queued and marked running by `start` when its tool starts, so a crash in between
leaves a call that never ran, not an interrupted one. Calls refused before running go to
`refuse`. Results are stored as they were sent to the model, so a replay shows the model
exactly what it saw the first time.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from contextvars import ContextVar, Token
from hashlib import sha256
from typing import Any, NamedTuple

from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.tool import ContentBlock, ImageBlock, JsonBlock, TextBlock, Tool, ToolResult
from toolbridge.execution.approval import arguments_digest, plain_canonical
from toolbridge.journal.base import CallJournal
from toolbridge.journal.claims import interrupted
from toolbridge.journal.records import (
    STARTED,
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    ClaimRequest,
    JournalError,
    UnstorableKey,
    refused_key,
    tuple_maker,
)
from toolbridge.journal.rows import to_json

__all__ = [
    "JOURNAL_METADATA_KEY",
    "CallRecorder",
    "CallToBegin",
    "Claimed",
    "OneStop",
    "Recording",
    "result_from_json",
    "result_to_json",
]

logger = logging.getLogger(__name__)

JOURNAL_METADATA_KEY = "toolbridge.journal"
"""Metadata key of a replayed result: ``{"replayed": True, "attempt": n}``."""

UNREDACTED = "<not stored: the redactor could not read these arguments>"
"""What a refused call's record holds instead of arguments its redactor failed on."""

Redactor = Callable[[str, Mapping[str, Any]], Any]
"""(tool name, arguments) -> what to store as the arguments (default: them as they are)."""


class Recording(NamedTuple):
    """A call this process owns in the journal: run it, then `CallRecorder.finish` it. (A
    tuple, made once per call: a frozen dataclass took three times as long.)"""

    key: CallKey
    attempt: int
    queued: bool = False
    """Claimed queued: `CallRecorder.start` it when its tool starts."""


_new_recording = tuple_maker(Recording)


class CallToBegin(NamedTuple):
    """A call to `CallRecorder.begin_many`: what `CallRecorder.begin` takes for it."""

    call_id: str
    tool: Tool
    arguments: Mapping[str, Any]
    approval: Mapping[str, Any] | None = None
    retry_approved: bool = False
    queued: bool = False


class Claimed(NamedTuple):
    """A call `CallRecorder.begin_many` claimed, with what its claim answered (not simply
    "run it"): `CallRecorder.decide` what it gets."""

    call: CallToBegin
    request: ClaimRequest
    claim: Claim | JournalError


class OneStop:
    """One stop's journal waits (`CallRecorder.while_stopping`) share one `close_limit`:
    the first starts it, the later ones get what is left of it, so a stop ends within one
    bound however many waits it passes through. ``with OneStop():`` around a run makes
    its stop one (in this task and the tasks it starts: the executor's batch); a wait
    outside one is a stop of its own."""

    __slots__ = ("deadline", "token")

    def __init__(self) -> None:
        self.deadline: float | None = None  # the loop's time the bound ends: set by the first
        self.token: Token[OneStop | None] | None = None

    def __enter__(self) -> OneStop:
        self.token = _this_stop.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.token is not None
        _this_stop.reset(self.token)

    def left(self, limit: float) -> float:
        """Seconds this wait may take: `limit` for the first, what is left for the rest."""
        now = asyncio.get_running_loop().time()
        if self.deadline is None:
            self.deadline = now + limit
            return limit
        return max(0.0, self.deadline - now)


_new_key = tuple_maker(CallKey)
_new_request = tuple_maker(ClaimRequest)

_this_stop: ContextVar[OneStop | None] = ContextVar("toolbridge_journal_stop", default=None)


class CallRecorder:
    """Binds a `CallJournal` to one session for the executor (see the module docstring)."""

    def __init__(
        self, journal: CallJournal, session: str, *, redact: Redactor | None = None
    ) -> None:
        self.journal = journal
        self.session = session
        self.redact = redact
        self._left: set[asyncio.Task[None]] = set()  # see `while_stopping`

    async def begin(
        self,
        call_id: str,
        tool: Tool,
        arguments: Mapping[str, Any],
        *,
        approval: Mapping[str, Any] | None = None,
        retry_approved: bool = False,
        queued: bool = False,
    ) -> Recording | ToolResult | ToolError:
        """A `Recording` to run the call under; a `ToolResult` to answer it with (a replay);
        or a `ToolError` when it must not run (interrupted, or the journal failed).

        A call finished as interrupted runs again only when `retry_approved` (the user
        approved a retry of these exact arguments), and then only once, in one process.
        `queued`: the call may wait for a slot; `start` its recording when its tool starts.
        """
        call = CallToBegin(call_id, tool, arguments, approval, retry_approved, queued)
        request = self._request(call)
        if isinstance(request, ToolError):
            return request
        return await self._decide(call, request, None)

    async def begin_many(
        self, calls: Sequence[CallToBegin]
    ) -> list[Recording | ToolError | Claimed]:
        """`begin` each of `calls`, claimed in one request (`CallJournal.claim_many`): the
        answers in their order, a `Claimed` for each call whose claim did not simply run
        it (a replay, busy, interrupted, a failure): `decide` it, in its own task, so that
        one call waiting for another process holds back none of the others. The executor
        begins the calls that run together this way, before their tasks start."""
        requests = [self._request(call) for call in calls]
        asked = [request for request in requests if not isinstance(request, ToolError)]
        try:
            claims = await self.journal.claim_many(asked) if asked else []
        except JournalError as exc:  # the journal failed as a whole: every call's answer
            claims = [exc] * len(asked)
        answers: list[Recording | ToolError | Claimed] = []
        claimed = iter(claims)
        for call, request in zip(calls, requests, strict=True):
            if isinstance(request, ToolError):
                answers.append(request)
                continue
            claim = next(claimed)
            if type(claim) is Claim and claim.action is ClaimAction.RUN:  # the common case
                answers.append(_new_recording((request.key, claim.entry.attempt, request.queued)))
            else:
                answers.append(Claimed(call, request, claim))
        return answers

    async def decide(self, claimed: Claimed) -> Recording | ToolResult | ToolError:
        """What `begin` answers for a call `begin_many` claimed (see there)."""
        return await self._decide(*claimed)

    @staticmethod
    def taken_over(claimed: Claimed) -> CallKey | None:
        """The key of a call `begin_many` took over as interrupted (this journal owns it
        now), None for any other claim (nothing was taken)."""
        claim = claimed.claim
        if type(claim) is Claim and claim.action is ClaimAction.INTERRUPTED:
            return claimed.request.key
        return None

    async def let_go_undecided(self, claimed: Claimed) -> None:
        """Let go of a call `begin_many` claimed whose run was stopped before `decide`: a
        call it took over as interrupted is left so (nothing else was taken). Not bounded:
        the caller waits for it as a stop waits (`while_stopping`)."""
        key = self.taken_over(claimed)
        if key is not None:
            await self._let_go(key)

    def _request(self, call: CallToBegin) -> ClaimRequest | ToolError:
        """What to claim for `call` (its arguments as its redactor stores them), or the
        error that answers it when its redactor fails."""
        tool, arguments = call.tool, call.arguments
        text = plain_canonical(arguments)  # (plain data: one encoding for digest and record)
        try:
            digest = (
                arguments_digest(tool.name, arguments)
                if text is None
                else sha256(f"{tool.name}\n{text}".encode()).hexdigest()  # (`digest_of`)
            )
        except (TypeError, ValueError) as exc:  # a program's own value: not the model's
            failed = JournalError(f"its arguments have no digest to record ({exc})")
            return _not_recorded(failed)
        key = _new_key((self.session, call.call_id, digest))
        if self.redact is None:
            return _new_request((key, tool.name, arguments, call.approval, call.queued, text))
        try:
            stored = self.redact(tool.name, arguments)
        except Exception as exc:  # the caller's code: the call is not run unrecorded
            logger.exception(
                "the journal's redactor failed on call %r of %r", call.call_id, tool.name
            )
            failed = JournalError(f"its redactor failed on the arguments: {type(exc).__name__}")
            return _not_recorded(failed)
        return ClaimRequest(key, tool.name, stored, call.approval, call.queued)

    async def _decide(
        self, call: CallToBegin, request: ClaimRequest, claim: Claim | JournalError | None
    ) -> Recording | ToolResult | ToolError:
        """What `begin` answers for `call` once `request` is claimed (`claim`; None: claim
        it now)."""
        call_id, tool, arguments, approval, retry_approved, queued = call
        key, stored, text = request.key, request.arguments, request.arguments_text
        taken = False  # owned as interrupted: `restart` or `finish` it, or let it go
        try:
            if claim is None:  # (as `begin_many` claims: the arguments' text as made here)
                claim = (await self.journal.claim_many([request]))[0]
            if isinstance(claim, JournalError):
                raise claim
            if claim.action is ClaimAction.BUSY:  # another live process runs it: wait for it
                claim = await self.journal.claim_when_free(
                    key, tool.name, stored, approval=approval, queued=queued, arguments_text=text
                )
            if claim.action is ClaimAction.REPLAY and interrupted(claim.entry) and retry_approved:
                grant = {**(approval or {}), "approved": True, "retry": True,
                         "digest": key.args_hash}  # fmt: skip
                entry = await self.journal.retry(key, approval=grant, queued=queued)
                if entry is not None:
                    logger.info("re-running interrupted call %r of %r: the user approved it",
                                call_id, tool.name)  # fmt: skip
                    return Recording(key, entry.attempt, queued)
                # Another process retried it first: its answer is this call's answer.
                claim = await self.journal.claim_when_free(
                    key, tool.name, stored, queued=queued, arguments_text=text
                )
            if claim.action is ClaimAction.RUN:
                return Recording(key, claim.entry.attempt, queued)
            if claim.action is ClaimAction.REPLAY:
                assert claim.entry.outcome is not None
                result = _stored_result(claim.entry.outcome, call_id)
                result.metadata[JOURNAL_METADATA_KEY] = {
                    "replayed": True,
                    "attempt": claim.entry.attempt,
                }
                return result
            taken = True  # the claim was INTERRUPTED: this journal owns the call now
            if tool.read_only or getattr(tool, "idempotent", False):
                entry = await self.journal.restart(key, queued=queued)
                logger.info("re-running interrupted call %r of %r", call_id, tool.name)
                return Recording(key, entry.attempt, queued)
            error = _interrupted(tool.name)
            await self.journal.finish(key, result_to_json(ToolResult.error(error)),
                                      error_kind=error.kind)  # fmt: skip
            return error
        except asyncio.CancelledError:
            if taken:  # stopped mid-way: let go of it (it stays interrupted), then stop
                await self.while_stopping(self._let_go(key), [key])
            raise
        except UnstorableKey as exc:
            if exc.part != "call id" or taken:  # the program's or the user's: not the model's
                return await self._failed(exc, call_id, tool.name, taken, key)
            # The model's id no database holds: refused, as a list id is, and recorded so.
            error = ToolError(
                ErrorKind.INVALID_ARGUMENTS,
                f"not run: invalid call id: {exc}",
                "Send this call again with a unique text id of plain characters.",
            )
            await self.refuse(call_id, tool.name, arguments, ToolResult.error(error))
            return error
        except JournalError as exc:
            return await self._failed(exc, call_id, tool.name, taken, key)

    async def _failed(
        self, exc: JournalError, call_id: str, tool_name: str, taken: bool, key: CallKey
    ) -> ToolError:
        """The journal failed before a call ran: it is not run, and a call this journal
        took over is let go, not kept busy by nobody."""
        logger.error("journal failed before call %r of %r: %s", call_id, tool_name, exc)
        if taken:
            await self._let_go(key)
        return _not_recorded(exc)

    async def _let_go(self, key: CallKey) -> None:
        """Give up a call this journal took over and will not run now (best effort)."""
        try:
            await self.journal.abandon(key)
        except JournalError as exc:
            logger.error("could not let go of call %r: %s", key.call_id, exc)

    async def while_stopping(
        self, work: Coroutine[Any, Any, None], keys: Iterable[CallKey]
    ) -> None:
        """Wait for `work`, what a stopped run writes about the calls `keys` (letting go of
        them), shielded from the stop, but within the journal's `close_limit`, one bound
        for the whole stop (`OneStop`): past it the wait ends and says at error what it
        left, and the caller's stop goes on (`work` too, until the journal answers or
        closes). A second cancel ends it at once."""
        task = asyncio.ensure_future(work)
        self._left.add(task)
        task.add_done_callback(self._left.discard)
        limit = self.journal.close_limit
        stop = _this_stop.get() or OneStop()
        first = stop.deadline is None
        left = None if limit is None else stop.left(limit)
        await asyncio.wait((task,), timeout=left)
        if task.done():
            task.result()  # its failure, if any, as a shielded wait would raise it
            return
        logger.error(
            "the journal did not answer within %s while a run was stopped, so the stop went "
            "on without its answer. Left as the journal has them until it answers or closes: "
            "call %s (a call still queued runs again, a call started reads interrupted, once "
            "this process lets go of it). Check that the journal's server is up and not "
            "overloaded.",
            f"{limit:g} s" if first else f"the {left:.2f} s left of this stop's {limit:g} s",
            ", ".join(repr(key.call_id) for key in keys),
        )

    async def start(self, recording: Recording) -> ToolError | None:
        """Mark a queued recording running, just before its tool starts; the `ToolError` to
        answer the call with, instead of running it, when the journal cannot record that."""
        if not recording.queued:
            return None
        try:
            await self.journal.start(recording.key)
        except JournalError as exc:
            logger.error("journal failed before call %r started: %s", recording.key.call_id, exc)
            return _not_recorded(exc)
        return None

    async def refuse(
        self, call_id: Any, tool_name: Any, arguments: Any, result: ToolResult
    ) -> None:
        """Record a call refused before it ran (never claimed: it did not run). The audit
        record failing does not change the refusal: it is logged. A hostile id or name (not
        text, or text no database holds) is recorded as `_refused_text` makes it."""
        stored = arguments
        if self.redact is not None:  # never stored unredacted: a refusal's are often odd
            try:
                if not isinstance(arguments, Mapping):
                    raise TypeError(f"the arguments are {type(arguments).__name__}, not an object")
                stored = self.redact(tool_name, arguments)
            except Exception as exc:
                logger.error("the redactor could not read the arguments of refused call %r "
                             "(%s); they are not stored", call_id, type(exc).__name__)  # fmt: skip
                stored = UNREDACTED
        try:
            await self.journal.refuse(
                refused_key(self.session, _refused_text(call_id)), _refused_text(tool_name), stored,
                result_to_json(result), error_kind=result.error_kind,
            )  # fmt: skip
        except JournalError as exc:
            logger.error("journal could not record refused call %r: %s", call_id, exc)

    async def answers(self, call_id: str, tool: Tool, arguments: Mapping[str, Any]) -> bool:
        """Whether the journal, not a new run, will answer this call: it finished (its
        outcome replays), or it was started and is not one `begin` re-runs by itself (an
        interrupted call of a tool that is neither read-only nor idempotent). A journal
        that cannot be read says no here; the claim reports it."""
        key = CallKey(self.session, call_id, arguments_digest(tool.name, arguments))
        try:
            entry = await self.journal.entry(key)
        except JournalError:
            return False
        if entry is None:
            return False
        rerun_by_itself = tool.read_only or getattr(tool, "idempotent", False)
        return entry.state is CallState.FINISHED or (entry.state in STARTED and not rerun_by_itself)

    async def finish(self, recording: Recording, result: ToolResult) -> None:
        """Store `result` as the outcome; durable when this returns. A journal failure is
        raised (the caller decides whether the run can go on), and the call is let go
        (`unfinished`)."""
        try:
            await self.journal.finish(
                recording.key, result_to_json(result), error_kind=result.error_kind
            )
        except JournalError:
            await self.unfinished(recording)
            raise

    def finish_soon(self, recording: Recording, result: ToolResult) -> asyncio.Future[None]:
        """`finish`, started now, as a future to wait for later (`CallJournal.finish_soon`);
        when it fails, let go of the call with `unfinished`. A result that cannot be
        stored, or a closed journal, is a future failed with that `JournalError`."""
        try:
            return self.journal.finish_soon(
                recording.key, result_to_json(result), error_kind=result.error_kind
            )
        except JournalError as exc:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed

    async def unfinished(self, recording: Recording) -> None:
        """Let go of a call whose outcome could not be stored: it ran and its outcome is
        lost, so the next claim finds it interrupted rather than waiting for this process
        to finish it."""
        try:
            await self.journal.abandon(recording.key)
        except JournalError as exc:
            logger.error("could not mark call %r interrupted: %s", recording.key.call_id, exc)

    async def abandon(self, recording: Recording) -> None:
        """The call was stopped mid-way: leave it interrupted for whoever claims it next."""
        await self.journal.abandon(recording.key)


def _refused_text(value: Any) -> str:
    """A refused call's id or tool name as text every backend stores: a value that is not
    text as its JSON (a list id ``["x", 1]``), its first 500 characters when it is longer,
    and a lone surrogate or NUL as U+FFFD. A
    refusal's record has a key of its own (`refused_key`), so a changed id never makes two
    calls share one record, and the refusal is in the audit trail however odd its id."""
    text: str
    if isinstance(value, str):
        text = value
    else:
        try:
            text = to_json(value)
        except JournalError:  # it holds itself: its type is what is left to say
            text = f"<{type(value).__name__}>"
    if len(text) > _LONGEST_REFUSED:  # a key column (PostgreSQL's index holds ~2.7 kB)
        text = f"{text[:_LONGEST_REFUSED]}... ({len(text)} characters in all)"
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSTORABLE.sub("\ufffd", text)


_LONGEST_REFUSED = 500  # characters of a refused call's id or tool name that are stored
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _stored_result(outcome: Any, call_id: str) -> ToolResult:
    """The stored outcome as a result; a damaged one is a `JournalError`, never a rerun."""
    try:
        return result_from_json(outcome)
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(
            f"the stored outcome of call {call_id!r} cannot be read ({exc!r}); the journal "
            "was damaged or edited"
        ) from None


def _not_recorded(exc: JournalError) -> ToolError:
    return ToolError(
        ErrorKind.EXECUTION_ERROR,
        f"the call was not run: its journal cannot record it ({exc}).",
        "Tell the user the call journal needs attention; do not retry until then.",
    )


def _interrupted(tool_name: str) -> ToolError:
    return ToolError(
        ErrorKind.INTERRUPTED,
        f"the call to {tool_name!r} was interrupted before it finished (the process "
        "running it stopped), and it may have partly run.",
        "Check its effects before calling it again; it will not be re-run automatically "
        "(the user may approve a retry).",
    )


def result_to_json(result: ToolResult) -> dict[str, Any]:
    """A `ToolResult` as plain JSON data (images as base64)."""
    content: Any
    if isinstance(result.content, str):
        content = result.content
    else:
        content = [_block_to_json(block) for block in result.content]
    return {
        "content": content,
        "is_error": result.is_error,
        "error_kind": result.error_kind,
        "metadata": result.metadata,
    }


def result_from_json(data: Mapping[str, Any]) -> ToolResult:
    """The `ToolResult` that `result_to_json` stored."""
    raw = data["content"]
    content = raw if isinstance(raw, str) else [_block_from_json(item) for item in raw]
    kind = data.get("error_kind")
    return ToolResult(
        content,
        is_error=bool(data.get("is_error")),
        error_kind=ErrorKind(kind) if kind else None,
        metadata=dict(data.get("metadata") or {}),
    )


def _block_to_json(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, JsonBlock):
        return {"type": "json", "value": block.value}
    return {"type": "image", "media_type": block.media_type, "data": block.base64}


def _block_from_json(item: Mapping[str, Any]) -> ContentBlock:
    if item["type"] == "text":
        return TextBlock(item["text"])
    if item["type"] == "json":
        return JsonBlock(item["value"])
    return ImageBlock(base64.b64decode(item["data"]), item["media_type"])
