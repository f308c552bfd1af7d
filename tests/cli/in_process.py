"""The command line run inside the test's process, for tests of what a command prints.

A `toolbridge` subprocess costs about 0.7 s of CPU before the command starts (Python
and the package's imports), and most CLI tests check only a command's output and exit
code: the same typer application run here gives the same output for a fraction of it.
What only a real process shows stays with `Cli`: signals and Ctrl-C, start-up and its
imports, a terminal (``tty_input`` runs one here too), closed or missing streams, and
the console-script entry (`toolbridge.cli.main`).

Each run is isolated as a process would be: the workspace is the current directory,
the plugins in ``site`` are importable for that run only (``PYTHONPATH`` names them for
what the command starts) and forgotten after it, and the logging and SIGINT state a
command sets up is put back.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Cli, python_path
from typer.testing import CliRunner


class InProcessCli(Cli):
    """`Cli`, with the command run in this process (a terminal still gets a subprocess)."""

    def __call__(
        self,
        *args: str,
        stdin: str | bytes | None = None,
        cwd: Path | None = None,
        tty_input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        if tty_input is not None:
            return super().__call__(*args, stdin=stdin, cwd=cwd, tty_input=tty_input)
        from toolbridge.cli.app import app

        library = logging.getLogger("toolbridge")
        saved_logging = (list(library.handlers), library.level, logging.lastResort)
        saved_sigint = signal.getsignal(signal.SIGINT)
        saved_cwd = os.getcwd()
        saved_path = list(sys.path)
        saved_pythonpath = os.environ.get("PYTHONPATH")
        modules_before = set(sys.modules)
        os.chdir(cwd or self.workspace)
        sys.path.insert(0, str(self.site))
        # As `Cli` gives it, for what the command starts:
        os.environ["PYTHONPATH"] = python_path(self.site)
        importlib.invalidate_caches()  # entry points and modules are looked up afresh
        try:
            result = CliRunner().invoke(
                app, list(args), input=stdin, catch_exceptions=False, prog_name="toolbridge"
            )
        finally:
            os.chdir(saved_cwd)
            sys.path[:] = saved_path
            if saved_pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved_pythonpath
            for name in set(sys.modules) - modules_before:
                if _under(sys.modules[name], self.site):
                    del sys.modules[name]  # the next test's plugin of the same name is new
            importlib.invalidate_caches()
            library.handlers[:] = saved_logging[0]
            library.setLevel(saved_logging[1])
            logging.lastResort = saved_logging[2]
            signal.signal(signal.SIGINT, saved_sigint)
        return subprocess.CompletedProcess(
            ["toolbridge", *args], result.exit_code, result.stdout, result.stderr
        )


def _under(module: object, folder: Path) -> bool:
    path = getattr(module, "__file__", None)
    return path is not None and Path(path).is_relative_to(folder)
