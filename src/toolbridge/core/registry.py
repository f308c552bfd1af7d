"""`ToolRegistry`: keeps tools, emits stable definitions, prepares and runs one call.

`prepare_call` walks the fixed order of the design brief - resolve, parse, unwrap,
shape check, cast, validate, convert - and stops at the first failed step with a
`ToolError` for the model. Only an exact name runs; near names only feed the
"did you mean" of the error text.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from toolbridge.core.calls import (
    ArgumentsDecodeError,
    NumberOverflowError,
    Repair,
    decode_arguments,
    format_path,
)
from toolbridge.core.errors import (
    RETRY_HINT,
    ArgumentIssue,
    ArgumentsError,
    ErrorKind,
    PolicyViolation,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
)
from toolbridge.core.frozen import FrozenDict, FrozenList, freeze
from toolbridge.core.jsondata import text_may_hide_problems
from toolbridge.core.naming import NameIndex
from toolbridge.core.results import MalformedResult, to_tool_result
from toolbridge.core.schema import CompiledSchema, check_parameters_schema
from toolbridge.core.sendable import sendable_definition
from toolbridge.core.tool import Tool, ToolContext, ToolResult, current_call
from toolbridge.core.work_start import AskedOnLoop, current_work_start

__all__ = [
    "TOOL_NAME_PATTERN",
    "TOOL_TIMEOUT",
    "Invocation",
    "PreparedCall",
    "ToolRegistry",
    "approval_required_error",
    "describe_exception",
    "malformed_result_error",
    "text_of",
    "timeout_error",
]

logger = logging.getLogger(__name__)

TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")
_MAX_REMEMBERED_ERRORS = 64  # unknown tool names whose error is kept, per registry
_MAX_REMEMBERED_NAME = 200
MCP_PREFIX = "mcp_"


@dataclass(slots=True)
class PreparedCall:
    """A call after preparation: the tool and typed arguments, or the error to report.

    Unpacks as ``tool, arguments, error`` like the reference design's tuple;
    `repairs` lists every change made to what the model sent.
    """

    name: Any
    tool: Tool | None
    arguments: dict[str, Any] | None
    error: ToolError | None
    repairs: tuple[Repair, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.tool, self.arguments, self.error))


class _ToolTimeout(enum.Enum):
    TOOL_TIMEOUT = "the tool's own timeout"


TOOL_TIMEOUT = _ToolTimeout.TOOL_TIMEOUT
"""`run_prepared`'s default time limit: the tool's own `timeout` attribute."""

# Exceptions a call lets through: the run is being stopped, not the tool failing.
_PROPAGATE = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)


@dataclass(slots=True)
class Invocation:
    """What running one prepared call gave: the result for the model and what it came from.

    `value` is what `execute` returned (None on failure); `error` and `exception` are
    set when the call failed, so callers classify without parsing text.
    """

    result: ToolResult
    value: Any
    error: ToolError | None
    exception: BaseException | None


@dataclass(slots=True)
class _Entry:
    tool: Tool
    schema: CompiledSchema
    unwrap_arguments: bool
    converts: bool
    hooks: bool


@dataclass(slots=True)
class _Definitions:
    items: FrozenList
    digest: str


class ToolRegistry:
    """Tools by exact name, their cached definitions, and one-call preparation/execution.

    Each registry owns its tools, caches and `context`; nothing is shared between two.
    """

    def __init__(self, tools: Iterable[Tool] = (), *, context: ToolContext | None = None):
        self.context = context or ToolContext()
        self._entries: dict[str, _Entry] = {}
        # Derived views, rebuilt on first use after a change.
        self._names: tuple[str, ...] | None = None
        self._name_index: NameIndex | None = None
        # The unknown-tool errors already written, by name: a model that misspells a tool
        # tends to repeat the spelling. Bounded, and dropped with every change of tools.
        self._unknown_errors: dict[str, ToolError] = {}
        self._definitions: _Definitions | None = None
        for tool in tools:
            self.register(tool)

    # --- the set of tools -----------------------------------------------------------

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        """Check and compile `tool`; a name already taken is an error unless `replace`."""
        name = tool.name
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
            raise ToolDefinitionError(
                f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-' "
                f"(providers reject anything else), in {type(tool).__name__}"
            )
        if name in self._entries and not replace:
            raise ToolDefinitionError(
                f"a tool named {name!r} is already registered; unregister it first or "
                "pass replace=True"
            )
        check_parameters_schema(tool.parameters, owner=f"tool {name!r}")
        if not isinstance(tool.parameters, FrozenDict):
            # what the model is told and what is validated must stay the same schema
            with contextlib.suppress(AttributeError):  # a read-only property stays as it is
                tool.parameters = freeze(tool.parameters)
        # what the model is told and what calls are checked against: one escaped schema
        definition = sendable_definition(tool)
        try:
            schema = CompiledSchema(definition.parameters)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"tool {name!r}: {exc}") from None
        parameters = definition.parameters
        properties = parameters.get("properties") or {}
        takes_other_keys = "patternProperties" in parameters or (
            parameters.get("additionalProperties", False) is not False
        )
        cls = type(tool)
        self._entries[name] = _Entry(
            tool=tool,
            schema=schema,
            # unwrap {"arguments": ...} only where the schema itself could not take that key
            unwrap_arguments="arguments" not in properties and not takes_other_keys,
            converts=cls.convert_arguments is not Tool.convert_arguments,
            hooks=cls.before_execute is not Tool.before_execute
            or cls.after_execute is not Tool.after_execute,
        )
        self._changed()
        return tool

    def unregister(self, name: str) -> Tool:
        """Remove and return the tool called `name`; KeyError if there is none."""
        entry = self._entries.pop(name)
        self._changed()
        return entry.tool

    def _changed(self) -> None:
        self._names = None
        self._name_index = None
        self._unknown_errors = {}
        self._definitions = None

    def _sorted_names(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(sorted(self._entries, key=lambda n: (n.startswith(MCP_PREFIX), n)))
        return self._names

    def get(self, name: str) -> Tool | None:
        entry = self._entries.get(name)
        return entry.tool if entry is not None else None

    def has(self, name: str) -> bool:
        return name in self._entries

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Tool]:
        return (self._entries[name].tool for name in self._sorted_names())

    @property
    def tool_names(self) -> list[str]:
        """Names in definition order: built-ins sorted, then ``mcp_*`` sorted."""
        return list(self._sorted_names())

    def _cached_definitions(self) -> _Definitions:
        if self._definitions is None:
            items = freeze([self._entries[n].tool.to_schema() for n in self._sorted_names()])
            canonical = json.dumps(items, sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(canonical.encode()).hexdigest()
            self._definitions = _Definitions(items, digest)
        return self._definitions

    def get_definitions(self) -> list[dict[str, Any]]:
        """Tool definitions (OpenAI chat shape), stable-ordered and cached until a change.

        The list and its dicts are frozen: callers share the cache and cannot corrupt
        it. `toolbridge.core.frozen.thaw` gives a mutable copy.
        """
        return self._cached_definitions().items

    @property
    def definitions_hash(self) -> str:
        """SHA-256 of the canonical definitions: changes exactly when a prompt cache breaks."""
        return self._cached_definitions().digest

    # --- one call ---------------------------------------------------------------------

    def prepare_call(self, name: Any, params: Any) -> PreparedCall:
        """Resolve, parse, unwrap, shape-check, cast, validate and convert one call.

        `params` is JSON text, UTF-8 bytes, a dict, or None (no arguments). Never raises
        for bad input: every failure is a `PreparedCall` with `error` set, and the
        tool's `convert_arguments` runs only on arguments that passed the schema.
        """
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            return PreparedCall(name, None, None, self._unknown_tool(name))
        tool = entry.tool
        unwrapped: tuple[Repair, ...] = ()

        plain = False  # whether the value is known to be plain JSON data
        if params is None:
            params, plain = {}, True
        elif type(params) is str or (
            type(params) is not dict and isinstance(params, str | bytes | bytearray)
        ):
            params, plain, error = _decode(name, params)
            if error is not None:
                return PreparedCall(name, tool, None, error)

        if (
            entry.unwrap_arguments
            and type(params) is dict
            and len(params) == 1
            and "arguments" in params
        ):
            inner = params["arguments"]
            if isinstance(inner, str):
                inner, plain, error = _decode(name, inner)
                if error is not None:
                    return PreparedCall(name, tool, None, error)
            inner = {} if inner is None else inner
            unwrapped = (Repair((), "unwrap_arguments", params, inner),)
            params = inner

        if not isinstance(params, dict):
            return PreparedCall(name, tool, None, _not_an_object(name, tool, params), unwrapped)

        params, repairs, issues = entry.schema.check(params, plain=plain)
        if unwrapped:
            repairs = unwrapped + repairs
        if issues:
            return PreparedCall(name, tool, None, _invalid(name, issues), repairs)

        if entry.converts:
            try:
                params = tool.convert_arguments(params)
            except (ValueError, TypeError) as exc:
                return PreparedCall(
                    name, tool, None, _invalid(name, conversion_issues(exc)), repairs
                )
        return PreparedCall(name, tool, params, None, repairs)

    async def execute(self, name: Any, params: Any, *, call_id: str | None = None) -> ToolResult:
        """Prepare and run one call. Failures come back as error results, never raised.

        The tool's contract holds here as in `ToolExecutor`: its `timeout`, and
        `requires_approval` (an ``approval_required`` error result; the tool does not run:
        use a `ToolExecutor` to approve calls). `asyncio.CancelledError` always propagates.
        """
        prepared = self.prepare_call(name, params)
        if prepared.error is not None:
            return ToolResult.error(prepared.error)
        return (await self.run_prepared(prepared, call_id=call_id)).result

    async def invoke(self, prepared: PreparedCall, *, call_id: str | None = None) -> ToolResult:
        """Run an already prepared, error-free call: `run_prepared`'s result only."""
        return (await self.run_prepared(prepared, call_id=call_id)).result

    async def run_prepared(  # noqa: PLR0915 - the one contract every path runs through
        self,
        prepared: PreparedCall,
        *,
        call_id: str | None = None,
        time_limit: float | _ToolTimeout | None = TOOL_TIMEOUT,
        approved: bool = False,
        budget: float | None = None,
    ) -> Invocation:
        """Run one prepared call under the tool's contract: the one place every path uses.

        - Approval: a call the tool says needs approval (its `requires_approval`) does not
          run unless `approved` (a `ToolExecutor` passes it once its approval step cleared
          the call); it fails with an ``approval_required`` error instead.
        - Time limit: `time_limit` seconds, by default the tool's own `timeout` (None: no
          limit); past it, `execute` is cancelled and the call fails with ``timeout``. A
          call of a tool that waits for a worker thread and never got one did not start,
          and its text says so (see `toolbridge.core.work_start`).
          `budget`: the seconds left of that limit when some of it went on waiting
          elsewhere (for a Ray worker); the error still names the limit itself.
        - Hooks: `before_execute` and `after_execute` (also for error results).
        - Errors: any exception from the tool, and any `BaseException` other than
          `CancelledError`, `KeyboardInterrupt` and `SystemExit` (which propagate), becomes
          an error result; so does a malformed return value (`MalformedResult`), and a
          `CancelledError` the tool raised by itself while nobody was cancelling the call.
        """
        tool, args = prepared.tool, prepared.arguments
        if tool is None or args is None:
            raise ValueError("run_prepared() needs a prepared call without an error")
        if not approved and tool.requires_approval:
            refusal = approval_required_error(tool.name)
            return Invocation(ToolResult.error(refusal), None, refusal, None)
        if time_limit is TOOL_TIMEOUT:
            time_limit = tool.timeout
        assert not isinstance(time_limit, _ToolTimeout)
        entry = self._entries.get(tool.name)
        hooks = entry.hooks if entry is not None else True
        value: Any = None
        error: ToolError | None = None
        exception: BaseException | None = None
        deadline: asyncio.Timeout | None = None
        own: AskedOnLoop | None = None  # the start's gate when nobody else watches it
        token = current_call.set((self.context, call_id, tool.name))
        try:
            if hooks:
                await tool.before_execute(args)
            if time_limit is None:
                value = await tool.execute(**args)
            else:
                if tool.defers_start and current_work_start() is None:
                    # A tool waiting for a worker thread, whose start nobody watches: its
                    # own gate, so that at its limit it never starts, and its text says so.
                    own = AskedOnLoop(asyncio.get_running_loop(), None).__enter__()
                async with asyncio.timeout(time_limit if budget is None else budget) as deadline:
                    value = await tool.execute(**args)
                if deadline.expired():  # it caught the cancellation and finished late anyway
                    raise TimeoutError
            result = to_tool_result(value)
        except _PROPAGATE as exc:
            if not _raised_by_itself(exc):
                raise
            exception, value = exc, None  # nobody stops the run: the tool failed
            error = describe_exception(tool.name, exc)
            result = ToolResult.error(error)
        except BaseException as exc:
            exception = exc
            if deadline is not None and deadline.expired() and time_limit is not None:
                work = current_work_start()  # a tool waiting for a worker may not have started
                error = timeout_error(tool.name, time_limit, started=work is None or work.stop())
            elif isinstance(exc, MalformedResult):
                error = malformed_result_error(tool.name, exc)
            else:
                error = describe_exception(tool.name, exc)
            value = None
            result = ToolResult.error(error)
        finally:
            current_call.reset(token)
            if own is not None:
                own.__exit__()  # stopped: from now on its work may no longer start
        if hooks:
            try:
                await tool.after_execute(args, result)
            except _PROPAGATE:
                raise
            except BaseException:
                logger.exception("after_execute hook of tool %r failed", tool.name)
        return Invocation(result, value, error, exception)

    def _unknown_tool(self, name: Any) -> ToolError:
        if type(name) is str and (known := self._unknown_errors.get(name)) is not None:
            return known
        error = self._describe_unknown_tool(name)
        if type(name) is str and len(name) <= _MAX_REMEMBERED_NAME:
            if len(self._unknown_errors) >= _MAX_REMEMBERED_ERRORS:
                self._unknown_errors.clear()
            self._unknown_errors[name] = error
        return error

    def _describe_unknown_tool(self, name: Any) -> ToolError:
        names = self._sorted_names()
        available = ", ".join(names[:50]) + (" ..." if len(names) > 50 else "")
        hint = f"Call one of the available tools by its exact name: {available}."
        if not names:
            hint = "No tools are available; answer without calling a tool."
        if not isinstance(name, str):
            message = f"the tool name must be a string, got {type(name).__name__}"
            return ToolError(ErrorKind.UNKNOWN_TOOL, message, hint)
        shown = name if len(name) <= 80 else f"{name[:60]}…({len(name)} characters)"
        message = f"unknown tool {shown!r}."
        if self._name_index is None:
            self._name_index = NameIndex(names)
        suggestions = self._name_index.suggest(name)
        if suggestions:
            message += " Did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
        return ToolError(ErrorKind.UNKNOWN_TOOL, message, hint)


def _raised_by_itself(exc: BaseException) -> bool:
    """Whether a `CancelledError` came from the tool itself (a future of its own was
    cancelled), not from someone cancelling the running call: a failure of the call."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


def approval_required_error(tool_name: str) -> ToolError:
    """The error of a call that needs the user's approval and was not run."""
    return ToolError(
        ErrorKind.APPROVAL_REQUIRED,
        f"the call to {tool_name!r} needs the user's approval and has not run.",
        "Wait for the user's decision; do not send the call again before it.",
    )


def timeout_error(tool_name: str, time_limit: float, *, started: bool = True) -> ToolError:
    """The model's view of a call stopped at its time limit, on every backend; `started`:
    False when its tool never started (it waited for a worker all along), so that nothing
    of it ran and sending it again is safe."""
    if not started:
        return ToolError(
            ErrorKind.TIMEOUT,
            f"tool {tool_name!r} did not start within its time limit of {time_limit:g} s: "
            "it waited for a busy worker all along, so the call did not run.",
            "Sending the same call again is safe (nothing of it ran): later, or with fewer "
            "calls at once; or tell the user the tools are too busy.",
        )
    return ToolError(
        ErrorKind.TIMEOUT,
        f"tool {tool_name!r} did not finish within its time limit of {time_limit:g} s; its "
        "result was abandoned (work done so far, or a blocking tool still running in the "
        "background, may have had effects).",
        "Do not repeat the same call unchanged: ask for less work at once (a smaller input, "
        "fewer items, a narrower query), or tell the user the operation takes too long.",
    )


def malformed_result_error(tool_name: str, exc: MalformedResult) -> ToolError:
    """The model's view of a result the tool could not hand back in a sendable shape."""
    logger.warning("tool %r returned a malformed result: %s", tool_name, exc)
    return ToolError(
        ErrorKind.EXECUTION_ERROR,
        f"tool {tool_name!r} returned a result that cannot be sent back: {exc}.",
        "This is a fault in the tool, not in your arguments: do not repeat the call "
        "unchanged; use another approach or tell the user the tool is broken.",
    )


def text_of(value: object) -> str:
    """`str(value)` (an exception's text, or a message a tool passed), or a text that says
    it cannot be read when ``__str__`` raises: the same on every backend (a worker sends
    this text)."""
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception as failure:
        return f"(its text cannot be read: str() raised {type(failure).__name__})"


def describe_exception(tool_name: str, exc: BaseException) -> ToolError:
    """The model's view of an exception from a tool: classified by type, no traceback."""
    if isinstance(exc, PolicyViolation):  # a message not given as text is read as one
        return ToolError(exc.kind, text_of(exc.message), text_of(exc.hint))
    if isinstance(exc, ToolExecutionError):
        hint = text_of(exc.hint) if exc.hint else RETRY_HINT
        return ToolError(ErrorKind.EXECUTION_ERROR, text_of(exc.message), hint)
    # DEBUG: the model gets the error as a result; a library prints nothing by itself
    # (Python's last-resort handler shows WARNING and up when logging is not configured).
    logger.debug("tool %r raised", tool_name, exc_info=exc)
    detail = text_of(exc).strip()
    if len(detail) > 500:
        detail = detail[:500] + "…"
    message = f"tool {tool_name!r} failed: {type(exc).__name__}" + (f": {detail}" if detail else "")
    return ToolError(ErrorKind.EXECUTION_ERROR, message, RETRY_HINT)


def _decode(name: str, raw: str | bytes | bytearray) -> tuple[Any, bool, ToolError | None]:
    """Decode argument text (bytes as UTF-8): the value, whether it is known to be plain
    JSON data (see `jsondata.text_may_hide_problems`), or the error for the model."""
    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return (
                None,
                False,
                _not_json(name, f"are not valid UTF-8 ({exc.reason} at byte {exc.start})"),
            )
    if not text or text.isspace():  # blank: no arguments (isspace spares strip's copy)
        return {}, True, None
    try:
        try:
            return decode_arguments(text), not text_may_hide_problems(text), None
        except NumberOverflowError:
            # a number no float holds: decode again keeping it, so that the schema check
            # names the field (the text may still be broken after that number)
            return decode_arguments(text, keep_overflow=True), False, None
    except ArgumentsDecodeError as exc:
        return None, False, _not_json(name, f"are not valid JSON: {exc}")


def _not_json(name: str, reason: str) -> ToolError:
    return ToolError(
        ErrorKind.ARGUMENTS_NOT_JSON,
        f"the arguments for {name!r} {reason}.",
        'Send the arguments as one complete JSON object, for example {"key": "value"}.',
    )


_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _not_an_object(name: str, tool: Tool, value: Any) -> ToolError:
    got = _JSON_KINDS.get(type(value), f"a {type(value).__name__}")
    properties = list((tool.parameters.get("properties") or {}).keys())[:4]
    example = "{" + ", ".join(f'"{p}": ...' for p in properties) + "}"
    return ToolError(
        ErrorKind.ARGUMENTS_NOT_OBJECT,
        f"the arguments for {name!r} must be a JSON object, got {got}.",
        f"Send one object with the parameter names as keys, like {example}.",
    )


def _invalid(name: str, issues: Sequence[ArgumentIssue]) -> ToolError:
    return ToolError(
        ErrorKind.INVALID_ARGUMENTS,
        f"invalid arguments for {name!r}:",
        "Fix the arguments listed above and call the tool again.",
        tuple(issues),
    )


def conversion_issues(exc: ValueError | TypeError) -> list[ArgumentIssue]:
    """Issues from a refused conversion: an `ArgumentsError`'s own, or pydantic's errors."""
    if isinstance(exc, ArgumentsError):
        return list(exc.issues)
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return [
            ArgumentIssue(format_path(list(err.get("loc", ()))), str(err.get("msg", "")))
            for err in errors()
        ]
    return [ArgumentIssue("$", str(exc) or type(exc).__name__)]
