"""The errors only a cluster has (no worker took a call, a worker failed outside the tool,
a call was cancelled there, a worker died) and the `Invocation` of a call answered with
one. Every other text comes from the registry, as locally."""

from __future__ import annotations

from toolbridge.backends.ray.calls import Pending, may_retry
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.registry import Invocation
from toolbridge.core.tool import ToolResult


def failed_invocation(error: ToolError, exception: BaseException | None = None) -> Invocation:
    return Invocation(ToolResult.error(error), None, error, exception)


def no_worker_error(call: Pending) -> ToolError:
    """A call no worker took before its deadline: say which resource no node has, if so."""
    name = call.tool.name
    missing = call.pool.missing() if call.pool.needs else []
    if missing:
        offers = " or ".join(repr(key) for key in missing)
        return ToolError(
            ErrorKind.EXECUTION_ERROR,
            f"no worker offers resource {offers}, which tool {name!r} needs: no node of the "
            "Ray cluster has it, so the call did not run.",
            "Do not call this tool again now; tell the user the cluster needs a node with "
            f"that resource (the tool asks for {dict(call.pool.needs)}).",
        )
    limit = call.time_limit
    within = f"its time limit of {limit:g} s" if limit is not None else "the time allowed"
    return ToolError(
        ErrorKind.TIMEOUT,
        f"tool {name!r} did not start within {within}: no Ray worker for it was up in "
        "time (the cluster is busy or still starting one), so the call did not run.",
        "Try again later, or tell the user the cluster is short of workers.",
    )


def bad_resources_error(tool_name: str, why: str) -> ToolError:
    """A call of a tool whose ``ray_resources`` Ray cannot be asked for (`why`)."""
    return ToolError(
        ErrorKind.EXECUTION_ERROR,
        f"tool {tool_name!r} cannot run on Ray: {why}, so the call did not run.",
        "Do not call this tool again; tell the user its ray_resources need fixing.",
    )


def worker_failed_error(tool_name: str, cause: str) -> ToolError:
    return ToolError(
        ErrorKind.EXECUTION_ERROR,
        f"the worker running {tool_name!r} failed outside the tool: {cause}.",
        "Tell the user; the cluster or its tool source needs attention.",
    )


def cancelled_error(tool_name: str) -> ToolError:
    return ToolError(
        ErrorKind.CANCELLED,
        f"the call to {tool_name!r} was cancelled before it finished.",
        "It may have partly run: check its effects before calling it again.",
    )


def worker_lost_error(call: Pending, exc: Exception | None) -> ToolError:
    again = (
        f" (tried {call.tries} times)" if may_retry(call)
        else " (not retried: it may have side effects)"
    )  # fmt: skip
    return ToolError(
        ErrorKind.WORKER_LOST,
        f"the worker running {call.tool.name!r} died before it answered{again}; it may have "
        f"partly run. Cause: {type(exc).__name__ if exc else 'unknown'}.",
        "Check its effects before calling it again.",
    )
