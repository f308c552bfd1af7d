"""What ``toolbridge agent`` was asked to do: the command line, checked, handed to the loop.

Its own module so that the command (`toolbridge.cli.agent_command`, loaded at start-up)
and the loop it starts (`toolbridge.cli.agent`, loaded only when it runs) both use it
without importing each other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASE_URL_VARIABLES", "AgentOptions", "endpoint_setting"]


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


BASE_URL_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
    "ollama": "OLLAMA_HOST",
}
"""The environment variable each provider's SDK takes its endpoint from when there is
no ``--base-url`` (checked by `agent_command` as the flag is: the SDK's own error was 'internal
error', or named no variable)."""


def endpoint_setting(model: str, base_url: str | None) -> str:
    """What set the endpoint of `model`, for a message that says what to check: the
    provider's variable when it is set and ``--base-url`` is not, else ``--base-url``."""
    variable = BASE_URL_VARIABLES.get(model.partition(":")[0])
    if base_url is None and variable is not None and os.environ.get(variable):
        return variable
    return "--base-url"
