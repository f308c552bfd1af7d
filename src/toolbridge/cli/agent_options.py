"""What ``toolbridge agent`` was asked to do: the command line, checked, handed to the loop.

Its own module so that the command (`toolbridge.cli.agent_command`, loaded at start-up)
and the loop it starts (`toolbridge.cli.agent`, loaded only when it runs) both use it
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["AgentOptions"]


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """The command line of ``toolbridge agent``, checked."""

    prompt: str | None
    model: str
    base_url: str | None
    workspace: Path | None
    scope: str
    config: Path | None
    verbose: bool
    allow_unsandboxed_exec: bool
    yes: bool
    as_json: bool
    max_turns: int
    skills: bool
    session: str | None
    tool_search: bool = True
