"""Commands that load the tools and run calls: ``tools``, ``call``, ``exec``.

``call`` and ``exec`` run every call through `ToolExecutor.run` (one execution path:
the tool's timeout, approval, loop guard and result cap hold here as in a program).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from toolbridge.cli.app import (
    AllowUnsandboxedOption,
    CliError,
    ConfigOption,
    ExitCode,
    ScopeOption,
    VerboseOption,
    WorkspaceOption,
    YesOption,
    app,
    err,
    out,
    reporting,
)
from toolbridge.cli.approval import decider, run_calls
from toolbridge.cli.display import echo, echo_json, plain, show, table
from toolbridge.cli.inputs import read_json, read_stdin
from toolbridge.cli.loading import Loaded, LoadOptions, load_tools
from toolbridge.core.calls import Repair, ToolCallRequest
from toolbridge.core.jsontext import json_default
from toolbridge.core.tool import ImageBlock, JsonBlock, TextBlock, ToolResult
from toolbridge.execution.executor import ToolExecutor, ToolOutcome
from toolbridge.formats import FormatError, FormatName, detect_format, provider_format

FormatOption = Annotated[
    FormatName | None,
    typer.Option("--format", "-f", help="Provider wire format."),
]


@app.command("tools")
def tools_command(
    *,
    workspace: WorkspaceOption = None,
    config: ConfigOption = None,
    scope: ScopeOption = "default",
    verbose: VerboseOption = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the definitions as JSON (OpenAI Chat shape).")
    ] = False,
    provider: FormatOption = None,
) -> None:
    """List the registered tools, or print their definitions (--json, --format PROVIDER)."""
    with reporting(verbose):
        registry = load_tools(LoadOptions(workspace, scope, config, verbose)).registry
        if provider is not None:
            definitions: Any = provider_format(provider).definitions(registry)
            echo_json(definitions, indent=2)
            return
        if as_json:
            echo_json(registry.get_definitions(), indent=2)
            return
        grid = table("name", "flags", "description", title=f"{len(registry)} tools")
        for tool in registry:
            flags = ", ".join(
                flag
                for flag, on in (
                    ("read-only", tool.read_only),
                    ("exclusive", tool.exclusive),
                    ("concurrent", tool.concurrency_safe),
                    ("needs approval", tool.requires_approval),
                )
                if on
            )
            cells = (tool.name, flags, _first_sentence(tool.description))
            grid.add_row(*(plain(cell) for cell in cells))
        out.print(grid)
        out.print(f"definitions hash: {registry.definitions_hash[:16]}")


@app.command("call")
def call_command(
    name: Annotated[str, typer.Argument(help="Tool name, exactly as registered.")],
    arguments: Annotated[
        str, typer.Argument(help="Arguments as JSON text; '-' reads them from stdin.")
    ] = "{}",
    *,
    workspace: WorkspaceOption = None,
    config: ConfigOption = None,
    scope: ScopeOption = "default",
    verbose: VerboseOption = False,
    yes: YesOption = False,
    allow_unsandboxed_exec: AllowUnsandboxedOption = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the ToolResult as JSON on stdout.")
    ] = False,
) -> None:
    """Run one tool call, as a model would send it, and print its result.

    A result goes to stdout, an error result to stderr (exit code 1); with --json the
    whole ToolResult goes to stdout as JSON either way.
    """
    with reporting(verbose):
        raw: Any = read_stdin() if arguments == "-" else arguments
        options = LoadOptions(workspace, scope, config, verbose, allow_unsandboxed_exec)
        loaded = load_tools(options)
        call = ToolCallRequest("cli", name, raw)
        (outcome,) = _run(loaded, [call], yes)
        _report_repairs(outcome.repairs)
        result = outcome.result
        if as_json:
            echo_json(result_json(result), indent=2)
        else:
            # plain echo: rich would turn the tabs of numbered lines into spaces
            echo(result.text, err=not outcome.ok)
        if not outcome.ok:
            raise typer.Exit(ExitCode.CALL_FAILED)


@app.command("exec")
def exec_command(
    ctx: typer.Context,
    source: Annotated[
        str | None,
        typer.Argument(
            help="A provider response as JSON: a file, or '-' for stdin (read from stdin "
            "when omitted and stdin is not a terminal)."
        ),
    ] = None,
    *,
    provider: FormatOption = None,
    workspace: WorkspaceOption = None,
    config: ConfigOption = None,
    scope: ScopeOption = "default",
    verbose: VerboseOption = False,
    yes: YesOption = False,
    allow_unsandboxed_exec: AllowUnsandboxedOption = False,
) -> None:
    """Execute the tool calls of a provider response and print the result messages.

    The messages come out in the same provider's format (detected, or --format), ready
    to append to the conversation; one line per call goes to stderr: its status, the
    casts made to its arguments, and the first line of an error. Exit code 1 when any
    call did not succeed.
    """
    with reporting(verbose):
        if source is None:
            if sys.stdin.isatty():  # nothing piped in: show how to use it, do not hang
                typer.echo(ctx.get_help(), err=True)
                raise typer.Exit(ExitCode.USAGE)
            source = "-"
        payload, where = read_json(source)
        try:
            name = provider or detect_format(payload)
            module = provider_format(name)
            parsed = module.parse_response(payload)
        except (FormatError, ValueError) as exc:
            raise CliError(f"{where}: {exc}") from None
        if parsed.truncated:
            err.print("warning: the response was cut off (length limit); calls may be incomplete")
        if not parsed.calls:
            show(err, f"{where}: the response has no tool calls")
        options = LoadOptions(workspace, scope, config, verbose, allow_unsandboxed_exec)
        outcomes = _run(load_tools(options), parsed.calls, yes)
        for outcome in outcomes:
            show(err, summary_line(outcome))
        echo_json(module.result_messages(outcomes), indent=2)
        if not all(outcome.ok for outcome in outcomes):
            raise typer.Exit(ExitCode.CALL_FAILED)


def _first_sentence(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    end = line.find(". ")
    return line if end < 0 else line[: end + 1]


def _run(loaded: Loaded, calls: Sequence[ToolCallRequest], yes: bool) -> list[ToolOutcome]:
    async def run() -> list[ToolOutcome]:
        async with ToolExecutor(loaded.registry, loaded.policy) as executor:  # ends its sessions
            return await run_calls(executor, calls, decider(yes))

    return asyncio.run(run())


def _report_repairs(repairs: Sequence[Repair]) -> None:
    for repair in repairs:
        show(
            err,
            (
                f"repaired {repair.path}: {repair.action} {repair.before!r} -> {repair.after!r}",
                "dim",
            ),
        )


def summary_line(outcome: ToolOutcome) -> str:
    """One line per call: status, tool, id, the casts made, and the error's first line."""
    kind = f" ({outcome.error.kind})" if outcome.error is not None else ""
    line = f"{outcome.status}{kind}: {outcome.call.name} [{outcome.call.id}]"
    casts = [f"{r.path} {r.before!r} -> {r.after!r}" for r in outcome.repairs]
    if casts:
        line += f"  repaired: {', '.join(casts)}"
    if outcome.error is not None:
        line += f"  - {outcome.error.message.splitlines()[0]}"
    return line


def result_json(result: ToolResult) -> dict[str, Any]:
    """A `ToolResult` as JSON data: content (text or blocks), error flag and kind, metadata."""
    content: Any = result.content
    if not isinstance(content, str):
        content = [_block_json(block) for block in content]
    metadata = json.loads(json.dumps(result.metadata, default=json_default))
    return {
        "content": content,
        "is_error": result.is_error,
        "error_kind": result.error_kind,
        "metadata": metadata,
    }


def _block_json(block: TextBlock | ImageBlock | JsonBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, JsonBlock):
        value = json.loads(json.dumps(block.value, default=json_default))
        return {"type": "json", "value": value}
    return {"type": "image", "media_type": block.media_type, "data": block.base64}
