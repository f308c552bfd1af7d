"""`AgentRunner`: ask the model, run its calls through the executor, append the results,
repeat until the model answers or a budget ends the run.

The runner is a thin driver: the adapter owns the wire (through `toolbridge.formats`),
the `ToolExecutor` owns how calls run (concurrency, timeouts, approval, loop guard,
result caps). Each run gets its own executor and render cache, so one runner serves
concurrent runs. `stream` yields typed events; `run` drains it; `run_sync` is for
scripts. Every run ends with a `RunFinished` carrying an explicit `StopReason`, or
raises a `ModelError` that carries the conversation and the state to resume from.
With a `CallJournal`, a run is kept under a session name: its calls go through the
journal (a call that finished is replayed, never run twice) and its state is saved
once a prompt joins it, before a turn's calls run, after each turn and when the run
stops or pauses, so a process that crashed resumes the conversation where it was.

This module is the turn loop; its pieces live next to it: `model_turn` (one turn of
the model's stream), `eager` (calls started while it streams), `turn_calls` (a turn's
calls and their results), `turn_output` (whether a turn ends the run, the structured
answer), `resume` (decisions on paused calls), `sessions` (where a run's state comes
from), `run_context` (one run's mutable state) and `toolset` (the tools requests carry).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal

from toolbridge.agent.eager import EarlyCalls
from toolbridge.agent.errors import ModelError, ModelResponseError
from toolbridge.agent.events import (
    AgentEvent,
    ModelResponse,
    RunFinished,
    ToolFinished,
    TurnFinished,
)
from toolbridge.agent.messages import AssistantMessage, UserMessage
from toolbridge.agent.model import ModelAdapter, ModelRequest, ModelSettings
from toolbridge.agent.model_turn import model_turn
from toolbridge.agent.output import OutputSpec
from toolbridge.agent.result import RunResult
from toolbridge.agent.resume import resume_turn
from toolbridge.agent.run_context import RunContext
from toolbridge.agent.sendable import sendable_text
from toolbridge.agent.sessions import RunInput, start_state
from toolbridge.agent.state import ApprovalDecision, StopReason, decisions_by_call
from toolbridge.agent.toolset import deferral, native_output_for, registry_of
from toolbridge.agent.tracing import run_tracer
from toolbridge.agent.turn_calls import TurnCalls
from toolbridge.agent.turn_output import AnswerCheck, after_turn
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool
from toolbridge.core.tool_search import DeferralPolicy, ToolSelection
from toolbridge.execution.executor import ExecutionPolicy, ToolExecutor
from toolbridge.execution.outcomes import ToolOutcome
from toolbridge.skills import SkillSet

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal

__all__ = ["AgentRunner"]

logger = logging.getLogger(__name__)

OutputMode = Literal["auto", "native", "tool"]
Decisions = Sequence[ApprovalDecision] | Mapping[str, ApprovalDecision]


class AgentRunner:
    """The agent loop over one model and one registry.

    `model` is a `ModelAdapter` or a ``"provider:model"`` string. `tools` is a
    `ToolRegistry` or tools and plain functions. `skills` adds the SkillSet's summary
    to the instructions and its ``load_skill`` / ``read_skill_file`` tools to the
    tools. Budgets: `max_turns` model turns, `max_tool_calls` calls, `max_total_tokens`
    (from the provider's usage) and `deadline` seconds of wall-clock time per run (it
    bounds waiting for the model and for tool calls: calls still running when it passes
    are cancelled, answered with a ``cancelled`` result, and the run stops with
    `StopReason.DEADLINE`; tools also have their own timeouts in the policy).
    `output_type` (a pydantic model, TypedDict, ...) makes the run end with a validated
    `RunResult.output_value`; `output_mode` says how the model gives it: ``"native"``
    through the provider's structured output (the answer's text is JSON of the type),
    ``"tool"`` through a ``final_result`` tool, ``"auto"`` (the default) natively where
    the adapter supports it for this schema and by the tool otherwise; the model gets
    `output_retries` more tries after a failed one. With OpenTelemetry configured (or
    `tracer_provider` given), a run is an ``invoke_agent`` span with ``chat {model}``
    and ``execute_tool {name}`` children. `eager_tools` starts the turn's leading
    concurrency-safe calls while the model is still streaming the rest of the turn
    (not with `max_tool_calls` or ``fail_on_tool_error``). `tool_search` (True, or a
    `toolbridge.core.tool_search.DeferralPolicy`) defers large tool sets: on a model whose
    provider searches itself (Anthropic, OpenAI Responses) the deferred definitions go
    out marked ``defer_loading`` next to the provider's search tool; elsewhere requests
    carry the always-loaded tools and a ``tool_search`` tool, and what it finds is sent
    at the end of every later request of the run (kept in `RunState.active_tools`).

    With `journal` (a `toolbridge.journal.CallJournal`; the runner then builds each run's
    executor, so not with `executor_factory`), every run is kept under a
    session name (`session`, or ``session=`` per run; default: the registry's context
    session): calls run through the journal and are never run twice, and the run's state
    is saved once a prompt joins it, at each turn boundary and when it stops or pauses.
    ``run(prompt, session=...)`` goes on from the stored conversation (once its last turn
    is answered, which may pause the run first), ``run(None, session=...)`` resumes it as
    it was (after a crash, or with `decisions` after a pause).
    """

    def __init__(
        self,
        model: ModelAdapter | str,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] | None = None,
        *,
        instructions: str | None = None,
        skills: SkillSet | None = None,
        policy: ExecutionPolicy | None = None,
        executor_factory: Callable[[ToolRegistry], ToolExecutor] | None = None,
        settings: ModelSettings | None = None,
        max_turns: int = 50,
        max_tool_calls: int | None = None,
        max_total_tokens: int | None = None,
        deadline: float | None = None,
        output_type: Any = None,
        output_retries: int = 2,
        output_mode: OutputMode = "auto",
        tracer_provider: Any = None,
        eager_tools: bool = False,
        journal: CallJournal | None = None,
        session: str | None = None,
        tool_search: DeferralPolicy | bool = False,
    ) -> None:
        if isinstance(model, str):
            from toolbridge.agent.providers import model_from_string

            model = model_from_string(model)
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if max_tool_calls is not None and max_tool_calls < 0:
            raise ValueError(f"max_tool_calls must be >= 0 or None, got {max_tool_calls}")
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be > 0 seconds or None, got {deadline}")
        if output_retries < 0:
            raise ValueError(f"output_retries must be >= 0, got {output_retries}")
        if journal is not None and executor_factory is not None:
            raise ValueError(
                "give journal= or executor_factory=, not both: with a journal the runner "
                "builds each run's executor itself (ToolExecutor(registry, policy, journal=...))"
            )
        if session is not None and journal is None:
            raise ValueError("session= names a run kept in a journal: give journal= too")
        self.model = model
        registry = registry_of(tools)
        if skills is not None:
            registry = ToolRegistry([*registry, *skills.tools()], context=registry.context)
            summary = skills.summary()
            if summary:
                instructions = f"{instructions}\n\n{summary}" if instructions else summary
        self.output = OutputSpec(output_type) if output_type is not None else None
        self.native_output = native_output_for(self.output, output_mode, model)
        if self.output is not None and self.native_output is None:
            registry = ToolRegistry([*registry, self.output.tool()], context=registry.context)
        self.tool_search = deferral(
            registry, tool_search, skills, self.output, self.native_output, model=model
        )
        if self.tool_search is not None:
            registry = self.tool_search.registry
        self.output_retries = output_retries
        self._answers = (
            AnswerCheck(self.output, native=self.native_output is not None, retries=output_retries)
            if self.output is not None
            else None
        )
        self._calls = TurnCalls(searching=self.tool_search is not None, answers=self._answers)
        self.registry = registry
        self.instructions = sendable_text(instructions) if instructions else instructions
        self.policy = policy or ExecutionPolicy()
        self._executor_factory = executor_factory or (
            lambda r: ToolExecutor(r, self.policy, tracer_provider=tracer_provider)
        )
        self._tracer = run_tracer(tracer_provider)
        self._tracer_provider = tracer_provider
        self.journal = journal
        self.session = session
        # Starting calls early would conflict with a per-run call budget (the turn may
        # turn out to exceed it) and with stop-at-first-failure; both turn it off.
        self.eager_tools = (
            eager_tools
            and max_tool_calls is None
            and self.policy.concurrency
            and not self.policy.fail_on_tool_error
        )
        self.settings = settings or ModelSettings()
        self.max_turns = max_turns
        self.max_tool_calls = max_tool_calls
        self.max_total_tokens = max_total_tokens
        self.deadline = deadline

    # --- entry points ---------------------------------------------------------------------

    async def run(
        self,
        input: RunInput | None = None,
        *,
        decisions: Decisions = (),
        session: str | None = None,
    ) -> RunResult:
        """Run to the end (or a pause) and return the result."""
        result: RunResult | None = None
        async for event in self.stream(input, decisions=decisions, session=session):
            if isinstance(event, RunFinished):
                result = event.result
        assert result is not None, "stream() always ends with RunFinished or raises"
        return result

    def run_sync(
        self,
        input: RunInput | None = None,
        *,
        decisions: Decisions = (),
        session: str | None = None,
    ) -> RunResult:
        """`run` for scripts: runs its own event loop (not from inside one)."""
        return asyncio.run(self.run(input, decisions=decisions, session=session))

    async def stream(
        self,
        input: RunInput | None = None,
        *,
        decisions: Decisions = (),
        session: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run and yield every event; the last one is `RunFinished`.

        `input` is a prompt, a conversation (a list of messages), or a `RunState` to
        continue (a paused run with `decisions` for its pending calls, or a finished
        one followed by a new `UserMessage` added to its conversation). With a journal,
        a prompt goes on from the session's stored run and None resumes that run as it
        stands (see the class); `session` overrides the runner's session name.
        """
        if session is not None and self.journal is None:
            raise ValueError("session= names a run kept in a journal: AgentRunner(journal=...)")
        name = session or self.session or self.registry.context.session
        journal = self.journal
        if journal is None:
            async with aclosing(self._stream(input, decisions, name)) as events:
                async for event in events:
                    yield event
            return
        # One run of a session at a time: two would each save their turns over the other's
        # (and both decide its paused calls). `SessionInUse` for the second.
        await journal.hold_session(name)
        try:
            async with aclosing(self._stream(input, decisions, name)) as events:
                async for event in events:
                    yield event
        finally:
            journal.release_session(name)

    async def _stream(
        self, input: RunInput | None, decisions: Decisions, name: str
    ) -> AsyncGenerator[AgentEvent, None]:
        """`stream` of the session `name` (held, for a journaled run)."""
        state = await start_state(self.journal, input, name)
        run = RunContext(
            state,
            self._executor_for(name),
            self.journal,
            name,
            deadline=self.deadline,
            tracer=self._tracer,
        )
        tracer = self._tracer
        if tracer is not None:
            run.span = tracer.start_run(self.model.format, self.model.model)
        error: BaseException | None = None
        try:
            if state.pending or state.unanswered():
                stop = None
                resuming = resume_turn(run, decisions_by_call(decisions), self._calls)
                async with aclosing(resuming):  # closing the run cancels its running calls
                    async for event in resuming:
                        if isinstance(event, StopReason):
                            stop = event
                        else:
                            yield event
                if stop is not None:
                    yield await self._finished(run, stop)
                    return
            elif decisions:
                raise ValueError("decisions were given, but the run has no pending calls")
            if state.prompts:  # the last turn is answered: the prompts sent meanwhile follow
                state.conversation.extend(UserMessage(prompt) for prompt in state.prompts)
                state.prompts = []
            if isinstance(input, str):  # the prompt is kept before the model is asked: a
                await run.save()  # crash or a model error while it answers loses nothing
            async with aclosing(self._loop(run)) as events:
                async for event in events:
                    yield event
        except ModelError as exc:
            exc.conversation = list(run.conversation)
            exc.state = run.state
            error = exc
            raise
        except BaseException as exc:  # recorded on the span, then re-raised
            if not isinstance(exc, GeneratorExit):  # the consumer stopped early
                error = exc
            raise
        finally:
            if tracer is not None:
                reason = run.stop.value if run.stop is not None else None
                tracer.end(run.span, run.state.usage, stop_reason=reason, error=error)
            await asyncio.shield(run.executor.aclose())  # the run's exec sessions end with it

    # --- the loop -------------------------------------------------------------------------

    def _executor_for(self, session: str) -> ToolExecutor:
        if self.journal is None:
            return self._executor_factory(self.registry)
        from toolbridge.journal.recorder import CallRecorder

        recorder = CallRecorder(self.journal, session)
        return ToolExecutor(
            self.registry, self.policy, journal=recorder, tracer_provider=self._tracer_provider
        )

    async def _loop(self, run: RunContext) -> AsyncGenerator[AgentEvent, None]:
        state = run.state
        while True:
            if state.turns >= self.max_turns:
                yield await self._finished(run, StopReason.MAX_TURNS)
                return
            remaining = run.remaining()
            if remaining is not None and remaining <= 0:
                yield await self._finished(run, StopReason.DEADLINE)
                return
            turn = state.turns + 1  # counted once the model answered
            response: ModelResponse | None = None
            early = EarlyCalls(self.registry, run) if self.eager_tools else None
            ran: dict[str, ToolOutcome] = {}
            source = model_turn(run, self.model, self._request(run, turn))
            if early is not None:
                source = early.during(source, turn)
            async with aclosing(source) as events:
                async for event in events:
                    if isinstance(event, ModelResponse):
                        response = event
                    elif event is None:  # the deadline passed while the model streamed
                        yield await self._finished(run, StopReason.DEADLINE)
                        return
                    else:
                        yield event
            if response is not None and response.message.truncated and early is not None:
                ran = await early.cancel()  # finished ones keep their results
                for call_id, outcome in ran.items():
                    if call_id not in early.outcomes:
                        yield ToolFinished(outcome, turn)
            if response is None:
                raise ModelResponseError(
                    f"the model adapter {type(self.model).__name__} ended turn {turn} "
                    "without a ModelResponse"
                )
            message, usage = response.message, response.usage
            state.turns = turn
            state.conversation.append(message)
            state.usage = state.usage + usage
            stop = after_turn(
                run, message, ran, max_tool_calls=self.max_tool_calls, answers=self._answers
            )
            if stop is None and message.calls:
                async with aclosing(self._calls.run(run, turn, message.calls, early)) as steps:
                    async for step in steps:
                        if isinstance(step, StopReason):
                            stop = step
                        else:
                            yield step
            limit = self.max_total_tokens
            if stop is None and limit is not None and state.usage.total_tokens >= limit:
                stop = StopReason.TOKEN_BUDGET
            if stop is None:
                await run.save()  # a turn boundary: a crash from here asks the model next
            yield TurnFinished(turn, message, usage)
            if stop is not None:
                yield await self._finished(run, stop)
                return

    def _request(self, run: RunContext, turn: int) -> ModelRequest:
        """What the model is asked in `turn`: the conversation so far, the tools the run
        sends now (with a tool search, the loaded ones and what searches found)."""
        tools: ToolRegistry | ToolSelection = self.registry
        if self.tool_search is not None:
            tools = self.tool_search.select(run.state.active_tools)
        return ModelRequest(
            self.instructions,
            run.sendable(run.conversation),
            tools,
            self.settings,
            run.cache,
            turn,
            run.state.id_salt,
            output=self.native_output,
        )

    async def _finished(self, run: RunContext, stop: StopReason) -> RunFinished:
        """The run's last event, once its state is saved (a journaled run)."""
        await run.save()
        return RunFinished(self._result(run, stop))

    def _result(self, run: RunContext, stop: StopReason) -> RunResult:
        state = run.state
        last = next(
            (m for m in reversed(state.conversation) if isinstance(m, AssistantMessage)), None
        )
        snapshot = state.copy()
        run.stop = stop
        logger.debug("run stopped: %s after %d turns", stop, state.turns)
        return RunResult(
            output=last.text if last is not None else "",
            stop_reason=stop,
            conversation=list(state.conversation),
            usage=state.usage,
            turns=state.turns,
            tool_calls=state.tool_calls,
            state=snapshot,
            pending=tuple(state.pending),
            output_value=run.output_value,
        )
