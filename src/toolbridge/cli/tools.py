"""Commands that load the tools and run calls: ``tools``, ``call``, ``exec``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from toolbridge.cli.app import ScopeOption, WorkspaceOption, app, err, load_registry, out
from toolbridge.executor import ToolExecutor
from toolbridge.formats import FormatError, detect_format, provider_format
from toolbridge.tool import ToolResult


@app.command("tools")
def tools_command(
    workspace: WorkspaceOption = None,  # type: ignore[assignment]
    scope: ScopeOption = "default",
    as_json: Annotated[bool, typer.Option("--json", help="Print the definitions as JSON.")] = False,
) -> None:
    """List the registered tools (or print their definitions with --json)."""
    registry = load_registry(workspace, scope)
    if as_json:
        typer.echo(json.dumps(registry.get_definitions(), indent=2, ensure_ascii=False))
        return
    table = Table("name", "flags", "description", title=f"{len(registry)} tools")
    for tool in registry:
        flags = ", ".join(
            flag
            for flag, on in (
                ("read-only", tool.read_only),
                ("exclusive", tool.exclusive),
                ("concurrent", tool.concurrency_safe),
            )
            if on
        )
        table.add_row(tool.name, flags, tool.description.split("\n", 1)[0])
    out.print(table)
    out.print(f"definitions hash: {registry.definitions_hash[:16]}")


@app.command("call")
def call_command(
    name: Annotated[str, typer.Argument(help="Tool name, exactly as registered.")],
    arguments: Annotated[
        str, typer.Argument(help="Arguments as JSON text; '-' reads them from stdin.")
    ] = "{}",
    workspace: WorkspaceOption = None,  # type: ignore[assignment]
    scope: ScopeOption = "default",
) -> None:
    """Run one tool call through the registry and print its result."""
    registry = load_registry(workspace, scope)
    raw: Any = sys.stdin.read() if arguments == "-" else arguments
    prepared = registry.prepare_call(name, raw)
    for repair in prepared.repairs:
        err.print(
            f"repaired {repair.path}: {repair.action} {repair.before!r} -> {repair.after!r}",
            style="dim",
            markup=False,
            highlight=False,
        )
    if prepared.error is not None:
        result = ToolResult.error(prepared.error)
    else:
        result = asyncio.run(registry.invoke(prepared, call_id="cli"))
    typer.echo(result.text)  # plain: rich would turn the tabs of numbered lines into spaces
    if result.is_error:
        raise typer.Exit(1)


@app.command("exec")
def exec_command(
    source: Annotated[
        str, typer.Argument(help="A provider response as JSON: a file path, or '-' for stdin.")
    ] = "-",
    provider: Annotated[
        str | None,
        typer.Option("--format", help="Provider format; detected from the response if omitted."),
    ] = None,
    workspace: WorkspaceOption = None,  # type: ignore[assignment]
    scope: ScopeOption = "default",
) -> None:
    """Execute the tool calls of a provider response and print the result messages.

    The messages come out in the same provider's format, ready to append to the
    conversation; a summary of each call goes to stderr.
    """
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    try:
        name = provider or detect_format(text)
        module = provider_format(name)
        parsed = module.parse_response(text)
    except (FormatError, ValueError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    if parsed.truncated:
        err.print("warning: the response was cut off (length limit); calls may be incomplete")
    registry = load_registry(workspace, scope)
    outcomes = asyncio.run(ToolExecutor(registry).run(parsed.calls))
    for outcome in outcomes:
        kind = f" ({outcome.error.kind})" if outcome.error is not None else ""
        err.print(
            f"{outcome.status}{kind}: {outcome.call.name} [{outcome.call.id}]",
            markup=False,
            highlight=False,
        )
    typer.echo(json.dumps(module.result_messages(outcomes), indent=2, ensure_ascii=False))
