"""MCP server configuration: the ``mcpServers`` JSON users already have, checked up front.

The format is the one Claude Desktop, Cursor and VS Code use: a JSON object whose
``mcpServers`` (or ``servers``) member maps a server name to either a command to run
(``command``/``args``/``env``/``cwd``: stdio) or a ``url`` (streamable HTTP, or legacy
SSE with ``"type": "sse"``). toolbridge adds a few optional keys per server: tool
``include``/``exclude`` filters, ``timeout``, ``connect_timeout``, ``trusted``,
``require_approval`` and ``defer_loading``. Every mistake is reported with the server's
name and the fix.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolbridge.core.errors import ToolConfigError

__all__ = ["MCPServerConfig", "Transport", "load_mcp_config"]

Transport = Literal["stdio", "http", "sse"]

_TRANSPORT_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}
_KEYS = frozenset(
    {
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "type",
        "transport",
        "include",
        "exclude",
        "timeout",
        "connect_timeout",
        "trusted",
        "require_approval",
        "disabled",
        "defer_loading",
    }
)
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}\Z")


@dataclass(frozen=True, slots=True)
class MCPServerConfig:
    """One MCP server: how to reach it, which of its tools to take, and how far to trust it.

    `env` is the whole extra environment of a stdio server: besides it, the process
    gets only the SDK's short list of safe variables (``PATH``, ``HOME``, ``USER``, ...),
    never the host's secrets. `trusted` lets the server's annotations loosen policy
    (``readOnlyHint`` makes a tool read-only and concurrency-safe); for an untrusted
    server they can only make it stricter.
    """

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    timeout: float | None = None
    connect_timeout: float = 30.0
    trusted: bool = False
    require_approval: bool = False
    defer_loading: bool | None = None
    """Under tool search: true defers every tool of the server (found by search, never
    sent up front), false always sends them, absent leaves it to the size policy."""

    def wants(self, tool_name: str) -> bool:
        """Whether the include/exclude filters (names or shell-style patterns) keep a tool."""
        if self.include and not any(fnmatch.fnmatchcase(tool_name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(tool_name, p) for p in self.exclude)

    @classmethod
    def from_dict(
        cls, name: str, raw: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
    ) -> MCPServerConfig:
        """Check one server entry; `${VAR}` in `env` and `headers` values reads `environ`."""
        where = f"MCP server {name!r}"
        if not isinstance(raw, Mapping):
            raise ToolConfigError(f"{where}: expected an object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - _KEYS)
        if unknown:
            raise ToolConfigError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"known keys: {', '.join(sorted(_KEYS))}"
            )
        if not _SERVER_NAME.match(name):
            raise ToolConfigError(
                f"{where}: a server name must be 1-40 letters, digits, '_' or '-' "
                "(it becomes part of every tool name, mcp_<server>_<tool>)"
            )
        environ = os.environ if environ is None else environ
        transport = _transport(where, raw)
        command = _optional_str(where, raw, "command")
        url = _optional_str(where, raw, "url")
        if transport == "stdio":
            if command is None:
                raise ToolConfigError(f'{where}: a stdio server needs "command" (or give a "url")')
            if url is not None:
                raise ToolConfigError(f'{where}: give either "command" or "url", not both')
        elif url is None or not url.startswith(("http://", "https://")):
            raise ToolConfigError(f'{where}: {transport} needs a "url" starting with http(s)://')
        elif command is not None:
            raise ToolConfigError(f'{where}: give either "command" or "url", not both')
        return cls(
            name=name,
            transport=transport,
            command=command,
            args=_strings(where, raw, "args"),
            env=_expand(where, _string_map(where, raw, "env"), environ),
            cwd=_optional_str(where, raw, "cwd"),
            url=url,
            headers=_expand(where, _string_map(where, raw, "headers"), environ),
            include=_strings(where, raw, "include"),
            exclude=_strings(where, raw, "exclude"),
            timeout=_seconds(where, raw, "timeout", None),
            connect_timeout=_seconds(where, raw, "connect_timeout", 30.0) or 30.0,
            trusted=_flag(where, raw, "trusted"),
            require_approval=_flag(where, raw, "require_approval"),
            defer_loading=_optional_flag(where, raw, "defer_loading"),
        )


def load_mcp_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
) -> list[MCPServerConfig]:
    """Servers from a config file path or an already parsed dict, disabled ones left out.

    Accepts ``{"mcpServers": {...}}``, VS Code's ``{"servers": {...}}`` or the bare
    mapping of names to servers.
    """
    if isinstance(source, Mapping):
        data: Any = source
        origin = "the MCP config"
    else:
        path = Path(source)
        origin = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ToolConfigError(f"MCP config {origin} does not exist") from None
        except RecursionError:  # the decoder recurses once per level of nesting
            raise ToolConfigError(f"MCP config {origin} is nested too deeply") from None
        except ValueError as exc:  # not JSON, not UTF-8, or a number of 4,300+ digits
            raise ToolConfigError(f"MCP config {origin} is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ToolConfigError(f'{origin}: expected a JSON object with "mcpServers"')
    servers = data.get("mcpServers", data.get("servers", data))
    if not isinstance(servers, Mapping):
        raise ToolConfigError(f'{origin}: "mcpServers" must map server names to objects')
    configs = []
    for name, raw in servers.items():
        if isinstance(raw, Mapping) and raw.get("disabled") is True:
            continue
        configs.append(MCPServerConfig.from_dict(str(name), raw, environ=environ))
    return configs


# --- field checks -------------------------------------------------------------------


def _transport(where: str, raw: Mapping[str, Any]) -> Transport:
    declared = raw.get("type", raw.get("transport"))
    if declared is None:
        return "http" if "url" in raw and "command" not in raw else "stdio"
    if not isinstance(declared, str) or declared not in _TRANSPORT_ALIASES:
        raise ToolConfigError(
            f'{where}: unknown transport {declared!r}; use "stdio", "http" (streamable HTTP) '
            'or "sse" (legacy)'
        )
    return _TRANSPORT_ALIASES[declared]


def _optional_str(where: str, raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ToolConfigError(f"{where}: {key!r} must be a string, got {type(value).__name__}")


def _strings(where: str, raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, ())
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ToolConfigError(f"{where}: {key!r} must be a list of strings")
    if not all(isinstance(item, str) for item in value):
        raise ToolConfigError(f"{where}: every item of {key!r} must be a string")
    return tuple(value)


def _string_map(where: str, raw: Mapping[str, Any], key: str) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ToolConfigError(f"{where}: {key!r} must map names to string values")
    return dict(value)


def _expand(where: str, values: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    def substitute(match: re.Match[str]) -> str:
        variable = match.group(1)
        if variable not in environ:
            raise ToolConfigError(
                f"{where}: ${{{variable}}} is not set in the environment; set it or write the "
                "value into the config"
            )
        return environ[variable]

    return {key: _VARIABLE.sub(substitute, value) for key, value in values.items()}


def _seconds(where: str, raw: Mapping[str, Any], key: str, default: float | None) -> float | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < math.inf  # JSON reads 1e400 and Infinity as inf: no limit at all
    ):
        raise ToolConfigError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


def _flag(where: str, raw: Mapping[str, Any], key: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise ToolConfigError(f"{where}: {key!r} must be true or false")
    return value


def _optional_flag(where: str, raw: Mapping[str, Any], key: str) -> bool | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, bool):
        raise ToolConfigError(f"{where}: {key!r} must be true or false (or left out)")
    return value
