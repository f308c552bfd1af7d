"""Progress of a running tool call: `report_progress` from inside a tool, a sink outside.

A tool (or the MCP client relaying a server's progress notifications) calls
`report_progress`; whoever runs the call - the executor, when it has event
listeners, or the MCP server answering a client - installs a sink for the call
with `progress_sink`. Without a sink, a report costs one context-variable read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass

__all__ = [
    "ProgressSink",
    "ToolProgress",
    "current_progress_sink",
    "progress_sink",
    "report_progress",
    "reset_progress_sink",
    "set_progress_sink",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """How far a call has come: `progress` of `total` (if known), with an optional message."""

    progress: float
    total: float | None = None
    message: str | None = None


ProgressSink = Callable[[ToolProgress], None]

_sink: ContextVar[ProgressSink | None] = ContextVar("toolbridge_progress_sink", default=None)


def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Report the running call's progress to whoever runs it; a no-op when nobody listens."""
    sink = _sink.get()
    if sink is None:
        return
    try:
        sink(ToolProgress(progress, total, message))
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
