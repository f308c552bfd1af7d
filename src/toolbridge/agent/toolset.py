"""The tools a runner's requests carry, settled once when the runner is made.

The tools given (a registry, or Tool objects and plain functions) become one registry;
the structured answer goes natively where the model supports its schema, else through
the ``final_result`` tool; and a tool search defers the large rest, always sending the
skill tools and ``final_result``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from toolbridge.agent.model import ModelAdapter, NativeOutput, native_output_supported
from toolbridge.agent.output import OutputSpec
from toolbridge.core.function_tool import tool as function_tool
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool
from toolbridge.core.tool_search import DeferralPolicy, ToolDeferral, native_search_supported
from toolbridge.skills import SkillSet

__all__ = ["deferral", "native_output_for", "registry_of"]


def registry_of(tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] | None) -> ToolRegistry:
    """`tools` as a registry: a registry as it is, Tool objects and plain functions in one."""
    if tools is None:
        return ToolRegistry()
    if isinstance(tools, ToolRegistry):
        return tools
    items: list[Tool] = []
    for item in tools:
        if isinstance(item, Tool):
            items.append(item)
        elif callable(item):
            items.append(function_tool(item))
        else:
            raise TypeError(
                f"tools must be a ToolRegistry or Tool objects and functions, got "
                f"{type(item).__name__}"
            )
    return ToolRegistry(items)


def native_output_for(
    output: OutputSpec | None, mode: str, model: ModelAdapter
) -> NativeOutput | None:
    """The schema to send natively under `mode`, or None for the ``final_result`` tool."""
    if mode not in ("auto", "native", "tool"):
        raise ValueError(f"output_mode must be 'auto', 'native' or 'tool', got {mode!r}")
    if output is None or mode == "tool":
        return None
    native = output.native
    if native_output_supported(model, native):
        return native
    if mode == "native":
        why = f" ({native.closed_problem})" if native.closed_problem else ""
        raise ValueError(
            f"output_mode='native', but {type(model).__name__} has no native "
            f"structured output for this output type{why}; use output_mode='auto' or "
            "'tool' to answer through the final_result tool"
        )
    return None


def deferral(
    registry: ToolRegistry,
    option: DeferralPolicy | bool,
    skills: SkillSet | None,
    output: OutputSpec | None,
    native: NativeOutput | None,
    *,
    model: ModelAdapter,
) -> ToolDeferral | None:
    """The run's tool search under `option` (None: off); the skill tools and the
    ``final_result`` tool are always sent. The policy's mode picks the provider's own
    search (where `model` has it) or the local ``tool_search`` tool."""
    if option is False:
        return None
    if option is True:
        option = DeferralPolicy()
    if not isinstance(option, DeferralPolicy):
        raise TypeError(f"tool_search must be True, False or a DeferralPolicy, got {option!r}")
    keep = [tool.name for tool in skills.tools()] if skills is not None else []
    if output is not None and native is None:
        keep.append(output.tool_name)
    supported = native_search_supported(model)
    if option.mode == "native" and not supported:
        raise ValueError(
            f"DeferralPolicy(mode='native'), but {type(model).__name__} ({model.model}) has "
            "no provider tool search; use mode='auto' or 'local'"
        )
    return ToolDeferral(registry, option, keep=keep, native=option.mode != "local" and supported)
