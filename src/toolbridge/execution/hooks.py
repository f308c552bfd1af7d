"""Executor hooks: `ExecutorHook`, and how the executor asks one without trusting it.

A hook steers a call by what it returns. A failing hook is logged and ignored; a
`before_call` answer that is not one it may give refuses the call (fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, PolicyViolation, ToolError
from toolbridge.core.registry import PreparedCall, describe_exception, malformed_result_error
from toolbridge.core.results import MalformedResult, check_result
from toolbridge.core.tool import ToolResult
from toolbridge.execution.outcomes import ToolOutcome

__all__ = ["BeforeCall", "ExecutorHook", "before_call_verdict", "overrides", "safe_hook"]

logger = logging.getLogger(__name__)

BeforeCall = ToolResult | ToolError | PreparedCall | None
"""What `ExecutorHook.before_call` may return (see there)."""


class ExecutorHook:
    """Executor-level hooks; override what you need. A failing hook is logged and ignored.

    Hooks steer calls by what they return (None changes nothing):

    - `before_call` runs after the loop guard and approval, just before the tool. It may
      return a `ToolError` to refuse the call with it, a `ToolResult` to answer the call
      without running the tool (a cache, a dry run), or a `PreparedCall` of the same
      tool, from ``registry.prepare_call``, to run with other (validated) arguments;
      such a call passes the loop guard and approval again. Raising a `PolicyViolation`
      refuses the call too, so a guard can be a hook.
    - `after_call` sees every outcome and may return a `ToolResult` to send instead (to
      redact a secret, say); an ok/error status follows the new result's `is_error`.
    - `on_error` sees every outcome whose status is error, after the `after_call` hooks.
    """

    async def before_call(self, call: ToolCallRequest, prepared: PreparedCall) -> BeforeCall:
        """Called just before a prepared call runs; see the class for what it may return."""
        return None

    async def after_call(self, outcome: ToolOutcome) -> ToolResult | None:
        """Called with every outcome, success or not; may return a replacement result."""
        return None

    async def on_error(self, outcome: ToolOutcome) -> None:
        """Called with every outcome whose status is error."""


def overrides(hook: ExecutorHook, name: str) -> bool:
    """Whether `hook` overrides method `name` (the executor calls only those)."""
    return getattr(type(hook), name) is not getattr(ExecutorHook, name)


async def safe_hook(method: Callable[[ToolOutcome], Awaitable[Any]], outcome: ToolOutcome) -> Any:
    """Call an `after_call`/`on_error` hook; a failure is logged and answers None."""
    try:
        return await method(outcome)
    except Exception:
        logger.exception("executor hook %r failed for call %r", method, outcome.call.id)
        return None


async def before_call_verdict(
    hook: ExecutorHook, call: ToolCallRequest, prepared: PreparedCall
) -> ToolResult | ToolError | PreparedCall | None:
    """What `hook.before_call` decided, checked: a bad answer refuses the call (fail closed)."""
    tool = prepared.tool
    assert tool is not None
    try:
        verdict = await hook.before_call(call, prepared)
    except PolicyViolation as exc:
        return describe_exception(tool.name, exc)
    except Exception:
        logger.exception("before_call hook %r failed for call %r", hook, call.id)
        return None
    if verdict is None or isinstance(verdict, ToolError):
        return verdict
    if isinstance(verdict, ToolResult):
        try:
            return check_result(verdict)
        except MalformedResult as exc:
            return malformed_result_error(tool.name, exc)
    if isinstance(verdict, PreparedCall):
        if verdict.error is not None:
            return verdict.error
        if verdict.tool is tool:
            return verdict
    logger.error(
        "before_call hook %r returned %r for call %r: expected None, a ToolError, a "
        "ToolResult, or a PreparedCall of the same tool; the call is refused",
        hook,
        type(verdict).__name__,
        call.id,
    )
    return ToolError(
        ErrorKind.POLICY_VIOLATION,
        f"the call to {tool.name!r} was refused by a check that could not decide.",
        "Tell the user; do not repeat the call.",
    )
