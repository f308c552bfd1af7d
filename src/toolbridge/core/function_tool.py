"""Tools from plain functions: the `@tool` decorator and `FunctionTool`.

The decorated function stays callable as before. Async functions run on the event
loop; sync functions run in a worker thread so they never block it - unless declared
``inline=True``: a cheap, non-blocking sync function then runs on the loop itself,
saving the thread hop (about 20x less overhead per call). A call in a thread starts when
a thread runs it (`Tool.defers_start`): with more calls than threads, the rest wait in
the pool's queue, not running yet for the journal or the event listeners. An inline
call cannot be interrupted: a timeout or a cancel takes effect only after it returns,
and nothing else on the loop runs meanwhile. A parameter annotated with `ToolContext`
is filled in at call time and is not in the schema, so the model can neither see nor
set it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, overload

from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import freeze
from toolbridge.core.signature import function_signature
from toolbridge.core.tool import Tool, ToolContext, current_context
from toolbridge.core.work_start import WorkNotStarted, WorkStart, current_work_start

__all__ = ["FunctionTool", "tool"]


class FunctionTool(Tool):
    """A `Tool` whose `execute` calls a Python function with typed arguments."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        exclusive: bool = False,
        concurrency_safe: bool | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
        inline: bool = False,
        defer_loading: bool | None = None,
    ) -> None:
        signature = function_signature(fn, context_type=ToolContext)
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description if description is not None else signature.description
        self.parameters = freeze(signature.schema)
        self.read_only = read_only
        self.exclusive = exclusive
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.defer_loading = defer_loading
        self._concurrency_safe = concurrency_safe
        self._converter = signature.converter
        self._context_param = signature.context_param
        self._is_async = inspect.iscoroutinefunction(fn)
        if inline and self._is_async:
            raise ToolDefinitionError(
                f"tool {self.name!r}: inline=True is for sync functions; an async function "
                "already runs on the event loop"
            )
        self.inline = inline
        # __doc__, __name__, __module__... only: the function's own __dict__ must not
        # overwrite this tool's name or parameters
        functools.update_wrapper(self, fn, updated=())

    @property
    def defers_start(self) -> bool:
        # Read at each call, not fixed when made: `inline` may be switched afterwards.
        return not self._is_async and not self.inline  # it waits for a thread

    @property
    def concurrency_safe(self) -> bool:
        if self._concurrency_safe is not None:
            return self._concurrency_safe
        return self.read_only and not self.exclusive

    def convert_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """Turn validated JSON values into the Python types the function declares.

        Only parameters whose JSON value is not already the Python value (datetime, Enum,
        models, tuples, ...) go through pydantic, all in one call.
        """
        if self._converter is None:
            return args
        return {**args, **self._converter(args)}

    def execute(self, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        # Not `async def`: handing back the function's own coroutine saves a frame per call.
        if self._context_param is not None:
            kwargs[self._context_param] = current_context()
        if self._is_async:
            coroutine: Coroutine[Any, Any, Any] = self.fn(**kwargs)
            return coroutine
        if self.inline:
            return self._on_loop(kwargs)
        return self._in_thread(kwargs)

    async def _on_loop(self, kwargs: dict[str, Any]) -> Any:
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _in_thread(self, kwargs: dict[str, Any]) -> Any:
        start = current_work_start()
        if start is None:
            result = await asyncio.to_thread(self.fn, **kwargs)
        else:  # a worker thread may not be free yet: the call starts when one runs it
            result = await asyncio.to_thread(_once_started, start, self.fn, kwargs)
        if inspect.isawaitable(result):  # a sync wrapper around async code
            result = await result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def _once_started(start: WorkStart, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run `fn` in its worker thread once `start` lets it (see `toolbridge.core.work_start`)."""
    if not start.enter():
        raise WorkNotStarted(f"{getattr(fn, '__name__', 'the tool')} did not start")
    return fn(**kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    exclusive: bool = False,
    concurrency_safe: bool | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
    inline: bool = False,
    defer_loading: bool | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    **options: Any,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a function: ``@tool`` or ``@tool(name=..., read_only=True, ...)``.

    ``inline=True`` runs a sync function on the event loop instead of a worker thread:
    for cheap code that never blocks (no I/O, no sleeps), since it cannot be interrupted.
    ``defer_loading=True`` keeps its definition out of requests under tool search until
    the model finds it (`toolbridge.core.tool_search`).
    """
    if fn is not None:
        return FunctionTool(fn, **options)

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(function, **options)

    return decorate
