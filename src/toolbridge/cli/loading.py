"""Load the tools a command works with: workspace, ``--config``, scope, plugins, policy.

Every command that loads tools goes through `load_tools`, so ``--workspace``,
``--config``, ``--scope`` and ``--verbose`` mean the same thing everywhere. A plugin
that cannot be loaded is reported once: one line here, or the logged record with its
traceback under ``--verbose``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge.cli.app import CliError, ExitCode, configure_logging, err, one_line
from toolbridge.cli.config import read_config
from toolbridge.core.errors import ToolConfigError
from toolbridge.core.loader import Candidate, SkippedTool, ToolLoader
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool, ToolContext
from toolbridge.execution.executor import ExecutionPolicy

__all__ = ["EXEC_SECTION", "LoadOptions", "Loaded", "load_tools"]

EXEC_SECTION = "exec"
"""The config section of the built-in ``exec`` tool, where the CLI's sandbox default goes."""


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """The options shared by every command that loads tools."""

    workspace: Path | None = None
    scope: str = "default"
    config: Path | None = None
    verbose: bool = False
    allow_unsandboxed_exec: bool = False


@dataclass(frozen=True, slots=True)
class Loaded:
    """A loaded registry and the execution policy the config file asked for."""

    registry: ToolRegistry
    policy: ExecutionPolicy


class _CliLoader(ToolLoader):
    """A `ToolLoader` that keeps what it discovered, to check scopes and config sections."""

    def __init__(self) -> None:
        super().__init__()
        self._builtins: list[tuple[str, Candidate]] | None = None
        self._builtin_skips: list[SkippedTool] = []
        self.plugins: list[tuple[str, Candidate]] = []

    def discover(self) -> list[tuple[str, Candidate]]:
        if self._builtins is None:  # scan (and log failures) once per command
            before = len(self.skipped)
            self._builtins = super().discover()
            self._builtin_skips = self.skipped[before:]
        else:
            self.skipped.extend(self._builtin_skips)
        return self._builtins

    def discover_plugins(self) -> list[tuple[str, Candidate]]:
        self.plugins = super().discover_plugins()
        return self.plugins

    def candidates(self) -> list[Candidate]:
        return [candidate for _, candidate in [*self.discover(), *self.plugins]]


def load_tools(options: LoadOptions) -> Loaded:
    """The registry of `options.scope` over the workspace, with the config file applied."""
    configure_logging(options.verbose)
    config = read_config(options.config)
    tools_config: dict[str, dict[str, Any]] = {k: dict(v) for k, v in config.tools.items()}
    loader = _CliLoader()
    _exec_default(loader, tools_config, options.allow_unsandboxed_exec)
    workspace = (options.workspace or Path.cwd()).resolve()
    ctx = ToolContext(workspace=workspace, config=tools_config)
    try:
        registry = loader.registry(ctx, scope=options.scope)
    except ToolConfigError as exc:
        raise CliError(f"{config.source}: {exc}", ExitCode.CONFIG) from None
    _check_scope(loader, options.scope)
    _check_sections(loader, config.tools, config.source)
    if not options.verbose:  # verbose: the logged records say it, with tracebacks
        for skipped in loader.skipped:
            err.print(
                one_line(f"skipped {skipped.source}: {skipped.reason}"),
                style="yellow",
                markup=False,
                highlight=False,
            )
    return Loaded(registry, config.policy)


def _exec_default(loader: _CliLoader, tools_config: dict[str, dict[str, Any]], allow: bool) -> None:
    """The CLI refuses unsandboxed shell commands unless the user opted in.

    ``unsandboxed`` is set only when every tool reading the ``exec`` section has a config
    model that knows the field, so the CLI never makes a tool refuse a configuration the
    user did not write. A value from the config file is kept; the flag overrides it.
    """
    readers = [_config_fields(c) for c in loader.candidates() if _reads(c, EXEC_SECTION)]
    if not readers or not all("unsandboxed" in fields for fields in readers):
        return
    section = tools_config.setdefault(EXEC_SECTION, {})
    if allow:
        section["unsandboxed"] = "allow"
    else:
        section.setdefault("unsandboxed", "refuse")


def _reads(candidate: Candidate, section: str) -> bool:
    """Whether `candidate` is built from config `section` (a class with a config model)."""
    if isinstance(candidate, Tool) or candidate.config_cls() is None:
        return False
    return (candidate.config_key or candidate.name) == section


def _config_fields(candidate: Candidate) -> set[str]:
    model = None if isinstance(candidate, Tool) else candidate.config_cls()
    return set(model.model_fields) if model is not None else set()


def _config_sections(loader: _CliLoader) -> set[str]:
    return {
        candidate.config_key or candidate.name
        for candidate in loader.candidates()
        if not isinstance(candidate, Tool) and candidate.config_cls() is not None
    }


def _check_scope(loader: _CliLoader, scope: str) -> None:
    known = {s for c in loader.candidates() for s in c.scopes if s != "*"}
    if scope not in known:
        listed = ", ".join(sorted(known)) or "(none)"
        raise CliError(f"unknown scope {scope!r}; known scopes: {listed}")


def _check_sections(loader: _CliLoader, sections: dict[str, Any], source: str) -> None:
    known = _config_sections(loader)
    for key in sections:
        if key not in known:
            listed = ", ".join(sorted(known)) or "(none)"
            raise CliError(
                f"{source}: no tool reads [tools.{key}]; sections tools read: {listed}",
                ExitCode.CONFIG,
            )
