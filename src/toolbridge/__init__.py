"""toolbridge: the layer between a language model's tool calls and real code.

Find the tool, turn the model's raw arguments into typed, validated ones, run the
call safely, and hand every outcome back as a well-formed tool result.
"""

import importlib
import logging
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolbridge.agent import (
        AgentRunner,
        ApprovalDecision,
        RunResult,
        RunState,
        StopReason,
    )
    from toolbridge.approval import (
        ApprovalRequest,
    )
    from toolbridge.calls import (
        Repair,
        ToolCallRequest,
        decode_arguments,
        parse_tool_arguments,
        repair_arguments_for_replay,
    )
    from toolbridge.errors import (
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
    from toolbridge.executor import (
        ExecutionPolicy,
        ExecutorHook,
        ToolBatch,
        ToolExecutor,
    )
    from toolbridge.function_tool import (
        FunctionTool,
        tool,
    )
    from toolbridge.isolation import (
        IsolatedFunctionTool,
        isolated_tool,
    )
    from toolbridge.loader import (
        ToolLoader,
    )
    from toolbridge.outcomes import (
        EventType,
        Outcomes,
        OutcomeStatus,
        ToolEvent,
        ToolOutcome,
        tool_result_messages,
    )
    from toolbridge.progress import (
        ToolProgress,
        report_progress,
    )
    from toolbridge.registry import (
        PreparedCall,
        ToolRegistry,
    )
    from toolbridge.results import (
        PAGE_METADATA_KEY,
        SAVED_METADATA_KEY,
        ResultStore,
    )
    from toolbridge.tool import (
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

# Every name loads on first use: `import toolbridge` (and so the command line's
# `--version` and `--help`) does not pay for the executor, pydantic or the provider
# formats until a name is asked for.
_LAZY: dict[str, str] = {
    "AgentRunner": "toolbridge.agent",
    "ApprovalDecision": "toolbridge.agent",
    "ApprovalRequest": "toolbridge.approval",
    "ArgumentIssue": "toolbridge.errors",
    "ArgumentsError": "toolbridge.errors",
    "ContentBlock": "toolbridge.tool",
    "ErrorKind": "toolbridge.errors",
    "EventType": "toolbridge.outcomes",
    "ExecutionPolicy": "toolbridge.executor",
    "ExecutorHook": "toolbridge.executor",
    "FunctionTool": "toolbridge.function_tool",
    "ImageBlock": "toolbridge.tool",
    "IsolatedFunctionTool": "toolbridge.isolation",
    "JsonBlock": "toolbridge.tool",
    "NetworkViolation": "toolbridge.errors",
    "OutcomeStatus": "toolbridge.outcomes",
    "Outcomes": "toolbridge.outcomes",
    "PAGE_METADATA_KEY": "toolbridge.results",
    "PolicyViolation": "toolbridge.errors",
    "PreparedCall": "toolbridge.registry",
    "Repair": "toolbridge.calls",
    "ResultStore": "toolbridge.results",
    "RunResult": "toolbridge.agent",
    "RunState": "toolbridge.agent",
    "SAVED_METADATA_KEY": "toolbridge.results",
    "StopReason": "toolbridge.agent",
    "TextBlock": "toolbridge.tool",
    "Tool": "toolbridge.tool",
    "ToolBatch": "toolbridge.executor",
    "ToolCallRequest": "toolbridge.calls",
    "ToolConfigError": "toolbridge.errors",
    "ToolContext": "toolbridge.tool",
    "ToolDefinitionError": "toolbridge.errors",
    "ToolError": "toolbridge.errors",
    "ToolEvent": "toolbridge.outcomes",
    "ToolExecutionError": "toolbridge.errors",
    "ToolExecutor": "toolbridge.executor",
    "ToolLoader": "toolbridge.loader",
    "ToolOutcome": "toolbridge.outcomes",
    "ToolProgress": "toolbridge.progress",
    "ToolRegistry": "toolbridge.registry",
    "ToolResult": "toolbridge.tool",
    "ToolbridgeError": "toolbridge.errors",
    "WorkspaceViolation": "toolbridge.errors",
    "current_context": "toolbridge.tool",
    "decode_arguments": "toolbridge.calls",
    "isolated_tool": "toolbridge.isolation",
    "parse_tool_arguments": "toolbridge.calls",
    "repair_arguments_for_replay": "toolbridge.calls",
    "report_progress": "toolbridge.progress",
    "tool": "toolbridge.function_tool",
    "tool_parameters": "toolbridge.tool",
    "tool_result_messages": "toolbridge.outcomes",
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
    """The package's module type: importing the submodule ``toolbridge.tool`` sets the
    package's attribute ``tool``, which must stay the `tool` decorator (as it was when
    every name was imported here, the decorator last)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__version__ = "0.1.0"

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
