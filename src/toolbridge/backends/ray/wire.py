"""What travels between the caller and its workers: the calls of a request with the
picklable part of their contexts, the kinds of what a worker streams back, and an
`Invocation` as plain data and back (a worker's exception arrives described, as a
`RemoteToolException`, unless it can travel whole)."""

from __future__ import annotations

import dataclasses
import json
import logging
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from toolbridge.core.errors import PolicyViolation
from toolbridge.core.registry import Invocation, text_of
from toolbridge.core.tool import ToolContext

logger = logging.getLogger(__name__)

CONTROL = "control"
"""The workers' concurrency group for the caller's messages about running requests."""


class RemoteToolException(Exception):
    """Stands for an exception raised on a worker (its type name and message)."""


@dataclass(frozen=True, slots=True)
class Context:
    """The picklable part of a `ToolContext`: what a worker needs to build and run tools."""

    workspace: str
    session: str
    config: Mapping[str, Any] = field(default_factory=dict)
    key: tuple[str, str, str] = field(init=False, compare=False)
    """Which registry a worker runs its calls on: written once, not per call."""

    def __post_init__(self) -> None:
        config = json.dumps(self.config, sort_keys=True, default=repr)
        object.__setattr__(self, "key", (self.workspace, self.session, config))

    def tool_context(self) -> ToolContext:
        from pathlib import Path

        return ToolContext(workspace=Path(self.workspace), config=self.config, session=self.session)


class Call(NamedTuple):
    """One call as it travels: the index of its context in the request, what to run, its
    limit (named in a timeout) and budget (what is left of it), whether the caller listens
    to its progress, and whether its tool waits for the caller's go once it is about to
    start (it has a slot, and a thread for a sync tool: the journal records it running
    first)."""

    context: int
    name: str
    arguments: dict[str, Any]
    call_id: str | None
    time_limit: float | None
    budget: float | None
    progress: bool
    gated: bool
    told: bool


class Request(NamedTuple):
    """The calls one worker gets at once: serialised once, whatever their number."""

    batch: int
    contexts: tuple[Context, ...]
    calls: tuple[Call, ...]


# What a worker streams back, in chunks of (position in the request, kind, payload).
# STARTING: a gated call is about to start (a slot, and a thread for a sync tool) and
# waits for the caller's go; any other call the caller is told of starts now.
# UNSTARTED: an answer (a timeout) for a call whose tool never started: no thread of
# its runs on, so a blocking tool's worker needs no new process.
# CANCELLED: a call stopped on its worker; its payload says whether its tool may have
# started (if not, the same goes for a blocking tool's worker).
PROGRESS, ANSWER, FAILED, CANCELLED, STARTING, UNSTARTED = 0, 1, 2, 3, 4, 5
Item = tuple[int, int, Any]


def pack_message(message: Any) -> bytes:
    """A request or a chunk as bytes Ray carries as they are: the standard pickle (a C
    encoder, far cheaper for the caller than Ray's own pickling of nested tuples), or
    Ray's cloudpickle for what only it can pickle (a function in a session's config)."""
    try:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        from ray import cloudpickle

        packed: bytes = cloudpickle.dumps(message)  # type: ignore[no-untyped-call]
        return packed


unpack_message = pickle.loads


def pack_chunk(chunk: list[Item]) -> bytes:
    """A worker's chunk as bytes (`pack_message`). An answer that cannot be pickled (a
    result whose metadata holds a lock, say) never fails the other calls of the chunk: it
    goes without the metadata entries that do not pickle (as a value that does not stays
    behind), or, if its content does not pickle either, as that call's failure."""
    try:
        return pack_message(chunk)
    except Exception:
        return pack_message([_sendable(item) for item in chunk])


def _sendable(item: Item) -> Item:
    position, kind, payload = item
    if kind not in (ANSWER, UNSTARTED) or _pickles(payload):
        return item
    result, *rest = payload
    kept = {key: value for key, value in result.metadata.items() if _pickles(value)}
    logger.warning(
        "metadata %s of a result cannot be pickled: sent back without it",
        sorted(map(repr, result.metadata.keys() - kept.keys())),
    )
    payload = (dataclasses.replace(result, metadata=kept), *rest)
    try:
        pack_message(payload)
    except Exception as exc:  # its content does not pickle either
        return position, FAILED, f"its result cannot be sent back ({type(exc).__name__}: {exc})"
    return position, kind, payload


def _pickles(value: Any) -> bool:
    try:
        pack_message(value)
    except Exception:
        return False
    return True


def to_wire(invocation: Invocation) -> tuple[Any, ...]:
    """An invocation as it travels: the raw value as is when it is plain, else pickled here
    (a value that cannot be pickled stays behind; the result still goes). An exception
    travels described, except a `PolicyViolation`, which the caller's loop guard reads
    (its `target`) as it does locally: that one travels whole."""
    exception = invocation.exception
    described = None
    if exception is not None:
        whole = None
        if isinstance(exception, PolicyViolation):
            try:
                whole = pickle.dumps(exception)
            except Exception:
                logger.debug("policy violation %r cannot be pickled", exception, exc_info=True)
        described = (type(exception).__name__, text_of(exception), whole)
    value = invocation.value
    if value is None or type(value) in (str, int, float, bool):
        return invocation.result, invocation.error, described, value, False
    try:
        return invocation.result, invocation.error, described, pickle.dumps(value), True
    except Exception:
        return invocation.result, invocation.error, described, None, False


def from_wire(wire: tuple[Any, ...]) -> Invocation:
    result, error, described, value, pickled = wire
    exception: BaseException | None = None
    if described is not None:
        name, text, whole = described
        exception = _unpickled(whole) if whole is not None else None
        if exception is None:
            exception = RemoteToolException(f"{name}: {text}")
    return Invocation(result, pickle.loads(value) if pickled else value, error, exception)


def _unpickled(data: bytes) -> BaseException | None:
    try:
        found = pickle.loads(data)
    except Exception:  # a class the caller does not have: described instead
        logger.debug("a worker's exception cannot be unpickled here", exc_info=True)
        return None
    return found if isinstance(found, BaseException) else None
