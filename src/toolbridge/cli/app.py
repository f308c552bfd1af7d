"""The typer application, its consoles, exit codes, and the options every command shares.

Errors a user can fix are `CliError`: one line on stderr and a documented exit code,
never a traceback. `reporting()` turns everything else a command can raise into the
same one line (the traceback only with ``--verbose``). A closed stdout (``| head``)
ends any command quietly.

Each command's module is imported when the command line first needs that command
(`COMMANDS`): ``toolbridge --version`` and ``--help`` load neither the executor nor
the agent loop.
"""

from __future__ import annotations

import codecs
import enum
import errno
import importlib
import io
import logging
import os
import sys
import traceback
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, NoReturn

import typer
import typer.main
from typer.core import TyperGroup

from toolbridge.cli.display import SafeFormatter, clean
from toolbridge.core.errors import ToolConfigError
from toolbridge.version import __version__

if TYPE_CHECKING:
    from rich.console import Console

    out: Console
    err: Console

__all__ = [
    "COMMANDS",
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
    "run",
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
    CLOSED_PIPE = 141  # stdout was closed (``| head``): 128 + SIGPIPE, as a shell reports it


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


@dataclass(frozen=True, slots=True)
class Command:
    """Where a top-level command is defined, and its one-line help for ``--help``."""

    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "agent": Command(
        "toolbridge.cli.agent_command",
        "Run the agent loop: the model calls the workspace's tools until it answers.",
    ),
    "tools": Command(
        "toolbridge.cli.tools",
        "List the registered tools, or print their definitions (--json, --format PROVIDER).",
    ),
    "call": Command(
        "toolbridge.cli.tools",
        "Run one tool call, as a model would send it, and print its result.",
    ),
    "exec": Command(
        "toolbridge.cli.tools",
        "Execute the tool calls of a provider response and print the result messages.",
    ),
    "journal": Command(
        "toolbridge.cli.journal", "The call journal: what ran, when, and what came of it."
    ),
    "mcp": Command(
        "toolbridge.cli.mcp",
        "MCP both ways: serve the tools to MCP clients, use MCP servers' tools.",
    ),
    "skills": Command(
        "toolbridge.cli.skills",
        "SKILL.md folders: what is available, one skill's text, format checks.",
    ),
}
"""Every top-level command: the help lists these without importing their modules (a
test checks each `help` is the first line of the command's own)."""


class _LazyCommands(MutableMapping[str, Any]):
    """The root group's commands: a command's module is imported on first look-up (it
    registers its commands on `app`), then the group is built again to get them."""

    def __init__(self, loaded: MutableMapping[str, Any]) -> None:
        self.loaded = loaded

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded and name in COMMANDS:
            importlib.import_module(COMMANDS[name].module)
            built = typer.main.get_command(app)
            assert isinstance(built, _LazyGroup)
            self.loaded.update(built.commands.loaded)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self.loaded if name not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(name not in COMMANDS for name in self.loaded)


class _LazyGroup(TyperGroup):
    """The ``toolbridge`` group: commands load on demand, the help does not load them,
    and a closed stdout ends a command quietly."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands: _LazyCommands = _LazyCommands(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        try:
            return self.commands[cmd_name]
        except KeyError:
            return None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        limit = formatter.width - 6 - max(map(len, COMMANDS))  # as click lays it out
        rows = [(name, _shortened(command.help, limit)) for name, command in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:  # --help and --version print while the command line is parsed
            return super().make_context(*args, **kwargs)
        except _CLICK_ERROR as exc:
            _quoted_as_text(exc)
            raise
        except BrokenPipeError:
            closed_pipe()
        except OSError as exc:
            if not writing_failed(exc):
                raise
            output_failed(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _CLICK_ERROR as exc:
            _quoted_as_text(exc)
            raise
        except BrokenPipeError:
            closed_pipe()
        except OSError as exc:
            if not writing_failed(exc):
                raise
            output_failed(exc)


_CLICK_ERROR: tuple[type[Exception], ...] = tuple(
    base
    for base in typer.BadParameter.__mro__
    if issubclass(base, Exception) and base.__name__ == "ClickException"
)
"""Click's error of a wrong command line, from the click this typer uses (its own copy
since typer 0.2x, the click package before)."""


def _quoted_as_text(error: Any) -> None:
    """A wrong command line is quoted in click's error (``No such option: --x...``): click
    escapes its C0 and C1 controls, not bidi controls nor zero-width characters, so the
    message is cleaned as all untrusted text is before click prints it."""
    error.message = clean(error.message)


def _shortened(text: str, limit: int) -> str:
    """`text` cut at a word to fit `limit` characters, with ``...`` (click's short help)."""
    if len(text) <= limit:
        return text
    return text[: limit - 3].rsplit(" ", 1)[0].rstrip(",:;") + "..."


def closed_pipe(stream: IO[str] | None = None) -> NoReturn:
    """The reader of `stream` (stdout by default) went away (``| head``): end quietly, as
    other tools do. Later writes, and the flush at exit, go nowhere instead of raising
    again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, (stream or sys.stdout).fileno())
    except (OSError, ValueError):  # not a real file: nothing to redirect
        pass
    finally:
        os.close(devnull)
    raise typer.Exit(ExitCode.CLOSED_PIPE)


_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF})


def writing_failed(error: OSError) -> bool:
    """Whether `error` is a failed write of the output (``> /dev/full``, a full disk, an
    I/O error, a closed descriptor): an error of a write, which names no file, unlike
    the errors of the files a command opens itself."""
    return error.filename is None and error.errno in _OUTPUT_ERRNOS


def output_failed(error: OSError) -> NoReturn:
    """The output could not be written: one ``Error:`` line and exit 2 (the command's
    output redirection is wrong), not 'internal error'. What is still pending goes
    nowhere, so the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file: nothing to redirect
        pass
    finally:
        os.close(devnull)
    _fail(f"cannot write the output: {error.strerror or error}", ExitCode.USAGE)


def run() -> None:
    """Run the command line with this process's arguments (`toolbridge.cli.main`)."""
    _closed_stdin_reads_empty()
    _unencodable_escaped()
    app()


def _unencodable_escaped() -> None:
    """An output whose encoding is not UTF-8 (``PYTHONIOENCODING=latin-1``, a C locale
    without Python's UTF-8 mode) cannot encode every character of a tool's text: such a
    character is written as its escape (``\\u65e5``, as `display.clean` writes what it
    escapes) instead of ending the command with a ``UnicodeEncodeError``. ``--json``
    escapes them itself (`display.echo_json`), so its JSON stays exact."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not _is_utf8(stream.encoding):
            stream.reconfigure(errors="backslashreplace")


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"


def _closed_stdin_reads_empty() -> None:
    """A closed stdin (``<&-``, some service managers) leaves ``sys.stdin`` None, which
    every read of it (a prompt, ``-``, a piped response) hit as an internal error: it
    reads as an empty input instead, as ``/dev/null``."""
    if sys.stdin is not None:
        return
    null = os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor: 0 itself
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115


app = typer.Typer(
    name="toolbridge",
    cls=_LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain click help: flags without a <bool> placeholder
    pretty_exceptions_enable=False,
)


def __getattr__(name: str) -> Any:
    """`out` (stdout) and `err` (stderr), the Rich consoles, made on first use: the help
    and ``--version`` do not load Rich."""
    if name not in ("out", "err"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(name)


def _console(name: str) -> Console:
    made = globals().get(name)
    if made is None:
        from rich.console import Console

        class _Console(Console):
            def on_broken_pipe(self) -> None:
                """Rich exits with 1 here; a closed pipe ends a command as `closed_pipe`."""
                self.quiet = True
                closed_pipe(self.file)

        made = globals()[name] = _Console(stderr=name == "err", soft_wrap=True, emoji=False)
    return made


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
    line or input, 3 wrong configuration, 4 internal error, 130 interrupted, 141 stdout
    closed by its reader (| head).
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
    last_resort.setFormatter(SafeFormatter(tracebacks=verbose))  # tracebacks with -v
    logging.lastResort = last_resort


@contextmanager
def reporting(verbose: bool) -> Iterator[None]:
    """Run a command body: anything it raises becomes one line and an exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException, BrokenPipeError):
        raise
    except CliError as exc:
        _fail(exc.message, exc.code)
    except ToolConfigError as exc:
        _fail(str(exc), ExitCode.CONFIG)
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED)
    except Exception as exc:
        if isinstance(exc, OSError) and writing_failed(exc):
            output_failed(exc)
        if verbose:
            sys.stderr.write(clean(traceback.format_exc()))
        hint = "" if verbose else " (run again with -v for the traceback)"
        _fail(f"internal error: {type(exc).__name__}: {exc}{hint}", ExitCode.INTERNAL)


def _fail(message: str, code: ExitCode) -> NoReturn:
    _console("err").print(f"Error: {one_line(message)}", markup=False, highlight=False)
    raise typer.Exit(code) from None
