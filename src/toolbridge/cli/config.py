"""The ``--config`` file: TOML with ``[tools.<config_key>]`` sections and an ``[executor]`` table.

Each ``[tools.<key>]`` table is passed through unchanged as ``ToolContext.config[key]``;
the tool's own config model validates it when the tool is built. ``[executor]`` sets the
fields of `ExecutionPolicy` that have a plain value (numbers, booleans, strings), plus
``approval = "flag" | "writes"``. Anything else is one clear error naming the file and key.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolbridge.cli.app import CliError, ExitCode
from toolbridge.core.jsondata import nesting
from toolbridge.execution.approval import ApprovalRule, requires_approval_flag, writes_need_approval
from toolbridge.execution.executor import ExecutionPolicy

__all__ = ["APPROVAL_RULES", "CliConfig", "read_config"]

SECTIONS = ("executor", "tools")
MAX_CONFIG_BYTES = 1_000_000  # a configuration is a page of settings, not a data file
MAX_CONFIG_DEPTH = 32  # levels of nested tables and arrays; real configs use three
APPROVAL_RULES: dict[str, ApprovalRule] = {
    "flag": requires_approval_flag,
    "writes": writes_need_approval,
}


@dataclass(frozen=True, slots=True)
class CliConfig:
    """What a config file says: the tools' sections and the executor's policy."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    policy: ExecutionPolicy = field(default_factory=ExecutionPolicy)
    source: str = "the default configuration"


def read_config(path: Path | None) -> CliConfig:
    """Read and check `path` (None: the defaults). Every problem is a `CliError`."""
    if path is None:
        return CliConfig()
    data = _load_toml(path)
    where = str(path)
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise _bad(where, f"unknown section {unknown[0]!r}; known sections: {', '.join(SECTIONS)}")
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        raise _bad(where, '"tools" must be a table of [tools.<name>] sections')
    for key, section in tools.items():
        if not isinstance(section, dict):
            raise _bad(where, f"[tools.{key}] must be a table, got {_toml_type(section)}")
    executor = data.get("executor", {})
    if not isinstance(executor, dict):
        raise _bad(where, "[executor] must be a table")
    policy = _policy(where, executor)
    return CliConfig({k: dict(v) for k, v in tools.items()}, policy, f"config file {where!r}")


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise CliError(f"config file {str(path)!r} does not exist", ExitCode.CONFIG) from None
    except OSError as exc:
        message = f"cannot read config file {str(path)!r}: {exc.strerror or exc}"
        raise CliError(message, ExitCode.CONFIG) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise _bad(str(path), f"larger than {MAX_CONFIG_BYTES:,} bytes; is it the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(str(path), f"not UTF-8 text (byte {exc.start})") from None
    too_deep = _bad(str(path), f"nested more than {MAX_CONFIG_DEPTH} levels of tables and arrays")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _bad(str(path), f"not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise too_deep from None
    if nesting(data) > MAX_CONFIG_DEPTH:
        raise too_deep
    return data


def _policy(where: str, table: Mapping[str, Any]) -> ExecutionPolicy:
    settable = _settable_policy_fields()
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "approval":
            if value not in APPROVAL_RULES:
                known = ", ".join(repr(k) for k in APPROVAL_RULES)
                raise _bad(where, f"[executor] approval must be one of {known}, got {value!r}")
            values[key] = APPROVAL_RULES[value]
            continue
        accepts = settable.get(key)
        if accepts is None:
            known = ", ".join(sorted([*settable, "approval"]))
            raise _bad(where, f"unknown [executor] key {key!r}; known keys: {known}")
        if not accepts(value):
            raise _bad(where, f"[executor] {key} cannot be {value!r} ({_toml_type(value)})")
        values[key] = value
    try:
        return ExecutionPolicy(**values)
    except (TypeError, ValueError) as exc:
        raise _bad(where, f"[executor] {exc}") from None


def _settable_policy_fields() -> dict[str, typing.Callable[[Any], bool]]:
    """The policy fields a TOML value can set, each with a check of the value's type."""
    hints = typing.get_type_hints(ExecutionPolicy)
    checks: dict[str, typing.Callable[[Any], bool]] = {}
    for item in dataclasses.fields(ExecutionPolicy):
        check = _value_check(hints[item.name])
        if check is not None:
            checks[item.name] = check
    return checks


def _value_check(hint: Any) -> typing.Callable[[Any], bool] | None:
    """A type check for a field of type bool/int/float/str/Literal (or one of them | None)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kinds = [option for option in options if option is not type(None)]
    if len(kinds) != 1:
        return None
    kind = kinds[0]
    if kind is bool:
        return lambda v: isinstance(v, bool)
    if kind is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if kind is float:
        return lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    if kind is str:
        return lambda v: isinstance(v, str)
    if typing.get_origin(kind) is typing.Literal:
        allowed = typing.get_args(kind)
        return lambda v: v in allowed
    return None


def _toml_type(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), "a table" if isinstance(value, dict) else "an array"
    )


def _bad(where: str, problem: str) -> CliError:
    return CliError(f"config file {where!r}: {problem}", ExitCode.CONFIG)
