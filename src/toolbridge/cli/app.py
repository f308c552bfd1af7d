"""The typer application, its consoles, exit codes, and the options every command shares.

Errors a user can fix are `CliError`: one line on stderr and a documented exit code,
never a traceback. `reporting()` turns everything else a command can raise into the
same one line (the traceback only with ``--verbose``).
"""

from __future__ import annotations

import enum
import logging
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from toolbridge import __version__
from toolbridge.cli.display import SafeFormatter, clean
from toolbridge.errors import ToolConfigError

__all__ = [
    "AllowUnsandboxedOption",
    "CliError",
    "ConfigOption",
    "ExitCode",
    "ScopeOption",
    "VerboseOption",
    "WorkspaceOption",
    "YesOption",
    "app",
    "configure_logging",
    "err",
    "one_line",
    "out",
    "reporting",
    "terminal_safe",
]


class ExitCode(enum.IntEnum):
    """The documented exit codes of every ``toolbridge`` command (docs/guide/cli.md)."""

    OK = 0
    CALL_FAILED = 1  # a tool call failed, was refused or was not approved
    USAGE = 2  # the command line or its input is wrong (file, UTF-8, JSON, format, scope)
    CONFIG = 3  # the --config file or a tool's configuration is wrong
    INTERNAL = 4  # a bug in toolbridge or a plugin: please report it
    INTERRUPTED = 130  # Ctrl-C


class CliError(Exception):
    """A problem the user can fix: `reporting` prints ``Error: <message>``, exits with `code`."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(one_line(message))
        self.message = one_line(message)
        self.code = code


def one_line(text: str) -> str:
    """`text` on one line: a message for a terminal must not spill into a block."""
    return terminal_safe(" ".join(text.split()))


def terminal_safe(text: str) -> str:
    """`text` safe to print: untrusted text is shown the one way `display.clean` says."""
    return clean(text)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"toolbridge {__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="toolbridge",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain click help: flags without a <bool> placeholder
    pretty_exceptions_enable=False,
)
out = Console(soft_wrap=True, emoji=False)  # ":name:" in printed text stays as written
err = Console(stderr=True, soft_wrap=True, emoji=False)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Run a language model's tool calls safely, from the command line.

    Exit codes: 0 success, 1 a tool call failed or was not approved, 2 wrong command
    line or input, 3 wrong configuration, 4 internal error, 130 interrupted.
    """
    configure_logging(verbose=False)  # no raw record reaches stderr through Python's default


WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Directory the tools may touch (default: the current directory).",
        file_okay=False,
        exists=True,
        resolve_path=True,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="TOML file: [tools.<name>] sections for the tools, [executor] for the policy.",
    ),
]
ScopeOption = Annotated[
    str, typer.Option("--scope", help="Tool scope to load; an unknown one lists the known.")
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Log to stderr, with tracebacks of failing tools and plugins."
    ),
]
YesOption = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Approve every call that needs approval, without asking."),
]
AllowUnsandboxedOption = Annotated[
    bool,
    typer.Option(
        "--allow-unsandboxed-exec",
        help="Let the exec tool run shell commands without a sandbox (refused by default).",
    ),
]


_HANDLER_NAME = "toolbridge-cli"


def configure_logging(verbose: bool) -> None:
    """The command line is the application, so it decides where the library's logs go.

    Quiet by default: a `NullHandler` keeps Python's last-resort handler from printing
    warnings and their tracebacks (the command reports problems itself, in one line).
    With `verbose`, everything from DEBUG up goes to stderr, tracebacks included. Every
    record shown is cleaned (`SafeFormatter`), also other libraries' warnings, which
    Python's last-resort handler prints.
    """
    library = logging.getLogger("toolbridge")
    for existing in list(library.handlers):
        if existing.get_name() == _HANDLER_NAME:
            library.removeHandler(existing)
    handler: logging.Handler = logging.NullHandler()
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))
        library.setLevel(logging.DEBUG)
    handler.set_name(_HANDLER_NAME)
    library.addHandler(handler)
    last_resort = logging.StreamHandler(sys.stderr)  # other libraries' warnings, cleaned
    last_resort.setLevel(logging.WARNING)
    last_resort.setFormatter(SafeFormatter())
    logging.lastResort = last_resort


@contextmanager
def reporting(verbose: bool) -> Iterator[None]:
    """Run a command body: anything it raises becomes one line and an exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise
    except CliError as exc:
        _fail(exc.message, exc.code)
    except ToolConfigError as exc:
        _fail(str(exc), ExitCode.CONFIG)
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED)
    except Exception as exc:
        if verbose:
            sys.stderr.write(clean(traceback.format_exc()))
        hint = "" if verbose else " (run again with -v for the traceback)"
        _fail(f"internal error: {type(exc).__name__}: {exc}{hint}", ExitCode.INTERNAL)


def _fail(message: str, code: ExitCode) -> NoReturn:
    err.print(f"Error: {one_line(message)}", markup=False, highlight=False)
    raise typer.Exit(code) from None
