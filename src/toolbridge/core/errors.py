"""Error kinds, the error value sent back to the model, and the exception types.

Two audiences, two shapes: a `ToolError` is data that goes back to the model as a
tool result (it never escapes `prepare_call` or `execute`), while the exception
classes here are raised to the developer (bad tool definitions, bad config) or by
guards and tools (`PolicyViolation` and its subclasses), and classified by type.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "RETRY_HINT",
    "ArgumentIssue",
    "ArgumentsError",
    "ErrorKind",
    "NetworkViolation",
    "PolicyViolation",
    "ToolConfigError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolbridgeError",
    "WorkspaceViolation",
]

RETRY_HINT = "[Analyze the error above and try a different approach.]"


class ErrorKind(enum.StrEnum):
    """Machine-readable class of a failed call; stable strings, safe to persist."""

    UNKNOWN_TOOL = "unknown_tool"
    ARGUMENTS_NOT_JSON = "arguments_not_json"
    ARGUMENTS_NOT_OBJECT = "arguments_not_object"
    INVALID_ARGUMENTS = "invalid_arguments"
    EXECUTION_ERROR = "execution_error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    POLICY_VIOLATION = "policy_violation"
    WORKSPACE_VIOLATION = "workspace_violation"
    NETWORK_VIOLATION = "network_violation"
    REPEATED_CALL = "repeated_call"
    APPROVAL_DENIED = "approval_denied"
    INTERRUPTED = "interrupted"
    WORKER_LOST = "worker_lost"
    APPROVAL_REQUIRED = "approval_required"


@dataclass(frozen=True, slots=True)
class ArgumentIssue:
    """One reason the arguments were refused: where (JSON path) and what was wrong."""

    path: str
    message: str

    def render(self) -> str:
        return f"- at {self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class ToolError:
    """A failed call as the model will see it: what went wrong and what to do next."""

    kind: ErrorKind
    message: str
    hint: str = ""
    issues: tuple[ArgumentIssue, ...] = ()

    def render(self) -> str:
        """The text for the model: starts with ``Error``, one issue per line, then the hint."""
        lines = [f"Error: {self.message}"]
        lines.extend(issue.render() for issue in self.issues)
        if self.hint:
            lines.append(self.hint)
        return "\n".join(lines)


class ArgumentsError(ValueError):
    """Arguments that passed the schema but were refused by the tool's own conversion."""

    def __init__(self, issues: tuple[ArgumentIssue, ...]) -> None:
        super().__init__("; ".join(f"{i.path}: {i.message}" for i in issues))
        self.issues = issues


class ToolbridgeError(Exception):
    """Base class of the errors toolbridge raises to the developer."""


class ToolDefinitionError(ToolbridgeError, ValueError):
    """A tool cannot be registered: bad name, schema that is not an object schema, clash."""


class ToolConfigError(ToolbridgeError, ValueError):
    """A tool's configuration section does not match its ``config_cls``."""


class ToolExecutionError(Exception):
    """Raise from a tool to fail the call with a message written for the model.

    Unlike any other exception, its text is sent as is, without the exception type,
    and `hint` replaces the generic retry hint.
    """

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class PolicyViolation(Exception):
    """A hard safety boundary was hit. Classified by type, never by message text."""

    kind: ClassVar[ErrorKind] = ErrorKind.POLICY_VIOLATION
    hint: ClassVar[str] = (
        "This is a hard policy boundary, not a transient failure: do not retry it with "
        "another spelling, encoding or route. Choose a different approach or ask the user."
    )

    def __init__(self, message: str, *, target: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.target = target


class WorkspaceViolation(PolicyViolation):
    """A path resolves outside the workspace, or names something the guard refuses."""

    kind: ClassVar[ErrorKind] = ErrorKind.WORKSPACE_VIOLATION
    hint: ClassVar[str] = (
        "Only paths inside the workspace are allowed. This is a hard boundary: do not try "
        "other spellings, symlinks or encodings of the same path. Work with files inside "
        "the workspace, or ask the user."
    )


class NetworkViolation(PolicyViolation):
    """A URL or address is not allowed: private, loopback, metadata, bad scheme, ..."""

    kind: ClassVar[ErrorKind] = ErrorKind.NETWORK_VIOLATION
    hint: ClassVar[str] = (
        "Internal, private and local network addresses are blocked. This is a hard "
        "boundary: do not retry with another encoding, redirect or host name for the same "
        "target. Use a public URL, or ask the user."
    )
