"""``toolbridge agent``: run the agent loop over the workspace's tools from the terminal
(the command and its options are `toolbridge.cli.agent_command`, which loads this).

Streams the answer, shows each call and its outcome as it happens, asks before every
call of a tool that is not read-only (``--yes`` approves them all), prints the usage
at the end. ``--json`` prints every event as one JSON line instead. Without a prompt
it is an interactive session that keeps its history. A missing key, SDK or server is
one line, not a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import typer

from toolbridge.agent import (
    AgentEvent,
    AgentRunner,
    ApprovalDecision,
    ModelAdapter,
    ModelConnectionError,
    ModelError,
    ReasoningDelta,
    RunFinished,
    RunResult,
    RunState,
    StopReason,
    TextDelta,
    ToolCallReady,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    UserMessage,
    model_from_string,
)
from toolbridge.agent.state import PendingCall
from toolbridge.cli.agent_options import AgentOptions, endpoint_setting
from toolbridge.cli.app import (
    CliError,
    ExitCode,
    err,
    one_line,
    out,
    reporting,
)
from toolbridge.cli.approval import (
    BY_YES_FLAG,
    NON_INTERACTIVE_DENIAL,
    RETRY_NOT_ASKED,
    RETRY_QUESTION,
    prompt_approver,
)
from toolbridge.cli.display import clean, echo_json, show
from toolbridge.cli.loading import LoadOptions, load_tools
from toolbridge.cli.prompt import ask_line, confirm
from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.jsontext import json_default, to_json_text
from toolbridge.core.registry import ToolRegistry
from toolbridge.execution.approval import writes_need_approval
from toolbridge.execution.executor import ExecutionPolicy
from toolbridge.execution.outcomes import OutcomeStatus
from toolbridge.journal import CallJournal, JournalError, SQLiteJournal
from toolbridge.security.control import ControlFolderViolation, open_control_file
from toolbridge.security.terminal import escape_invisible
from toolbridge.skills import SkillSet

__all__ = ["event_json", "run_agent"]

INSTRUCTIONS = (
    "You are a careful assistant working in the user's workspace through tools. "
    "Use the tools to look before you change anything, and say what you did."
)


def _model(model: str, base_url: str | None) -> ModelAdapter:
    """The adapter for ``--model``; a `CliError` for an unknown provider, a missing SDK
    or a key the SDK refuses (a missing one was found before: `agent_command`)."""
    try:
        return model_from_string(model, base_url=base_url)
    except (ValueError, ImportError, ModelError) as exc:
        raise CliError(str(exc)) from None


def _endpoint(adapter: object, base_url: str | None) -> str:
    """The URL the model is asked at: `base_url`, else the SDK client's own."""
    if base_url is not None:
        return base_url
    client = getattr(adapter, "client", None)
    url = getattr(client, "base_url", None) or getattr(
        getattr(client, "_client", None), "base_url", None
    )
    return str(url) if url else "the provider's default endpoint"


def _unreached(exc: ModelConnectionError, adapter: object, model: str, base_url: str | None) -> str:
    """The one line for a model server that cannot be reached: the SDK's words, where
    it was asked, and what set that URL (`endpoint_setting`)."""
    text = str(exc)
    stop = "" if text.endswith((".", "!", "?")) else "."  # 'All connection attempts failed'
    where, setting = _endpoint(adapter, base_url), endpoint_setting(model, base_url)
    return one_line(f"Error: {text}{stop} Is it running at {where}? Check {setting} and --model.")


def event_json(event: AgentEvent) -> dict[str, Any]:
    """One event as the JSON object ``--json`` prints."""
    data: dict[str, Any] = {"type": event.type}
    if isinstance(event, TextDelta | ReasoningDelta):
        data.update(text=event.text, turn=event.turn)
    elif isinstance(event, ToolCallReady | ToolStarted):
        call = event.call
        data.update(turn=event.turn, id=call.id, name=call.name, arguments=call.arguments)
    elif isinstance(event, ToolFinished):
        outcome = event.outcome
        data.update(
            turn=event.turn,
            id=outcome.call.id,
            name=outcome.call.name,
            status=outcome.status.value,
            error_kind=outcome.kind.value if outcome.kind is not None else None,
            result=outcome.result.text,
        )
    elif isinstance(event, TurnFinished):
        data.update(turn=event.turn, usage=event.usage.to_json())
    elif isinstance(event, RunFinished):
        result = event.result
        data.update(
            stop_reason=result.stop_reason.value,
            output=result.output,
            turns=result.turns,
            tool_calls=result.tool_calls,
            usage=result.usage.to_json(),
            pending=[
                {
                    "id": p.call.id,
                    "name": p.tool_name,
                    "arguments": dict(p.arguments),
                    "retry": p.retry,
                }
                for p in result.pending
            ],
        )
    return data


class _Printer:
    """Shows events as they come: the answer on stdout, calls and status on stderr (or
    each event as a JSON line on stdout, with ``--json``).

    A call that asks for approval is shown once, in every output mode. When the command
    answers the run's pauses (`answers_pauses`: always on the text output, with
    ``--yes`` on ``--json``), the run pauses on such a call (its ``pending_approval``
    outcome and a summary) and goes on: the pause is not shown, the call is when it
    runs. So the start of a call that may ask (with `registry`: every tool that writes,
    the agent's rule) is held until its outcome, unless the command approved it
    (`approved`): then it is shown as it starts. Without answers the pause is the end
    of the run, and ``--json`` shows it as it is.
    """

    def __init__(
        self, as_json: bool, registry: ToolRegistry | None = None, answers_pauses: bool = True
    ) -> None:
        self.as_json = as_json
        self._registry = registry
        self._answers = answers_pauses
        self._midline = False
        self._held: dict[str, ToolStarted] = {}  # call id -> start of a call that may ask
        self._approved: set[str] = set()  # call ids approved here, to show as they start

    def approved(self, call_ids: Iterable[str]) -> None:
        """These calls were approved: show them as they start."""
        self._approved.update(call_ids)

    def _may_ask(self, event: ToolStarted) -> bool:
        if event.call.id in self._approved:
            return False
        tool = self._registry.get(event.call.name) if self._registry is not None else None
        return tool is not None and writes_need_approval(tool, {})

    def show(self, event: AgentEvent) -> None:
        if not self._answers:
            self._emit(event)
            return
        if isinstance(event, ToolStarted) and self._may_ask(event):
            self._held[event.call.id] = event  # shown with its outcome, unless a pause
            return
        if isinstance(event, ToolFinished):
            start = self._held.pop(event.outcome.call.id, None)
            if event.outcome.status is OutcomeStatus.PENDING_APPROVAL:
                return  # the question shows the call
            if start is not None:
                self._emit(start)
        if isinstance(event, RunFinished):
            self._held.clear()
            if event.result.stop_reason is StopReason.APPROVAL_REQUIRED:
                return  # the run goes on once the questions are answered
        self._emit(event)

    def _emit(self, event: AgentEvent) -> None:
        if self.as_json:
            echo_json(event_json(event), default=json_default)
        else:
            self._show(event)

    def _show(self, event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            show(out, event.text, end="")
            self._midline = not event.text.endswith("\n")
            return
        if self._midline:
            out.print()
            self._midline = False
        if isinstance(event, ToolStarted):
            arguments = event.call.arguments
            shown = arguments if isinstance(arguments, str) else to_json_text(arguments)
            show(err, (f"-> {event.call.name}({shown[:200]})", "dim"))
        elif isinstance(event, ToolFinished):
            outcome = event.outcome
            color = "green" if outcome.ok else "yellow"
            first = outcome.result.text.split("\n", 1)[0][:200]
            show(
                err, (f"<- {outcome.call.name}: {outcome.status.value}", color), " ", (first, "dim")
            )
        elif isinstance(event, RunFinished):
            usage = event.result.usage
            err.print(
                f"[dim]{event.result.stop_reason.value}: {event.result.turns} turns, "
                f"{event.result.tool_calls} tool calls, {usage.input_tokens} in / "
                f"{usage.output_tokens} out tokens[/dim]"
            )


@contextlib.contextmanager
def _spinner(enabled: bool) -> Iterator[None]:
    """A spinner on stderr while the model thinks, when stderr is a terminal (it is
    erased when the next event comes)."""
    if not enabled:
        yield
        return
    with err.status("thinking", spinner="dots"):
        yield


async def _events(stream: AsyncIterator[AgentEvent], spin: bool) -> AsyncIterator[AgentEvent]:
    """`stream`, with a spinner while the model is asked (before a turn's first event)."""
    thinking = True  # the run starts with a request to the model
    while True:
        with _spinner(spin and thinking):
            event = await anext(stream, None)
        if event is None:
            return
        yield event
        thinking = isinstance(event, ToolFinished | TurnFinished)


@contextlib.contextmanager
def _own_folder() -> Iterator[None]:
    """A planted link (or a stranger's file) in ``.toolbridge/`` is one ``Error:`` line
    saying what to remove (exit 3), not an internal error."""
    try:
        yield
    except ControlFolderViolation as exc:
        raise CliError(exc.message, ExitCode.CONFIG) from None


@contextlib.contextmanager
def _session_held(root: Path, session: str) -> Iterator[None]:
    """Hold `session` for this command, or refuse: two commands going on from one stored
    run would each save their own turns over the other's (and both decide its paused
    calls). One lock byte per session name in ``.toolbridge/agent-sessions.lock``; the
    system releases it when the process ends, even killed. Opened without following a
    link (`open_control_file`): a planted one is refused, never written through."""
    fd = open_control_file(root, "agent-sessions.lock", os.O_RDWR | os.O_CREAT)
    offset = int.from_bytes(hashlib.sha256(session.encode()).digest()[:4], "big") >> 1
    with os.fdopen(fd, "r+b") as file:
        try:
            fcntl.lockf(file, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        except OSError:
            raise CliError(
                f"session {session!r} is in use by another toolbridge agent in this "
                "workspace; wait for it to end, or use another --session"
            ) from None
        yield


def _read_prompt() -> str | None:
    """The next line of an interactive session, None at the end of input. It blocks the
    event loop on purpose: nothing runs between turns, and Ctrl-C ends the wait at any
    moment (`ask_line`). The ``> `` prompt is for a person: with lines piped in, stdout
    holds the answers only."""
    return ask_line("> " if sys.stdin.isatty() else "")


def _decide(pending: tuple[PendingCall, ...], yes: bool) -> list[ApprovalDecision]:
    """Ask about each pending call (``--yes`` approves them all but retries, which only a
    person at a terminal approves: the call may have partly run). Without a terminal
    nobody can be asked: the call is denied, as ``toolbridge call`` denies it."""
    decisions = []
    interactive = sys.stdin.isatty()
    for call in pending:
        if yes and not call.retry:
            decisions.append(call.approve(by=BY_YES_FLAG))
            continue
        if not interactive:
            decisions.append(call.deny(RETRY_NOT_ASKED if call.retry else NON_INTERACTIVE_DENIAL))
            continue
        shown = escape_invisible(json.dumps(dict(call.arguments), ensure_ascii=False))
        if call.retry:
            show(
                err,
                f"{call.tool_name}({shown}) was interrupted before it finished: "
                "it may have partly run.",
            )
            question = RETRY_QUESTION
        else:
            question = clean(f"Allow {call.tool_name}({shown})?")
        if confirm(question):
            decisions.append(call.approve(by=prompt_approver()))
        else:
            decisions.append(call.deny("the user declined this call"))
    return decisions


async def _turn(
    runner: AgentRunner, input: str | RunState, printer: _Printer, yes: bool, as_json: bool
) -> RunResult:
    """One prompt to its end, answering approval pauses on the way."""
    decisions: list[ApprovalDecision] = []
    current: str | RunState = input
    spin = not as_json and err.is_terminal
    while True:
        result: RunResult | None = None
        async for event in _events(aiter(runner.stream(current, decisions=decisions)), spin):
            printer.show(event)
            if isinstance(event, RunFinished):
                result = event.result
        assert result is not None
        if result.stop_reason is not StopReason.APPROVAL_REQUIRED or (as_json and not yes):
            return result
        decisions = _decide(result.pending, yes)
        printer.approved(d.call_id for d in decisions if d.approved)
        current = result.state


async def _session(
    runner: AgentRunner, prompt: str | None, printer: _Printer, yes: bool, as_json: bool
) -> RunResult | None:
    """One prompt, or an interactive session. With a journal (``--session``), the runner
    goes on from the stored conversation and stores it as it goes; else the history is
    kept here, in memory."""
    state: RunState | None = None
    lines = iter([prompt]) if prompt is not None else None
    result = None
    while True:
        line = next(lines, None) if lines is not None else _read_prompt()
        if line is None or line.strip() in ("exit", "quit"):
            return result
        if not line.strip():
            continue
        if state is None or runner.journal is not None:
            current: str | RunState = line
        else:
            state.conversation.append(UserMessage(line))
            current = state
        result = await _turn(runner, current, printer, yes, as_json)
        state = result.state


def _workspace_journal(root: Path) -> SQLiteJournal:
    """The workspace's journal; a `JournalError` opening it (a planted link, a read-only
    folder) is one line of error, not an internal error."""
    try:
        return SQLiteJournal.in_workspace(root)
    except JournalError as exc:
        raise CliError(str(exc), ExitCode.CONFIG) from None


def _runner(
    adapter: ModelAdapter,
    registry: ToolRegistry,
    options: AgentOptions,
    *,
    policy: ExecutionPolicy,
    journal: CallJournal | None,
    skills: SkillSet | None,
    held: contextlib.ExitStack,
) -> AgentRunner:
    """The run's runner. A tool named like tool search's own (on by default) is a
    configuration error that names the flag; the session `held` is let go."""
    try:
        return AgentRunner(
            adapter,
            registry,
            instructions=INSTRUCTIONS,
            policy=policy,
            journal=journal,
            session=options.session,
            skills=skills,
            max_turns=options.max_turns,
            tool_search=options.tool_search,
        )
    except ToolDefinitionError as exc:
        held.close()
        raise CliError(f"{exc} (--no-tool-search)", ExitCode.CONFIG) from None


def run_agent(options: AgentOptions) -> None:
    """``toolbridge agent`` once its options are checked (`agent_command`): build the
    model and the runner, run the prompt or the interactive session, map errors to one
    line and an exit code."""
    prompt, model, base_url, session = (
        options.prompt,
        options.model,
        options.base_url,
        options.session,
    )
    verbose, yes, as_json = options.verbose, options.yes, options.as_json
    root = (options.workspace or Path.cwd()).resolve()
    with reporting(verbose):
        adapter = _model(model, base_url)
        loaded = load_tools(
            LoadOptions(
                root, options.scope, options.config, verbose, options.allow_unsandboxed_exec
            )
        )
    registry = loaded.registry
    skill_set = SkillSet.discover(root) if options.skills else None
    # The config file's [executor] policy, asking before every call that writes (the
    # command's promise, whatever its approval rule says).
    policy = dataclasses.replace(loaded.policy, approval=writes_need_approval)
    journal: CallJournal | None = None
    held = contextlib.ExitStack()
    if session is not None:  # calls journaled under the session: none runs twice
        with reporting(verbose), _own_folder():
            held.enter_context(_session_held(root, session))
        context = dataclasses.replace(registry.context, session=session)  # the tools see it
        registry = ToolRegistry(list(registry), context=context)
        with reporting(verbose), _own_folder():
            journal = _workspace_journal(root)
    with reporting(verbose):
        runner = _runner(
            adapter,
            registry,
            options,
            policy=policy,
            journal=journal,
            skills=skill_set if skill_set is not None and len(skill_set) else None,
            held=held,
        )
    printer = _Printer(as_json, registry, answers_pauses=yes or not as_json)

    async def run() -> RunResult | None:
        try:
            return await _session(runner, prompt, printer, yes, as_json)
        finally:
            if journal is not None:
                await journal.close()

    # Anything else the run raises (a library's unexpected error) is one line, not a
    # traceback: 'internal error', the traceback only with -v.
    with reporting(verbose):
        try:
            with held:
                result = asyncio.run(run())
        except JournalError as exc:
            show(err, one_line(f"Error: {exc}"))
            raise typer.Exit(ExitCode.CONFIG) from None
        except ValueError as exc:  # the runner refused its input: a stored run it cannot read
            show(err, one_line(f"Error: {exc}"))
            raise typer.Exit(ExitCode.USAGE) from None
        except ModelConnectionError as exc:
            show(err, _unreached(exc, adapter, model, base_url))
            raise typer.Exit(1) from None
        except ModelError as exc:
            show(err, one_line(f"Error: {exc}"))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            raise typer.Exit(ExitCode.INTERRUPTED) from None
    if result is not None and result.stop_reason is StopReason.APPROVAL_REQUIRED:
        raise typer.Exit(ExitCode.CALL_FAILED)  # stopped on calls nobody approved
