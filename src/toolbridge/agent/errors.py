"""Typed model errors: what went wrong talking to the model, with the conversation so far.

Adapters map their SDK's exceptions (after the SDK's own retries) to these classes;
the runner fills in `conversation` and `state` before the error leaves `stream()`, so
nothing the run did is lost: save `exc.state` and resume once the cause is fixed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolbridge.core.errors import ToolbridgeError

if TYPE_CHECKING:
    from toolbridge.agent.messages import Message
    from toolbridge.agent.state import RunState

__all__ = [
    "ContextLengthError",
    "ModelAuthenticationError",
    "ModelConnectionError",
    "ModelError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelServerError",
    "RateLimitError",
]


class ModelError(ToolbridgeError):
    """The model call failed. `status` is the HTTP status when there was one; `cause`
    the SDK's exception. `conversation` and `state` are set by the runner."""

    def __init__(self, message: str, *, status: int | None = None, cause: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.cause = cause
        self.conversation: list[Message] = []
        self.state: RunState | None = None


class RateLimitError(ModelError):
    """HTTP 429: too many requests or tokens; wait and resume."""


class ContextLengthError(ModelError):
    """The conversation no longer fits the model's context window."""


class ModelAuthenticationError(ModelError):
    """The API key is missing, wrong, or not allowed to use this model."""


class ModelRequestError(ModelError):
    """The provider refused the request as malformed (HTTP 400-class, not the above)."""


class ModelServerError(ModelError):
    """The provider failed (HTTP 5xx) after the SDK's retries."""


class ModelConnectionError(ModelError):
    """The provider could not be reached or the connection broke."""


class ModelResponseError(ModelError):
    """The provider answered in a shape toolbridge could not read."""
