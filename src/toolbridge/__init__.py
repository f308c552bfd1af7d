"""toolbridge: the layer between a language model's tool calls and real code.

Find the tool, turn the model's raw arguments into typed, validated ones, run the
call safely, and hand every outcome back as a well-formed tool result.
"""

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
from toolbridge.function_tool import FunctionTool, tool
from toolbridge.loader import ToolLoader
from toolbridge.registry import PreparedCall, ToolRegistry
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

__version__ = "0.1.0"

__all__ = [
    "ArgumentIssue",
    "ArgumentsError",
    "ContentBlock",
    "ErrorKind",
    "FunctionTool",
    "ImageBlock",
    "JsonBlock",
    "NetworkViolation",
    "PolicyViolation",
    "PreparedCall",
    "Repair",
    "TextBlock",
    "Tool",
    "ToolCallRequest",
    "ToolConfigError",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolLoader",
    "ToolRegistry",
    "ToolResult",
    "ToolbridgeError",
    "WorkspaceViolation",
    "__version__",
    "current_context",
    "decode_arguments",
    "parse_tool_arguments",
    "repair_arguments_for_replay",
    "tool",
    "tool_parameters",
]
