"""toolbridge: the layer between a language model's tool calls and real code.

Find the tool, turn the model's raw arguments into typed, validated ones, run the
call safely, and hand every outcome back as a well-formed tool result.
"""

import importlib
import importlib.machinery
import logging
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolbridge.agent import (
        AgentRunner,
        ApprovalDecision,
        RunResult,
        RunState,
        StopReason,
    )
    from toolbridge.core.calls import (
        Repair,
        ToolCallRequest,
        decode_arguments,
        parse_tool_arguments,
        repair_arguments_for_replay,
    )
    from toolbridge.core.errors import (
        ArgumentIssue,
        ArgumentsError,
        ErrorKind,
        NetworkViolation,
        PolicyViolation,
        ToolbridgeError,
        ToolConfigError,
        ToolDefinitionError,
        ToolError,
        ToolExecutionError,
        WorkspaceViolation,
    )
    from toolbridge.core.function_tool import (
        FunctionTool,
        tool,
    )
    from toolbridge.core.loader import (
        ToolLoader,
    )
    from toolbridge.core.registry import (
        PreparedCall,
        ToolRegistry,
    )
    from toolbridge.core.tool import (
        ContentBlock,
        ImageBlock,
        JsonBlock,
        TextBlock,
        Tool,
        ToolContext,
        ToolResult,
        current_context,
        tool_parameters,
    )
    from toolbridge.execution.approval import (
        ApprovalRequest,
    )
    from toolbridge.execution.executor import (
        ExecutionPolicy,
        ExecutorHook,
        ToolBatch,
        ToolExecutor,
    )
    from toolbridge.execution.isolation import (
        IsolatedFunctionTool,
        isolated_tool,
    )
    from toolbridge.execution.outcomes import (
        EventType,
        Outcomes,
        OutcomeStatus,
        ToolEvent,
        ToolOutcome,
        tool_result_messages,
    )
    from toolbridge.execution.progress import (
        ToolProgress,
        report_progress,
    )
    from toolbridge.execution.result_store import PAGE_METADATA_KEY, SAVED_METADATA_KEY, ResultStore
    from toolbridge.version import __version__

# Every name loads on first use: `import toolbridge` (and so the command line's
# `--version` and `--help`) does not pay for the executor, pydantic or the provider
# formats until a name is asked for.
_LAZY: dict[str, str] = {
    "__version__": "toolbridge.version",
    "AgentRunner": "toolbridge.agent",
    "ApprovalDecision": "toolbridge.agent",
    "ApprovalRequest": "toolbridge.execution.approval",
    "ArgumentIssue": "toolbridge.core.errors",
    "ArgumentsError": "toolbridge.core.errors",
    "ContentBlock": "toolbridge.core.tool",
    "ErrorKind": "toolbridge.core.errors",
    "EventType": "toolbridge.execution.outcomes",
    "ExecutionPolicy": "toolbridge.execution.executor",
    "ExecutorHook": "toolbridge.execution.executor",
    "FunctionTool": "toolbridge.core.function_tool",
    "ImageBlock": "toolbridge.core.tool",
    "IsolatedFunctionTool": "toolbridge.execution.isolation",
    "JsonBlock": "toolbridge.core.tool",
    "NetworkViolation": "toolbridge.core.errors",
    "OutcomeStatus": "toolbridge.execution.outcomes",
    "Outcomes": "toolbridge.execution.outcomes",
    "PAGE_METADATA_KEY": "toolbridge.execution.result_store",
    "PolicyViolation": "toolbridge.core.errors",
    "PreparedCall": "toolbridge.core.registry",
    "Repair": "toolbridge.core.calls",
    "ResultStore": "toolbridge.execution.result_store",
    "RunResult": "toolbridge.agent",
    "RunState": "toolbridge.agent",
    "SAVED_METADATA_KEY": "toolbridge.execution.result_store",
    "StopReason": "toolbridge.agent",
    "TextBlock": "toolbridge.core.tool",
    "Tool": "toolbridge.core.tool",
    "ToolBatch": "toolbridge.execution.executor",
    "ToolCallRequest": "toolbridge.core.calls",
    "ToolConfigError": "toolbridge.core.errors",
    "ToolContext": "toolbridge.core.tool",
    "ToolDefinitionError": "toolbridge.core.errors",
    "ToolError": "toolbridge.core.errors",
    "ToolEvent": "toolbridge.execution.outcomes",
    "ToolExecutionError": "toolbridge.core.errors",
    "ToolExecutor": "toolbridge.execution.executor",
    "ToolLoader": "toolbridge.core.loader",
    "ToolOutcome": "toolbridge.execution.outcomes",
    "ToolProgress": "toolbridge.execution.progress",
    "ToolRegistry": "toolbridge.core.registry",
    "ToolResult": "toolbridge.core.tool",
    "ToolbridgeError": "toolbridge.core.errors",
    "WorkspaceViolation": "toolbridge.core.errors",
    "current_context": "toolbridge.core.tool",
    "decode_arguments": "toolbridge.core.calls",
    "isolated_tool": "toolbridge.execution.isolation",
    "parse_tool_arguments": "toolbridge.core.calls",
    "repair_arguments_for_replay": "toolbridge.core.calls",
    "report_progress": "toolbridge.execution.progress",
    "tool": "toolbridge.core.function_tool",
    "tool_parameters": "toolbridge.core.tool",
    "tool_result_messages": "toolbridge.execution.outcomes",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


class _Package(types.ModuleType):
    """The package's module type: importing an old module path (``toolbridge.tool``, see
    `_MOVED`) sets the package's attribute of that name, which must stay the public name
    (the `tool` decorator), not the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


# Module paths before the modules moved into stage folders. They still import,
# as the same module objects, with a DeprecationWarning; they go in a later release.
_MOVED: dict[str, str] = {
    **{
        f"toolbridge.{name}": f"toolbridge.core.{name}"
        for name in (
            "calls",
            "errors",
            "function_tool",
            "jsondata",
            "jsontext",
            "loader",
            "naming",
            "pathlocks",
            "registry",
            "schema",
            "signature",
            "tool",
            "tool_search",
        )
    },
    **{
        f"toolbridge.{name}": f"toolbridge.execution.{name}"
        for name in (
            "approval",
            "exec_sessions",
            "executor",
            "isolation",
            "loop_guard",
            "outcomes",
            "process",
            "progress",
            "scheduling",
            "supervisor",
            "tracing",
        )
    },
    "toolbridge.results": "toolbridge.execution.result_store",
    "toolbridge.terminal": "toolbridge.security.terminal",
    "toolbridge.fs": "toolbridge.tools._fs",
    "toolbridge.html": "toolbridge.tools._html",
    "toolbridge.images": "toolbridge.tools._images",
    "toolbridge.patches": "toolbridge.tools._patches",
    "toolbridge.grep_worker": "toolbridge.search.grep_worker",
}

# Old paths whose module was split: the names it exported that live elsewhere than its
# new path now, by the module they live in. Such a path imports as a module of its own
# (`_SplitModule`), so that every name it had still imports from it.
_SPLIT: dict[str, dict[str, tuple[str, ...]]] = {
    "toolbridge.approval": {"toolbridge.core.registry": ("approval_required_error",)},
    "toolbridge.results": {
        "toolbridge.core.results": (
            "EMPTY_RESULT",
            "MalformedResult",
            "check_result",
            "estimate_tokens",
            "image_media_type",
            "text_length",
            "to_tool_result",
        ),
    },
    "toolbridge.schema": {"toolbridge.core.frozen": ("FrozenDict", "FrozenList", "freeze", "thaw")},
}


if TYPE_CHECKING:
    from importlib.abc import Loader as _Loader
else:
    _Loader = object  # importlib.abc costs 29 ms to import; a loader needs no base class


class _SplitModule(types.ModuleType):
    """An old path whose module was split (see `_SPLIT`): each name is read, set and
    deleted in the module it lives in now, as it was through the old path's one module."""

    __new_module__: types.ModuleType
    __moved_names__: dict[str, types.ModuleType]

    def __init__(self, name: str, new: types.ModuleType, moved: dict[str, types.ModuleType]):
        super().__init__(name, new.__doc__)
        self.__dict__["__new_module__"] = new
        self.__dict__["__moved_names__"] = moved
        self.__dict__["__all__"] = list(dict.fromkeys([*getattr(new, "__all__", ()), *moved]))

    def __home(self, name: str) -> types.ModuleType:
        return self.__moved_names__.get(name, self.__new_module__)

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self.__home(name), name)
        except AttributeError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") and name.endswith("__"):
            super().__setattr__(name, value)
        else:
            setattr(self.__home(name), name, value)

    def __delattr__(self, name: str) -> None:
        if name.startswith("__") and name.endswith("__"):
            super().__delattr__(name)
        else:
            delattr(self.__home(name), name)

    def __dir__(self) -> list[str]:
        return sorted({*self.__dict__, *dir(self.__new_module__), *self.__moved_names__})


class _MovedModules(_Loader):
    """Imports an old module path as the module that now lives at its new one."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = _MOVED[spec.name]
        split = _SPLIT.get(spec.name, {})
        elsewhere = "".join(
            f" ({', '.join(names)} to {home})" for home, names in sorted(split.items())
        )
        warnings.warn(
            f"{spec.name} moved to {new}{elsewhere}: import the public names from "
            "'toolbridge', or the module from its new path; the old path goes in a later release",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        if split:
            moved = {
                name: importlib.import_module(home)
                for home, names in split.items()
                for name in names
            }
            return _SplitModule(spec.name, module, moved)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system gave the module the old path's spec: give it back its own
        alias = module.__spec__.name if module.__spec__ is not None else module.__name__
        module.__spec__ = self._specs.pop(alias, module.__spec__)


# One finder for the process: a reload of this module makes a new class, which an
# isinstance check would not know (the finder reads this module's names when it runs).
if not any(
    type(finder).__module__ == __name__ and type(finder).__qualname__ == "_MovedModules"
    for finder in sys.meta_path
):
    sys.meta_path.append(_MovedModules())
sys.modules[__name__].__class__ = _Package


# A library logs and lets the application decide where it goes: without this, Python's
# last-resort handler would print warnings to stderr of programs that never asked.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "PAGE_METADATA_KEY",
    "SAVED_METADATA_KEY",
    "AgentRunner",
    "ApprovalDecision",
    "ApprovalRequest",
    "ArgumentIssue",
    "ArgumentsError",
    "ContentBlock",
    "ErrorKind",
    "EventType",
    "ExecutionPolicy",
    "ExecutorHook",
    "FunctionTool",
    "ImageBlock",
    "IsolatedFunctionTool",
    "JsonBlock",
    "NetworkViolation",
    "OutcomeStatus",
    "Outcomes",
    "PolicyViolation",
    "PreparedCall",
    "Repair",
    "ResultStore",
    "RunResult",
    "RunState",
    "StopReason",
    "TextBlock",
    "Tool",
    "ToolBatch",
    "ToolCallRequest",
    "ToolConfigError",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolEvent",
    "ToolExecutionError",
    "ToolExecutor",
    "ToolLoader",
    "ToolOutcome",
    "ToolProgress",
    "ToolRegistry",
    "ToolResult",
    "ToolbridgeError",
    "WorkspaceViolation",
    "__version__",
    "current_context",
    "decode_arguments",
    "isolated_tool",
    "parse_tool_arguments",
    "repair_arguments_for_replay",
    "report_progress",
    "tool",
    "tool_parameters",
    "tool_result_messages",
]
