"""The typer application, its consoles and the options every command shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from toolbridge.loader import ToolLoader
from toolbridge.registry import ToolRegistry
from toolbridge.tool import ToolContext

app = typer.Typer(
    name="toolbridge",
    help="Run a language model's tool calls safely, from the command line.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

WorkspaceOption = Annotated[
    Path,
    typer.Option(
        "--workspace",
        "-w",
        help="Directory the tools may touch (default: the current directory).",
        file_okay=False,
        exists=True,
        resolve_path=True,
    ),
]
ScopeOption = Annotated[str, typer.Option("--scope", help="Tool scope to load.")]


def load_registry(workspace: Path | None, scope: str) -> ToolRegistry:
    """The built-in tools and plugins of `scope` over `workspace`; skipped ones reported."""
    ctx = ToolContext(workspace=(workspace or Path.cwd()).resolve())
    loader = ToolLoader()
    registry = loader.registry(ctx, scope=scope)
    for skipped in loader.skipped:
        err.print(f"[yellow]skipped {skipped.source}: {skipped.reason}[/yellow]")
    return registry
