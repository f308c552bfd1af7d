"""The ``toolbridge`` command line: list the tools, run one call, over a local workspace.

Needs the ``cli`` extra (typer and rich). One module per command group; each registers
its commands on the shared `app`. The workspace defaults to the current directory.
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
from toolbridge.cli import skills as _skills  # noqa: F401  (registers its commands)
from toolbridge.cli import tools as _tools  # noqa: F401  (registers its commands)
from toolbridge.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
