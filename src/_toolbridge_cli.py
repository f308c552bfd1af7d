"""The ``toolbridge`` console script's entry point, outside the package on purpose.

Python imports a package's ``__init__`` before any module in it, and nothing in the
package can catch a Ctrl-C that interrupts its own import: it printed an import
traceback in the first milliseconds. This module loads nothing before it has made
Ctrl-C end the process with exit 130 (no traceback), then imports the command line
and gives Ctrl-C back to Python, whose `KeyboardInterrupt` `toolbridge.cli.main`
turns into the same exit 130 once it runs.
"""

import os
import sys

TYPE_CHECKING = False  # as `typing.TYPE_CHECKING`, which mypy reads so, without the import
if TYPE_CHECKING:  # the same functions, typed
    import signal as _signal
else:  # built in and loaded already: `signal` itself imports `enum`, which takes time
    import _signal

__all__ = ["main"]

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C (ExitCode.INTERRUPTED)


def _interrupted_while_loading(signum: int, frame: object) -> None:
    """Ctrl-C while the command line loads: nothing is written or held yet, so the
    process ends at once (a `SystemExit` could be caught by a module being imported)."""
    os._exit(INTERRUPTED)


def main() -> None:
    """Run the ``toolbridge`` command (`toolbridge.cli.main`); exit 130 on Ctrl-C at
    any moment."""
    python_handles = _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
    if python_handles:  # not when started with Ctrl-C ignored (``cmd &``): it stays so
        _signal.signal(_signal.SIGINT, _interrupted_while_loading)
    try:
        from toolbridge.cli import main as command
    finally:
        if python_handles:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    try:
        command()
    except KeyboardInterrupt:  # between the two lines above and `command`'s own guard
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        sys.exit(INTERRUPTED)
