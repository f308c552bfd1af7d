"""toolbridge: the layer between a language model's tool calls and real code.

Find the tool, turn the model's raw arguments into typed, validated ones, run the
call safely, and hand every outcome back as a well-formed tool result.
"""

import importlib
import logging
from typing import TYPE_CHECKING, Any

from toolbridge.approval import ApprovalRequest
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
from toolbridge.executor import ExecutionPolicy, ExecutorHook, ToolBatch, ToolExecutor
from toolbridge.function_tool import FunctionTool, tool
from toolbridge.isolation import IsolatedFunctionTool, isolated_tool
from toolbridge.loader import ToolLoader
from toolbridge.outcomes import (
    EventType,
    Outcomes,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
    tool_result_messages,
)
from toolbridge.progress import ToolProgress, report_progress
from toolbridge.registry import PreparedCall, ToolRegistry
from toolbridge.results import PAGE_METADATA_KEY, SAVED_METADATA_KEY, ResultStore
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

if TYPE_CHECKING:
    from toolbridge.agent import AgentRunner, ApprovalDecision, RunResult, RunState, StopReason

# The agent loop pulls in every provider format; it is imported on first use so that
# `import toolbridge` stays as light as the call path needs.
_LAZY = {
    name: "toolbridge.agent"
    for name in ("AgentRunner", "ApprovalDecision", "RunResult", "RunState", "StopReason")
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
