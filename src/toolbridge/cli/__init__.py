"""The ``toolbridge`` command line: list the tools, run calls, over a local workspace.

Needs the ``cli`` extra (typer and rich). One module per command group; each registers
its commands on the shared `app` and is imported here. The workspace defaults to the
current directory. Exit codes are `ExitCode` (documented in docs/guide/cli.md).
"""

from __future__ import annotations

try:
    import rich  # noqa: F401
    import typer  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise SystemExit(
        "the toolbridge command needs the cli extra: pip install 'toolbridge[cli]'"
    ) from exc

from toolbridge.cli import agent as _agent  # noqa: F401  (registers its commands)
from toolbridge.cli import journal as _journal  # noqa: F401  (registers its commands)
from toolbridge.cli import mcp as _mcp  # noqa: F401  (registers its commands)
from toolbridge.cli import skills as _skills  # noqa: F401  (registers its commands)
from toolbridge.cli import tools as _tools  # noqa: F401  (registers its commands)
from toolbridge.cli.app import ExitCode, app

__all__ = ["ExitCode", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
