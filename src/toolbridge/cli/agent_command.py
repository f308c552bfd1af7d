"""The ``toolbridge agent`` command: its flags, and the checks that need no SDK.

A missing key and an unusable ``--base-url`` (or the provider's base-URL variable in
the environment) are found here, before the agent loop and the provider's SDK load
(which took seconds before the message); then `run_agent` (`toolbridge.cli.agent`)
runs the loop.
"""

from __future__ import annotations

import os
from typing import Annotated
from urllib.parse import urlsplit

import typer

from toolbridge.cli.agent_options import BASE_URL_VARIABLES, AgentOptions
from toolbridge.cli.app import (
    AllowUnsandboxedOption,
    CliError,
    ConfigOption,
    ScopeOption,
    VerboseOption,
    WorkspaceOption,
    app,
    reporting,
)

__all__ = ["agent_command"]


_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"),
    "openai-responses": ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""The environment variables that hold each provider's key (checked before its SDK
loads, which takes seconds). Ollama needs none; Bedrock finds AWS credentials itself."""

_EMPTY_IS_UNSET = frozenset({"GOOGLE_GEMINI_BASE_URL", "OLLAMA_HOST"})
"""The variables whose SDK ignores an empty value; the others' SDKs use it as the URL
(a connection error naming no URL), so an empty one is refused as a bad URL."""

_READ_ON_IMPORT = frozenset({"OLLAMA_HOST"})
"""The variables an SDK reads when it is imported (Ollama's module makes a default
client), so a bad one fails a run even when ``--base-url`` is given: checked anyway."""

_HOST_FORMS = frozenset({"OLLAMA_HOST"})
"""The variables that take a bare ``host:port`` (or ``:port``, ``host``) as well as a
URL: Ollama's client puts ``http://`` before a value without a scheme and fills in
127.0.0.1 for a missing host."""

_URL_EXAMPLE = "for example http://127.0.0.1:8000/v1"


def _check_base_url(model: str, base_url: str | None) -> None:
    """A `CliError` for an endpoint no client could connect to: ``--base-url``, and the
    provider's variable in the environment (`BASE_URL_VARIABLES`) when the flag is
    not given or the SDK reads the variable anyway. The message names where the URL
    came from and what to do."""
    variable = BASE_URL_VARIABLES.get(model.partition(":")[0])
    if base_url is not None:
        _refuse_bad_url(base_url, f"--base-url {base_url!r}", _URL_EXAMPLE)
        if variable not in _READ_ON_IMPORT:
            return
    if variable is None or variable not in os.environ:
        return
    value = os.environ[variable]
    if not value and variable in _EMPTY_IS_UNSET:
        return
    named = f"{variable} {value!r} (from the environment)"
    if variable in _HOST_FORMS:
        url = value if "://" in value else f"http://{value}"
        example = "a host and port such as 127.0.0.1:11434 or a URL such as http://127.0.0.1:11434"
        _refuse_bad_url(url, named, f"set {variable} to {example}, or unset it", host=False)
    else:
        example = "a URL such as http://127.0.0.1:8000/v1"
        _refuse_bad_url(value, named, f"set {variable} to {example}, or unset it")


def _refuse_bad_url(url: str, named: str, fix: str, *, host: bool = True) -> None:
    """A `CliError` saying why `url` (`named` so in the message) is unusable, and `fix`."""
    problem = _url_problem(url, host_required=host)
    if problem is not None:
        raise CliError(f"{named} {problem}; {fix}")


def _url_problem(url: str, *, host_required: bool = True) -> str | None:
    """Why no HTTP client could connect to `url` (None when one could try); without
    `host_required`, a URL with no host is one a client fills in (``http://:11434``)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises for a port that is not a number or out of range)
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or (host_required and not parts.hostname):
        return "is not an http:// or https:// URL with a host"
    # What urlsplit lets through but an HTTP client refuses ('internal error', exit 4):
    # a control character or space, and text after an IPv6 host's bracket that is no port.
    if not url.isprintable() or any(ch.isspace() for ch in url):
        return "holds a space or control character"
    after_bracket = parts.netloc.rpartition("@")[2].partition("]")[2]
    if after_bracket and not after_bracket.startswith(":"):
        return f"has {after_bracket!r} after its IPv6 host, not a port"
    return None


def _check_key(model: str, base_url: str | None) -> None:
    """A `CliError` naming the variable to set when `model`'s provider has no key.

    An ``openai:`` model with ``--base-url`` is a local OpenAI-compatible server, which
    takes any key. Gemini through Vertex AI authenticates otherwise: not checked.
    """
    provider = model.partition(":")[0]
    names = _KEYS.get(provider)
    if names is None or any(os.environ.get(name) for name in names):
        return
    if provider.startswith("openai") and base_url is not None:
        return
    if provider == "gemini" and os.environ.get("GOOGLE_GENAI_USE_VERTEXAI"):
        return
    local = (
        ", or pass --base-url for a local OpenAI-compatible server"
        if provider.startswith("openai")
        else ""
    )
    raise CliError(f"no API key for {model!r}: set {names[0]}{local}")


@app.command("agent")
def agent_command(
    prompt: Annotated[
        str | None, typer.Argument(help="What to do; leave out for an interactive session.")
    ] = None,
    *,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            envvar="TOOLBRIDGE_MODEL",
            help="provider:model, e.g. openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, "
            "ollama:qwen3.",
        ),
    ] = "openai:gpt-4.1-mini",
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="The provider's endpoint (any OpenAI-compatible server with openai:).",
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    scope: ScopeOption = "default",
    config: ConfigOption = None,
    verbose: VerboseOption = False,
    allow_unsandboxed_exec: AllowUnsandboxedOption = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve every call.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the events as JSON lines.")
    ] = False,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = 30,
    skills: Annotated[bool, typer.Option(help="Offer the workspace's skills.")] = True,
    tool_search: Annotated[
        bool,
        typer.Option(
            help="Past 30 tools or about 10,000 tokens of definitions, defer them: the "
            "model searches for the tools it needs.",
        ),
    ] = True,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Keep the conversation and every call in the workspace's journal under this "
            "name: run again with it to go on; a call that already ran is never run twice.",
        ),
    ] = None,
) -> None:
    """Run the agent loop: the model calls the workspace's tools until it answers."""
    with reporting(verbose):
        _check_base_url(model, base_url)
        _check_key(model, base_url)
    from toolbridge.cli.agent import run_agent

    options = AgentOptions(
        prompt=prompt,
        model=model,
        base_url=base_url,
        workspace=workspace,
        scope=scope,
        config=config,
        verbose=verbose,
        allow_unsandboxed_exec=allow_unsandboxed_exec,
        yes=yes,
        as_json=as_json,
        max_turns=max_turns,
        skills=skills,
        session=session,
        tool_search=tool_search,
    )
    run_agent(options)
