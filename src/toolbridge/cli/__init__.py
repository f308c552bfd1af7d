"""The ``toolbridge`` command line: list the tools, run calls, over a local workspace.

Needs the ``cli`` extra (typer and rich). One module per command group; each registers
its commands on the shared `app` when the command line first needs it (`app.COMMANDS`),
so ``--version`` and ``--help`` do not load the executor or the agent loop. The
workspace defaults to the current directory. Exit codes are `ExitCode` (documented in
docs/guide/cli.md).

Nothing heavy is imported at module level: Ctrl-C during start-up lands inside `main`,
which ends the command with exit code 130 instead of an import traceback. The console
script enters through `_toolbridge_cli`, outside the package, which covers the moments
before: while ``toolbridge/__init__`` and this module import.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolbridge.cli.app import ExitCode

__all__ = ["ExitCode", "main"]  # the typer application is `toolbridge.cli.app.app`

_INTERRUPTED = 130  # ExitCode.INTERRUPTED, without importing typer to know it
_CLOSED_PIPE = 141  # ExitCode.CLOSED_PIPE
_USAGE = 2  # ExitCode.USAGE


def main() -> None:
    """Console-script entry point: the command, and exit 130 for Ctrl-C at any moment."""
    previous_hook = sys.unraisablehook
    lost: list[KeyboardInterrupt] = []  # a Ctrl-C raised where Python ignored it
    sys.unraisablehook = _ctrl_c_again(previous_hook, lost)
    try:
        _refuse_closed_stdout()
        if sys.argv[1:] == ["--version"]:  # answered before the command-line library loads
            from toolbridge.version import __version__

            _print_version(__version__)
        else:
            try:
                from toolbridge.cli.app import run
            except ImportError as exc:  # pragma: no cover - depends on the installed extras
                if exc.name not in ("typer", "rich"):
                    raise
                raise SystemExit(
                    "Error: the toolbridge command needs the cli extra: pip install "
                    "'toolbridge[cli]'"
                ) from None
            run()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: no traceback either
        sys.exit(_INTERRUPTED)
    except SystemExit as exc:
        if lost and exc.code in (0, None):  # it ended before the Ctrl-C came back
            sys.exit(_INTERRUPTED)
        raise
    finally:
        sys.unraisablehook = previous_hook
    if lost:
        sys.exit(_INTERRUPTED)


def _ctrl_c_again(
    hook: Callable[[Any], object], lost: list[KeyboardInterrupt]
) -> Callable[[Any], object]:
    """An unraisable-exception hook for a Ctrl-C raised where Python ignores exceptions
    (a garbage-collector or weak-reference callback, a ``__del__``): printed and lost
    before, the command ran on and ended with exit 0. It is noted (`main` ends with 130)
    and given to the main thread again, from another thread so that it is raised in
    the command's own code, where it stops the command."""

    def handle(unraisable: Any) -> object:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            return hook(unraisable)
        lost.append(unraisable.exc_value)
        _thread.start_new_thread(_thread.interrupt_main, ())  # started, not waited for
        return None

    return handle


def _refuse_closed_stdout() -> None:
    """A closed stdout (``>&-``: Python leaves ``sys.stdout`` None) loses the output, so
    the command must not run and say it succeeded: one ``Error:`` line and exit 2, as for
    an output that cannot be written (``> /dev/full``, `app.output_failed`)."""
    if sys.stdout is not None:
        return
    if sys.stderr is not None:
        sys.stderr.write("Error: cannot write the output: stdout is closed\n")
        sys.stderr.flush()
    sys.exit(_USAGE)


def _print_version(version: str) -> None:
    try:
        sys.stdout.write(f"toolbridge {version}\n")
        sys.stdout.flush()
    except OSError as exc:  # as every command: app.closed_pipe, app.output_failed
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        if isinstance(exc, BrokenPipeError):  # `| head -c 0`: quiet
            sys.exit(_CLOSED_PIPE)
        sys.stderr.write(f"Error: cannot write the output: {exc.strerror or exc}\n")
        sys.exit(_USAGE)


def __getattr__(name: str) -> Any:
    if name == "ExitCode":
        from toolbridge.cli.app import ExitCode

        return ExitCode
    raise AttributeError(f"module 'toolbridge.cli' has no attribute {name!r}")
