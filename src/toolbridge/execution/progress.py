"""Progress of a running tool call: `report_progress` from inside a tool, a sink outside.

A tool (or the MCP client relaying a server's progress notifications) calls
`report_progress`; whoever runs the call - the executor, when it has event
listeners, or the MCP server answering a client - installs a sink for the call
with `progress_sink`. Without a sink, a report costs one context-variable read. A sink
that listeners or a loop's tasks stand behind is wrapped in a `LoopSink`: a sync tool
reports from its worker thread, and the sink is still called on the loop, in order.

A report is bounded where it is made (`ToolProgress`), whatever runs the call: its message
is cut to `MAX_PROGRESS_MESSAGE` characters, its numbers are finite floats (JSON numbers,
as an MCP notification needs). One place, so that listeners read the same report on every
backend and a Ray worker never sends more than that.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass

__all__ = [
    "MAX_PENDING_PROGRESS",
    "MAX_PROGRESS_MESSAGE",
    "LoopSink",
    "ProgressSink",
    "ToolProgress",
    "current_progress_sink",
    "progress_sink",
    "report_progress",
    "reset_progress_sink",
    "set_progress_sink",
    "tool_progress",
]

logger = logging.getLogger(__name__)


MAX_PENDING_PROGRESS = 100
"""Progress reports of one call held for a reader that has not taken them yet (a stream's,
a Ray worker's outbox): past that, the oldest give way, so the reader sees the latest, in
order."""

MAX_PROGRESS_MESSAGE = 1_000
"""Characters of a progress message a report keeps: a longer one is cut to this length,
its end saying how long it was (``... [progress message cut: 100,000 characters]``)."""


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """How far a call has come: `progress` of `total` (if known), with an optional message.

    Bounded as it is made: `progress` is a finite float (anything else raises
    `ValueError`: `report_progress` drops such a report), `total` a finite float or None
    (NaN, infinity or a number past a float's range is unknown), `message` a string of at
    most `MAX_PROGRESS_MESSAGE` characters (another value is written as text)."""

    progress: float
    total: float | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        progress = _finite(self.progress)
        if progress is None:
            kind = type(self.progress).__name__
            shown = repr(self.progress) if isinstance(self.progress, float) else kind
            raise ValueError(f"progress must be a finite number, not {shown}")
        object.__setattr__(self, "progress", progress)
        object.__setattr__(self, "total", _finite(self.total))
        object.__setattr__(self, "message", _bounded(self.message))


def tool_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> ToolProgress | None:
    """The report of these values (see `ToolProgress`), or None when `progress` is not a
    finite number (logged): the way in for a report made from someone else's numbers."""
    try:
        return ToolProgress(progress, total, message)
    except Exception as exc:  # not a number, or a message whose str() fails
        logger.debug("progress report dropped: %s", exc)
        return None


def _finite(value: object) -> float | None:
    """`value` as a finite float, or None (None, text, NaN, infinity, an int past a float)."""
    if value is None or isinstance(value, str | bytes | bytearray):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _bounded(message: object) -> str | None:
    """`message` as text of at most `MAX_PROGRESS_MESSAGE` characters, its cut end saying
    how long it was (so a cut message is not cut again)."""
    if message is None:
        return None
    text = message if isinstance(message, str) else str(message)
    if len(text) <= MAX_PROGRESS_MESSAGE:
        return text
    marker = f" ... [progress message cut: {len(text):,} characters]"
    return text[: MAX_PROGRESS_MESSAGE - len(marker)] + marker


ProgressSink = Callable[[ToolProgress], None]


class LoopSink:
    """Calls `sink` on the event loop running where it is made, in the order the reports
    came: from that loop's thread at once, from another (a sync tool's worker thread)
    through the loop, after what the thread posted before (the call's start). Once
    `close`d (its call ended), reports are dropped: a task the tool left running reports
    after the call's outcome, which its listeners have heard already."""

    __slots__ = ("loop", "open", "sink", "thread")

    def __init__(self, sink: ProgressSink) -> None:
        self.sink = sink
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.open = True

    def __call__(self, progress: ToolProgress) -> None:
        if threading.get_ident() == self.thread:
            self._deliver(progress)
        else:  # (a closed loop raises: `report_progress` logs it)
            self.loop.call_soon_threadsafe(self._deliver, progress)

    def _deliver(self, progress: ToolProgress) -> None:
        if not self.open:
            logger.debug("progress reported after its call ended, dropped: %r", progress)
            return
        try:
            self.sink(progress)
        except Exception:  # a listener's failure must not fail the tool (nor the loop)
            logger.exception("progress sink %r failed", self.sink)

    def close(self) -> None:
        """The call ended: later reports are dropped."""
        self.open = False


_sink: ContextVar[ProgressSink | None] = ContextVar("toolbridge_progress_sink", default=None)


def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Report the running call's progress to whoever runs it; a no-op when nobody listens.
    Bounded (see `ToolProgress`): a report whose `progress` is not a finite number is
    dropped, a long message cut."""
    sink = _sink.get()
    if sink is None:
        return
    report = tool_progress(progress, total, message)
    if report is None:
        return
    try:
        sink(report)
    except Exception:  # a listener's failure must not fail the tool
        logger.exception("progress sink %r failed", sink)


def current_progress_sink() -> ProgressSink | None:
    """The sink of the call running in this context, to report from another task later."""
    return _sink.get()


@contextmanager
def progress_sink(sink: ProgressSink) -> Iterator[None]:
    """Send the progress reported in this context (the calls run inside it) to `sink`."""
    token = set_progress_sink(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def set_progress_sink(sink: ProgressSink) -> Token[ProgressSink | None]:
    """Install `sink` in the current context; undo with `reset_progress_sink(token)`."""
    return _sink.set(sink)


def reset_progress_sink(token: Token[ProgressSink | None]) -> None:
    _sink.reset(token)
