"""Run a blocking function in a child process that is killed when the call is cancelled.

A sync tool in a thread cannot be stopped: a timeout only abandons the thread, which
keeps running (and holding files, sockets, CPU). `IsolatedFunctionTool` runs the
function in a fresh ``python`` process instead; a timeout or a cancelled batch
kills that process and waits for it, so nothing is left behind. The price is a
process start per call (tens of milliseconds) and picklable arguments and results.

The importability rule: the child finds the function by its module and qualified name,
so it must be defined at the top level of an importable module (not a lambda, a
closure, or a script run as ``__main__``). Decorating it with `isolated_tool` is fine:
the child unwraps the tool it finds under that name.
"""

from __future__ import annotations

import asyncio
import pickle
import sys
from collections.abc import Callable
from typing import Any

from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.function_tool import FunctionTool
from toolbridge.core.tool import current_context

__all__ = ["IsolatedFunctionTool", "WorkerError", "isolated_tool", "run_in_subprocess"]

# The child: take the parent's sys.path, then (module, qualname, kwargs); import the function
# (unwrapping a tool that decorates it), run it with stdout sent to stderr (so prints cannot
# corrupt the reply), and write back ("ok", value) or ("error", exc).
_WORKER = """
import importlib, os, pickle, sys
reply = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
module, qualname, kwargs = pickle.load(sys.stdin.buffer)
try:
    fn = importlib.import_module(module)
    for part in qualname.split("."):
        fn = getattr(fn, part)
    tools = sys.modules.get("toolbridge.core.function_tool")
    if tools is not None and isinstance(fn, tools.FunctionTool):
        fn = fn.fn
    message = ("ok", fn(**kwargs))
except Exception as exc:
    message = ("error", exc)
try:
    data = pickle.dumps(message)
except Exception as exc:
    if message[0] == "error":
        detail = f"{type(message[1]).__name__}: {message[1]}"
    else:
        detail = f"the result could not be sent back (pickle failed: {exc})"
    data = pickle.dumps(("error", RuntimeError(detail)))
reply.write(data)
reply.flush()
"""
_BOOTSTRAP = "import sys, pickle; sys.path[:0] = pickle.load(sys.stdin.buffer); exec(sys.argv[1])"


class WorkerError(RuntimeError):
    """The child process died or answered with something that is not a result."""


async def run_in_subprocess(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call ``fn(**kwargs)`` in a new Python process; kill it if this coroutine is cancelled.

    Exceptions raised by `fn` are re-raised here (by type, when they pickle).
    """
    payload = pickle.dumps(sys.path) + pickle.dumps((fn.__module__, fn.__qualname__, kwargs))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _BOOTSTRAP,
        _WORKER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        output, _ = await process.communicate(payload)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if process.returncode != 0 or not output:
        raise WorkerError(
            f"the worker process for {getattr(fn, '__qualname__', fn)!r} exited with code "
            f"{process.returncode} without a result"
        )
    status, value = pickle.loads(output)
    if status == "error":
        raise value
    return value


class IsolatedFunctionTool(FunctionTool):
    """A function tool whose sync function runs in a child process, killable on timeout."""

    def __init__(self, fn: Callable[..., Any], **options: Any) -> None:
        qualname = getattr(fn, "__qualname__", "")
        module = getattr(fn, "__module__", None)
        if "<locals>" in qualname or "<lambda>" in qualname or module in (None, "__main__"):
            raise ToolDefinitionError(
                f"isolated tool {qualname!r} (module {module!r}) must be a function at the top "
                "level of an importable module: the child process imports it by module and "
                "name, and a script's __main__ is not importable there"
            )
        if options.get("inline"):
            raise ToolDefinitionError(
                f"isolated tool {qualname!r} cannot be inline: it runs in a child process"
            )
        super().__init__(fn, **options)
        if self._is_async:
            raise ToolDefinitionError(
                f"isolated tool {self.name!r} is async; isolation is for blocking sync "
                "functions (async tools are cancelled on timeout already)"
            )

    @property
    def defers_start(self) -> bool:
        # Its work starts at once, in a child process, not when a worker thread is free, and
        # never asks the call's WorkStart: saying it defers would keep its journal row
        # queued while it runs (run again unasked after a crash or a stop), keep its
        # call_started from listeners, and make its timeout say that nothing of it ran.
        return False

    async def execute(self, **kwargs: Any) -> Any:
        if self._context_param is not None:
            kwargs[self._context_param] = current_context()
        return await run_in_subprocess(self.fn, kwargs)


def isolated_tool(**options: Any) -> Callable[[Callable[..., Any]], IsolatedFunctionTool]:
    """Decorator like ``@tool(...)`` for a blocking function that must run in a subprocess."""

    def decorate(fn: Callable[..., Any]) -> IsolatedFunctionTool:
        return IsolatedFunctionTool(fn, **options)

    return decorate
