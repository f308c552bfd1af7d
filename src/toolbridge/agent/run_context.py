"""`RunContext`: the mutable state of one run while it runs, never shared between runs.

It holds the run's `RunState`, its own executor and render cache, its clock against the
runner's deadline and its tracing span, so each piece of the loop (the model turn, early
calls, a turn's calls, resuming) works on the run it is given, and one runner serves
concurrent runs. A journaled run saves its state through it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolbridge.agent.messages import Message
from toolbridge.agent.model import RenderCache
from toolbridge.agent.sendable import Sendable
from toolbridge.agent.state import JsonCache, RunState, StopReason
from toolbridge.agent.tracing import RunTracer
from toolbridge.core.calls import ToolCallRequest
from toolbridge.execution.executor import ToolExecutor
from toolbridge.execution.outcomes import Outcomes, ToolOutcome

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal

__all__ = ["RunContext"]


class RunContext:
    """The mutable state of one run (never shared between runs)."""

    def __init__(
        self,
        state: RunState,
        executor: ToolExecutor,
        journal: CallJournal | None = None,
        session: str = "",
        *,
        deadline: float | None = None,
        tracer: RunTracer | None = None,
    ) -> None:
        self.state = state
        self.executor = executor
        self.journal = journal
        self.session = session
        self.deadline = deadline
        self.tracer = tracer
        self.saved: JsonCache = {}  # the messages' JSON, converted once per run
        self.cache = RenderCache()
        self.sendable = Sendable()  # a lone surrogate from the model cannot be sent
        self.started = time.monotonic()
        self.output_value: Any = None
        self.output_failures = 0
        self.span: Any = None
        self.stop: StopReason | None = None

    async def save(self) -> None:
        """Store the state under the run's session (a journaled run; else nothing)."""
        if self.journal is not None:
            await self.journal.save_run(self.session, self.state.to_json(cache=self.saved))

    @property
    def conversation(self) -> list[Message]:
        return self.state.conversation

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (None: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - (time.monotonic() - self.started)

    async def execute(
        self, calls: Sequence[ToolCallRequest], into: Outcomes | None = None
    ) -> list[ToolOutcome]:
        """The executor's outcomes for `calls`, with the run's span current if tracing
        (`into` holds them, cancelled ones included, when the call is cancelled)."""
        if self.tracer is None:
            return list(await self.executor.run(calls, into=into))
        return list(
            await self.tracer.within(self.span, lambda: self.executor.run(calls, into=into))
        )
