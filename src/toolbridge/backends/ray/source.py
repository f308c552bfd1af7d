"""`ToolSource`: how a worker builds its tools, from an importable factory or the tool
loader; the caller builds its own registry from the same source, so both sides agree."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import ToolContext


@dataclass(frozen=True, slots=True)
class ToolSource:
    """How a worker builds its tools: an importable factory, or the tool loader.

    `factory` is ``"module:attribute"``, a callable taking a `ToolContext` and returning a
    `ToolRegistry` or tools; without it, the built-in tools and plugins of `scope` are
    loaded. The caller builds its own registry from the same source (`registry`), so
    both sides agree on every tool's schema and flags.
    """

    factory: str | None = None
    scope: str = "default"

    def __post_init__(self) -> None:
        if self.factory is not None:
            module_name, _, attribute = self.factory.partition(":")
            if not module_name or not attribute:  # said here, not on each worker later
                raise ValueError(
                    f"factory {self.factory!r} must look like 'module:attribute', "
                    "e.g. 'my_tools:build'"
                )

    def registry(self, ctx: ToolContext) -> ToolRegistry:
        if self.factory is None:
            from toolbridge.core.loader import ToolLoader

            return ToolLoader().registry(ctx, scope=self.scope)
        module_name, _, attribute = self.factory.partition(":")
        built = getattr(importlib.import_module(module_name), attribute)(ctx)
        if isinstance(built, ToolRegistry):
            return built
        if not isinstance(built, Iterable):
            raise TypeError(
                f"factory {self.factory!r} returned {type(built).__name__}, not a "
                "ToolRegistry or a list of tools: make it return one of those"
            )
        return ToolRegistry(list(built), context=ctx)
