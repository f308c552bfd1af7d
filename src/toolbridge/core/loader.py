"""`ToolLoader`: finds built-in tools by package scan and plugins by entry point.

Built-ins are the `Tool` subclasses (and `@tool` functions) defined in the modules of
`toolbridge.tools`; plugins are whatever the entry-point group ``toolbridge.tools``
names: a `Tool` subclass, a `Tool` instance, or a list of them. Built-ins win name
clashes. A plugin that fails to import or to construct is logged and skipped; a
configuration that does not validate is an error that names the tool and the field.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolbridge.core.errors import ToolConfigError, ToolDefinitionError
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool, ToolContext

__all__ = ["ENTRY_POINT_GROUP", "SkippedTool", "ToolLoader"]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "toolbridge.tools"
BUILTIN_PACKAGE = "toolbridge.tools"

Candidate = type[Tool] | Tool


@dataclass(frozen=True, slots=True)
class SkippedTool:
    """A tool or plugin that was not loaded, and why (also logged)."""

    source: str
    reason: str


class ToolLoader:
    """Discovers tool classes and builds the enabled ones for a `ToolContext`."""

    def __init__(self, package: str = BUILTIN_PACKAGE, group: str = ENTRY_POINT_GROUP) -> None:
        self.package = package
        self.group = group
        self.skipped: list[SkippedTool] = []

    def discover(self) -> list[tuple[str, Candidate]]:
        """Built-in candidates: every public module of the package, scanned for tools."""
        found: list[tuple[str, Candidate]] = []
        package = importlib.import_module(self.package)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if info.name.startswith("_"):
                continue
            module_name = f"{self.package}.{info.name}"
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                self._skip(module_name, f"import failed: {exc!r}", error=exc)
                continue
            found.extend((module_name, c) for c in _tools_in_module(module))
        return found

    def discover_plugins(self) -> list[tuple[str, Candidate]]:
        """Plugin candidates from the entry-point group, each loaded in isolation."""
        from importlib import metadata  # email, zipfile, csv...: only when plugins are asked for

        found: list[tuple[str, Candidate]] = []
        for entry_point in sorted(metadata.entry_points(group=self.group), key=lambda e: e.name):
            source = f"entry point {entry_point.name!r} ({entry_point.value})"
            try:
                loaded = entry_point.load()
            except Exception as exc:
                self._skip(source, f"import failed: {exc!r}", error=exc)
                continue
            items = loaded if isinstance(loaded, list | tuple) else [loaded]
            for item in items:
                if _is_tool_candidate(item):
                    found.append((source, item))
                else:
                    self._skip(source, f"{item!r} is not a Tool subclass or instance")
        return found

    def load(self, ctx: ToolContext | None = None, *, scope: str = "default") -> list[Tool]:
        """Build every enabled tool of `scope`: built-ins first, then plugins."""
        ctx = ctx or ToolContext()
        self.skipped = []
        tools: dict[str, Tool] = {}
        builtins = self.discover()
        for origin, candidates in (("built-in", builtins), ("plugin", self.discover_plugins())):
            for source, candidate in candidates:
                built = self._build(source, candidate, ctx, scope)
                for tool in [built, *built.companions()] if built is not None else []:
                    if tool.name in tools:
                        self._skip(
                            source,
                            f"{origin} tool {tool.name!r} clashes with an already loaded tool "
                            "of that name; the first one (built-ins first) is kept",
                            level=logging.WARNING,
                        )
                        continue
                    tools[tool.name] = tool
        return list(tools.values())

    def registry(self, ctx: ToolContext | None = None, *, scope: str = "default") -> ToolRegistry:
        """A new `ToolRegistry` holding `load(ctx, scope=scope)`; a tool the registry refuses
        (bad name, bad schema) is logged and skipped like a plugin that fails to build."""
        ctx = ctx or ToolContext()
        registry = ToolRegistry(context=ctx)
        for tool in self.load(ctx, scope=scope):
            try:
                registry.register(tool)
            except ToolDefinitionError as exc:
                self._skip(f"tool {tool.name!r} ({type(tool).__module__})", str(exc), error=exc)
        return registry

    def _build(
        self, source: str, candidate: Candidate, ctx: ToolContext, scope: str
    ) -> Tool | None:
        if scope not in candidate.scopes and "*" not in candidate.scopes:
            return None
        if isinstance(candidate, Tool):
            return candidate
        try:
            tool_ctx = dataclasses.replace(ctx, tool_config=_tool_config(candidate, ctx))
            if not candidate.enabled(tool_ctx):
                return None
            tool = candidate.create(tool_ctx)
        except ToolConfigError:
            raise  # a configuration the user wrote is wrong: say so, do not drop the tool
        except Exception as exc:
            self._skip(source, f"{candidate.__name__} could not be built: {exc!r}", error=exc)
            return None
        if not isinstance(tool, Tool):
            self._skip(source, f"{candidate.__name__}.create() returned {tool!r}, not a Tool")
            return None
        return tool

    def _skip(
        self,
        source: str,
        reason: str,
        *,
        error: Exception | None = None,
        level: int = logging.ERROR,
    ) -> None:
        self.skipped.append(SkippedTool(source, reason))
        logger.log(level, "skipping %s: %s", source, reason, exc_info=error)


def _tool_config(cls: type[Tool], ctx: ToolContext) -> Any:
    model = cls.config_cls()
    if model is None:
        return None
    key = cls.config_key or cls.name
    raw = ctx.config.get(key, {})
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"field {'.'.join(str(p) for p in err['loc']) or '(root)'!r}: {err['msg']}"
            for err in exc.errors()
        )
        raise ToolConfigError(
            f"configuration of tool {cls.name!r} (section {key!r}) is invalid: {problems}"
        ) from None


def _is_tool_candidate(item: Any) -> bool:
    if isinstance(item, Tool):
        return True
    return inspect.isclass(item) and issubclass(item, Tool) and not inspect.isabstract(item)


def _tools_in_module(module: Any) -> Iterator[Candidate]:
    for value in vars(module).values():
        if isinstance(value, Tool):
            if getattr(value, "__module__", None) == module.__name__:
                yield value
        elif (
            _is_tool_candidate(value)
            and value.__module__ == module.__name__
            and isinstance(value.name, str)
            and value.name
        ):
            yield value
