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
    ToolStarted,
    TurnFinished,
)
from toolbridge.agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultsMessage,
    ToolReturn,
    UserMessage,
)
from toolbridge.agent.model import (
    ModelAdapter,
    ModelRequest,
    ModelSettings,
    NativeOutput,
    native_output_supported,
)
from toolbridge.agent.model_turn import model_turn
from toolbridge.agent.output import OutputSpec
from toolbridge.agent.result import RunResult
from toolbridge.agent.run_context import RunContext
from toolbridge.agent.state import (
    ApprovalDecision,
    PendingCall,
    RunState,
    StopReason,
    decisions_by_call,
)
from toolbridge.agent.tracing import run_tracer
from toolbridge.agent.turn_output import AnswerCheck, after_turn
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.function_tool import tool as function_tool
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool, ToolResult
from toolbridge.core.tool_search import (
    SEARCH_TOOL_NAME,
    DeferralPolicy,
    ToolDeferral,
    ToolSelection,
    found_tools,
    native_search_supported,
)
from toolbridge.execution.executor import ExecutionPolicy, ToolExecutor, duplicate_id_error
from toolbridge.execution.outcomes import (
    EventType,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
    failed_outcome,
)
from toolbridge.skills import SkillSet

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal

__all__ = ["AgentRunner"]

logger = logging.getLogger(__name__)

RunInput = str | Sequence[Message] | RunState
OutputMode = Literal["auto", "native", "tool"]
Decisions = Sequence[ApprovalDecision] | Mapping[str, ApprovalDecision]


def _registry_of(tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] | None) -> ToolRegistry:
    if tools is None:
        return ToolRegistry()
    if isinstance(tools, ToolRegistry):
        return tools
    items: list[Tool] = []
    for item in tools:
        if isinstance(item, Tool):
            items.append(item)
        elif callable(item):
            items.append(function_tool(item))
        else:
            raise TypeError(
                f"tools must be a ToolRegistry or Tool objects and functions, got "
                f"{type(item).__name__}"
            )
    return ToolRegistry(items)


def _deferral(
    registry: ToolRegistry,
    option: DeferralPolicy | bool,
    skills: SkillSet | None,
    output: OutputSpec | None,
    native: NativeOutput | None,
    *,
    model: ModelAdapter,
) -> ToolDeferral | None:
    """The run's tool search under `option` (None: off); the skill tools and the
    ``final_result`` tool are always sent. The policy's mode picks the provider's own
    search (where `model` has it) or the local ``tool_search`` tool."""
    if option is False:
        return None
    if option is True:
        option = DeferralPolicy()
    if not isinstance(option, DeferralPolicy):
        raise TypeError(f"tool_search must be True, False or a DeferralPolicy, got {option!r}")
    keep = [tool.name for tool in skills.tools()] if skills is not None else []
    if output is not None and native is None:
        keep.append(output.tool_name)
    supported = native_search_supported(model)
    if option.mode == "native" and not supported:
        raise ValueError(
            f"DeferralPolicy(mode='native'), but {type(model).__name__} ({model.model}) has "
            "no provider tool search; use mode='auto' or 'local'"
        )
    return ToolDeferral(registry, option, keep=keep, native=option.mode != "local" and supported)


def _in_call_order(
    calls: Sequence[ToolCallRequest], settled: Sequence[ToolReturn]
) -> tuple[ToolReturn, ...]:
    """Each call's own result, in call order. Matched by call, not only by id: two calls
    sharing an id (the second refused) each keep their own result."""
    by_id: dict[str, list[ToolReturn]] = {}
    for ret in settled:
        by_id.setdefault(ret.call.id, []).append(ret)
    results = []
    for call in calls:
        candidates = by_id.get(call.id)
        if not candidates:
            continue
        match = next((ret for ret in candidates if ret.call == call), candidates[0])
        candidates.remove(match)
        results.append(match)
    return tuple(results)


BY_JOURNAL = "journal"
"""Approves a pending call the journal already holds (it replays; nothing is stored)."""


def _retry_denied(pending: PendingCall, reason: str) -> ToolReturn:
    """The answer to an interrupted call whose retry the user denied: it stays interrupted."""
    because = f" ({reason})" if reason else ""
    error = ToolError(
        ErrorKind.INTERRUPTED,
        f"the call to {pending.tool_name!r} was interrupted before it finished (the process "
        f"running it stopped), and it may have partly run; the user chose not to run it "
        f"again{because}.",
        "Check its effects before calling it again.",
    )
    return ToolReturn(pending.call, ToolResult.error(error))


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
        registry = _registry_of(tools)
        if skills is not None:
            registry = ToolRegistry([*registry, *skills.tools()], context=registry.context)
            summary = skills.summary()
            if summary:
                instructions = f"{instructions}\n\n{summary}" if instructions else summary
        self.output = OutputSpec(output_type) if output_type is not None else None
        self.native_output = self._native_output(output_mode)
        if self.output is not None and self.native_output is None:
            registry = ToolRegistry([*registry, self.output.tool()], context=registry.context)
        self.tool_search = _deferral(
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
        self.registry = registry
        self.instructions = instructions
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

    def _native_output(self, mode: str) -> NativeOutput | None:
        """The schema to send natively under `mode`, or None for the ``final_result`` tool."""
        if mode not in ("auto", "native", "tool"):
            raise ValueError(f"output_mode must be 'auto', 'native' or 'tool', got {mode!r}")
        if self.output is None or mode == "tool":
            return None
        native = self.output.native
        if native_output_supported(self.model, native):
            return native
        if mode == "native":
            why = f" ({native.closed_problem})" if native.closed_problem else ""
            raise ValueError(
                f"output_mode='native', but {type(self.model).__name__} has no native "
                f"structured output for this output type{why}; use output_mode='auto' or "
                "'tool' to answer through the final_result tool"
            )
        return None

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
        state = await self._start(input, name)
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
                resuming = self._resume_turn(run, decisions_by_call(decisions))
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

    async def _start(self, input: RunInput | None, session: str) -> RunState:
        """The state a run starts from: with a journal, a prompt joins the session's stored
        run (once its last turn is answered) and None resumes that run as it stands."""
        stored = None
        if self.journal is not None and (input is None or isinstance(input, str)):
            data = await self.journal.load_run(session)
            try:
                stored = RunState.from_json(data) if data is not None else None
            except ValueError as exc:
                raise ValueError(
                    f"the run stored for session {session!r} cannot be resumed ({exc}); "
                    "go on under another session name"
                ) from None
        if input is None:
            if self.journal is None:
                raise ValueError(
                    "input is None: give a prompt, a conversation or a RunState (None "
                    "resumes a session's stored run, with journal=)"
                )
            if stored is None:
                raise ValueError(f"nothing to resume: no run is stored for session {session!r}")
            last = stored.conversation[-1] if stored.conversation else None
            if isinstance(last, AssistantMessage) and not last.calls:
                raise ValueError(
                    f"the run of session {session!r} ended with the model's answer: there is "
                    "nothing to resume; send a prompt to go on"
                )
            return stored
        if isinstance(input, str) and stored is not None:
            stored.prompts.append(input)
            return stored
        return self._initial_state(input)

    def _initial_state(self, input: RunInput) -> RunState:
        if isinstance(input, RunState):
            return input.copy()
        if isinstance(input, str):
            return RunState([UserMessage(input)])
        conversation = list(input)
        for message in conversation:
            if not isinstance(
                message, SystemMessage | UserMessage | AssistantMessage | ToolResultsMessage
            ):
                raise TypeError(
                    "a conversation is a list of SystemMessage, UserMessage, AssistantMessage "
                    f"and ToolResultsMessage, got {type(message).__name__}"
                )
        return RunState(conversation)

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
                async with aclosing(self._tools(run, turn, message.calls, early)) as steps:
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

    async def _tools(
        self,
        run: RunContext,
        turn: int,
        calls: Sequence[ToolCallRequest],
        early: EarlyCalls | None = None,
    ) -> AsyncGenerator[AgentEvent | StopReason, None]:
        """Run one turn's calls; append their results, or pause on pending approvals.

        Calls started early (`eager_tools`) are awaited first (their `ToolFinished` as each
        ends), so the rest of the turn starts after them, as within one executor batch.
        """
        state = run.state
        state.tool_calls += len(calls)
        await run.save()  # the turn is durable before its calls run: a crash resumes them
        started: dict[str, ToolOutcome] = {}
        if early is not None:
            try:
                async with aclosing(early.finished(turn)) as finishes:
                    async for finished in finishes:
                        yield finished
            except BaseException:  # the run was closed or cancelled: stop the early calls
                await early.cancel()
                raise
            started = early.outcomes
        # By position: a call sharing the id of a call started early is refused, as the
        # executor refuses one sharing an id within its batch (never the other's result).
        early_at = {}
        for position, call in enumerate(calls):
            outcome = started.get(call.id)
            if outcome is not None and call.id not in early_at and outcome.call == call:
                early_at[call.id] = position
        given: dict[int, ToolOutcome] = {i: started[calls[i].id] for i in early_at.values()}
        rest = []
        for position, call in enumerate(calls):
            if position in given:
                continue
            if call.id in early_at:
                first = early_at[call.id]
                error = duplicate_id_error(call.id, first, calls[first].name)
                given[position] = failed_outcome(call, error, ())
                yield ToolStarted(call, turn)
                yield ToolFinished(given[position], turn)
                continue
            rest.append(call)
        ran: list[ToolOutcome] = []
        if rest:
            async with aclosing(self._live(run, turn, rest, ran)) as events:
                async for event in events:
                    yield event
        later = iter(ran)
        outcomes = [given[i] if i in given else next(later) for i in range(len(calls))]
        stop = self._settle(run, calls, outcomes)
        if stop is not None:
            yield stop

    async def _live(
        self, run: RunContext, turn: int, calls: Sequence[ToolCallRequest], into: list[ToolOutcome]
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run `calls` through the executor's event stream: yield `ToolStarted` as each call
        starts and `ToolFinished` as it finishes, then fill `into` with the outcomes in
        call order. A call settled without running (invalid, pending approval) gets its
        `ToolStarted` just before its `ToolFinished`. Closing this generator cancels the
        calls still running.
        """
        batch = run.executor.batch(calls)
        events = aiter(batch.stream())
        started: set[int] = set()  # id() of the call objects already announced
        finished: set[int] = set()
        tracer = self._tracer
        try:
            while True:
                if tracer is not None:
                    # The batch's task starts on the first read: it inherits the run's span.
                    event = await tracer.within(run.span, lambda: self._next(run, events))
                    tracer = None
                else:
                    event = await self._next(run, events)
                if event is None:
                    break
                if event.type is EventType.CALL_STARTED:
                    started.add(id(event.call))
                    yield ToolStarted(event.call, turn)
                elif event.type is EventType.CALL_FINISHED and event.outcome is not None:
                    if id(event.call) not in started:
                        started.add(id(event.call))
                        yield ToolStarted(event.call, turn)
                    finished.add(id(event.call))
                    yield ToolFinished(event.outcome, turn)
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()  # stops the batch: a call still running is cancelled
        if len(batch.finished) < len(calls):  # stopped before its task began (deadline)
            batch._cancel_rest()
        into[:] = batch.finished
        for outcome in into:  # cancelled at the deadline: announced, so every call ends
            if id(outcome.call) not in finished:
                if id(outcome.call) not in started:
                    yield ToolStarted(outcome.call, turn)
                yield ToolFinished(outcome, turn)

    async def _next(self, run: RunContext, events: AsyncIterator[ToolEvent]) -> ToolEvent | None:
        """The batch's next event; None at its end, or when the run's deadline passed
        first (the calls still running are then cancelled, when `events` is closed)."""
        remaining = run.remaining()
        if remaining is None:
            return await anext(events, None)
        try:
            return await asyncio.wait_for(anext(events, None), max(remaining, 0))
        except TimeoutError:
            left = run.remaining()
            if left is not None and left <= 0:
                logger.info("run deadline reached while tool calls ran")
                return None
            raise

    def _settle(
        self, run: RunContext, calls: Sequence[ToolCallRequest], outcomes: Sequence[ToolOutcome]
    ) -> StopReason | None:
        """File a batch's outcomes: pending ones (waiting for an approval, or interrupted
        ones the user may retry) pause the run, the rest join `settled`; once nothing is
        pending the turn's results go into the conversation in call order."""
        state = run.state
        for outcome in outcomes:
            request = outcome.approval
            if request is not None and (
                outcome.status is OutcomeStatus.PENDING_APPROVAL or request.retry
            ):
                state.pending.append(PendingCall.from_request(outcome.call, request))
            else:
                state.settled.append(ToolReturn(outcome.call, outcome.result))
        if state.pending:
            return StopReason.APPROVAL_REQUIRED
        last = state.conversation[-1]
        assert isinstance(last, AssistantMessage)
        results = _in_call_order(last.calls, state.settled)
        state.conversation.append(ToolResultsMessage(results))
        state.settled = []
        if self.tool_search is not None:
            for ret in results:  # what a search found is sent from the next request on
                if ret.call.name == SEARCH_TOOL_NAME:
                    new = [n for n in found_tools(ret.result) if n not in state.active_tools]
                    state.active_tools.extend(dict.fromkeys(new))
        if any(outcome.fatal for outcome in outcomes):
            return StopReason.TOOL_ERROR
        if self._answers is not None:
            return self._answers.final_result(run, results)
        return None

    async def _resume_turn(
        self, run: RunContext, decisions: dict[str, ApprovalDecision]
    ) -> AsyncGenerator[AgentEvent | StopReason, None]:
        """Finish the last turn: apply the decisions to its pending calls, then run the
        decided ones with any call that never got a result (a journaled run that crashed
        mid-turn: what finished replays from the journal).

        A pending call the journal already holds was approved in an earlier process (it
        got that far): it is not asked about again, its journal entry answers it. A denied
        retry answers with the call's interrupted error.
        """
        state = run.state
        pending_ids = {pending.call.id for pending in state.pending}
        unknown = sorted(set(decisions) - pending_ids)
        if unknown:
            raise ValueError(
                f"decisions for calls that are not pending: {unknown}; pending: "
                f"{sorted(pending_ids)}"
            )
        while True:
            waiting: list[PendingCall] = []
            for pending in state.pending:
                decision = decisions.pop(pending.call.id, None)
                if decision is None and await self._journaled(run, pending):
                    decision = pending.approve(by=BY_JOURNAL)
                if decision is None:
                    waiting.append(pending)
                    continue
                if decision.digest != pending.digest:
                    raise ValueError(
                        f"the decision for call {pending.call.id!r} was made for other "
                        "arguments (digest mismatch); show the user the pending call again "
                        "and decide anew"
                    )
                if decision.approved:
                    run.executor.approve(pending.outcome(), by=decision.by)
                elif pending.retry:
                    state.settled.append(_retry_denied(pending, decision.reason))
                else:
                    run.executor.deny(pending.outcome(), decision.reason)
            state.pending = waiting
            calls = state.unanswered()
            if not calls and waiting:
                yield StopReason.APPROVAL_REQUIRED
                return
            outcomes: list[ToolOutcome] = []
            if calls:
                async with aclosing(self._live(run, state.turns, calls, outcomes)) as events:
                    async for event in events:
                        yield event
            stop = self._settle(run, calls, outcomes)
            # A call that waits now (it was cut off before its approval was asked for) and
            # that the journal holds is answered from it in another round, unasked.
            if not any([await self._journaled(run, pending) for pending in state.pending]):
                if stop is not None:
                    yield stop
                return

    async def _journaled(self, run: RunContext, pending: PendingCall) -> bool:
        """Whether the journal holds this (not interrupted) call: it passed its approval in
        an earlier process, so it replays instead of being asked about again."""
        if run.journal is None or pending.retry:
            return False
        from toolbridge.journal import CallKey

        key = CallKey(run.session, pending.call.id, pending.digest)
        return await run.journal.entry(key) is not None

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
