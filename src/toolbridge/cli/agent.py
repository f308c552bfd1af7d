"""``toolbridge agent``: run the agent loop over the workspace's tools from the terminal.

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
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from toolbridge.agent import (
    AgentEvent,
    AgentRunner,
    ApprovalDecision,
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
from toolbridge.approval import writes_need_approval
from toolbridge.cli.app import (
    AllowUnsandboxedOption,
    CliError,
    ConfigOption,
    ExitCode,
    ScopeOption,
    VerboseOption,
    WorkspaceOption,
    app,
    err,
    out,
    reporting,
)
from toolbridge.cli.approval import BY_YES_FLAG, RETRY_NOT_ASKED, RETRY_QUESTION, prompt_approver
from toolbridge.cli.loading import LoadOptions, load_tools
from toolbridge.journal import CallJournal, JournalError, SQLiteJournal
from toolbridge.jsontext import to_json_text
from toolbridge.registry import ToolRegistry
from toolbridge.security.control import ControlFolderViolation, open_control_file
from toolbridge.skills import SkillSet
from toolbridge.terminal import escape_invisible

__all__ = ["agent_command", "event_json"]

INSTRUCTIONS = (
    "You are a careful assistant working in the user's workspace through tools. "
    "Use the tools to look before you change anything, and say what you did."
)


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
    """Shows events as they come: the answer on stdout, calls and status on stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._midline = False

    def show(self, event: AgentEvent) -> None:
        if self.as_json:
            out.print(to_json_text(event_json(event)), markup=False, highlight=False)
            return
        if isinstance(event, TextDelta):
            out.print(event.text, end="", markup=False, highlight=False)
            self._midline = not event.text.endswith("\n")
            return
        if self._midline:
            out.print()
            self._midline = False
        if isinstance(event, ToolStarted):
            arguments = event.call.arguments
            shown = arguments if isinstance(arguments, str) else to_json_text(arguments)
            err.print(f"[dim]-> {event.call.name}({shown[:200]})[/dim]", highlight=False)
        elif isinstance(event, ToolFinished):
            outcome = event.outcome
            color = "green" if outcome.ok else "yellow"
            first = outcome.result.text.split("\n", 1)[0][:200]
            err.print(
                f"[{color}]<- {outcome.call.name}: {outcome.status.value}[/{color}] "
                f"[dim]{first}[/dim]",
                highlight=False,
                markup=True,
            )
        elif isinstance(event, RunFinished):
            usage = event.result.usage
            err.print(
                f"[dim]{event.result.stop_reason.value}: {event.result.turns} turns, "
                f"{event.result.tool_calls} tool calls, {usage.input_tokens} in / "
                f"{usage.output_tokens} out tokens[/dim]"
            )


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C ends a prompt that blocks the event loop: ``asyncio.run``'s own handler only
    cancels the main task, which a blocked prompt never sees (it kept waiting). Click turns
    the interrupt into `typer.Abort`, as it does the end of input: only the interrupt
    becomes KeyboardInterrupt (exit 130)."""
    pressed = False

    def interrupt(signum: int, frame: Any) -> None:
        nonlocal pressed
        pressed = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    except typer.Abort:
        if pressed:
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)


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
    event loop on purpose: nothing runs between turns, and a prompt in a worker thread
    cannot be interrupted (Ctrl-C left it waiting)."""
    try:
        with _interruptible():
            return input("> ")
    except EOFError:
        return None


def _decide(pending: tuple[PendingCall, ...], yes: bool) -> list[ApprovalDecision]:
    """Ask about each pending call (``--yes`` approves them all but retries, which only a
    person at a terminal approves: the call may have partly run)."""
    decisions = []
    for call in pending:
        if yes and not call.retry:
            decisions.append(call.approve(by=BY_YES_FLAG))
            continue
        if call.retry and yes and not sys.stdin.isatty():  # nobody to ask: not retried
            decisions.append(call.deny(RETRY_NOT_ASKED))
            continue
        shown = escape_invisible(json.dumps(dict(call.arguments), ensure_ascii=False))
        if call.retry:
            err.print(
                f"{call.tool_name}({shown}) was interrupted before it finished: it may have "
                "partly run.",
                markup=False,
                highlight=False,
            )
            question = RETRY_QUESTION
        else:
            question = f"Allow {call.tool_name}({shown})?"
        with _interruptible():
            approved = typer.confirm(question, default=False, err=True)
        if approved:
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
    while True:
        result: RunResult | None = None
        async for event in runner.stream(current, decisions=decisions):
            printer.show(event)
            if isinstance(event, RunFinished):
                result = event.result
        assert result is not None
        if result.stop_reason is not StopReason.APPROVAL_REQUIRED or (as_json and not yes):
            return result
        decisions = _decide(result.pending, yes)
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


@app.command("agent")
def agent_command(
    prompt: Annotated[
        str | None, typer.Argument(help="What to do; leave out for an interactive session.")
    ] = None,
    *,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            envvar="TOOLBRIDGE_MODEL",
            help="provider:model, e.g. openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, "
            "ollama:qwen3.",
        ),
    ] = "openai:gpt-4.1-mini",
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="The provider's endpoint (any OpenAI-compatible server with openai:).",
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    scope: ScopeOption = "default",
    config: ConfigOption = None,
    verbose: VerboseOption = False,
    allow_unsandboxed_exec: AllowUnsandboxedOption = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve every call.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the events as JSON lines.")
    ] = False,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = 30,
    skills: Annotated[bool, typer.Option(help="Offer the workspace's skills.")] = True,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Keep the conversation and every call in the workspace's journal under this "
            "name: run again with it to go on; a call that already ran is never run twice.",
        ),
    ] = None,
) -> None:
    """Run the agent loop: the model calls the workspace's tools until it answers."""
    root = (workspace or Path.cwd()).resolve()
    try:
        adapter = model_from_string(model, base_url=base_url)
    except (ValueError, ImportError, ModelError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    with reporting(verbose):
        loaded = load_tools(LoadOptions(root, scope, config, verbose, allow_unsandboxed_exec))
    registry = loaded.registry
    skill_set = SkillSet.discover(root) if skills else None
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
            journal = SQLiteJournal.in_workspace(root)
    runner = AgentRunner(
        adapter,
        registry,
        instructions=INSTRUCTIONS,
        policy=policy,
        journal=journal,
        session=session,
        skills=skill_set if skill_set is not None and len(skill_set) else None,
        max_turns=max_turns,
    )
    printer = _Printer(as_json)

    async def run() -> RunResult | None:
        try:
            return await _session(runner, prompt, printer, yes, as_json)
        finally:
            if journal is not None:
                await journal.close()

    try:
        with held:
            result = asyncio.run(run())
    except JournalError as exc:
        err.print(f"Error: {exc}", markup=False, highlight=False)
        raise typer.Exit(ExitCode.CONFIG) from None
    except ValueError as exc:  # the runner refused its input: a stored run it cannot read
        err.print(f"Error: {exc}", markup=False, highlight=False)
        raise typer.Exit(ExitCode.USAGE) from None
    except ModelError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if result is not None and result.stop_reason is StopReason.APPROVAL_REQUIRED:
        raise typer.Exit(ExitCode.CALL_FAILED)  # stopped on calls nobody approved
