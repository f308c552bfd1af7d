"""The tool contract: `Tool`, what it returns (`ToolResult`) and what it runs in (`ToolContext`).

A tool is a name, a description, a JSON Schema for its parameters and an async
`execute`. Its flags tell the executor how it may be scheduled; its plugin metadata
tells the loader when and how to build it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.frozen import freeze
from toolbridge.core.jsontext import to_json_text
from toolbridge.core.pathlocks import PathLocks
from toolbridge.core.schema import EMPTY_OBJECT_SCHEMA, check_parameters_schema
from toolbridge.core.sendable import sendable_definition

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "ContentBlock",
    "ImageBlock",
    "JsonBlock",
    "TextBlock",
    "Tool",
    "ToolContext",
    "ToolResult",
    "current_context",
    "tool_parameters",
]

_T = TypeVar("_T", bound="type[Tool]")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where tools run: the workspace, the configuration, and (during a call) its id.

    The loader hands one to `Tool.enabled` and `Tool.create`; during a call the
    registry makes it available to the tool through `current_context()`, and a
    function tool can ask for it by annotating a parameter with this type.
    """

    workspace: Path = field(default_factory=Path.cwd)
    config: Mapping[str, Any] = field(default_factory=dict)
    tool_config: Any = None
    session: str = "default"
    call_id: str | None = None
    tool_name: str | None = None
    # Shared by every file-writing tool built from this context (copies share it too),
    # so that two tools never interleave their writes to one file.
    file_locks: PathLocks = field(default_factory=PathLocks, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.workspace, Path):  # a str, from a caller or a config file
            object.__setattr__(self, "workspace", Path(self.workspace))


# (registry context, call id, tool name) of the call running in this task. A tuple,
# not a ToolContext, so that setting it costs nothing on calls that never ask for it.
current_call: ContextVar[tuple[ToolContext, str | None, str] | None] = ContextVar(
    "toolbridge_current_call", default=None
)


# The object (an executor) on whose behalf the calls running in this task run: a tool
# that leaves something running after a call (exec sessions) ends it in `Tool.release`.
_call_owner: ContextVar[object | None] = ContextVar("toolbridge_call_owner", default=None)


def current_call_owner() -> object | None:
    """The executor whose batch runs the current call (None outside an executor)."""
    return _call_owner.get()


def set_call_owner(owner: object | None) -> Token[object | None]:
    """Make `owner` the call owner of this task and the tasks it starts; reset the token."""
    return _call_owner.set(owner)


def reset_call_owner(token: Token[object | None]) -> None:
    _call_owner.reset(token)


# The context session of the calls running in this task when it is not the registry
# context's own: an MCP server serving several clients gives each client one.
_session: ContextVar[str | None] = ContextVar("toolbridge_session", default=None)


def set_session(session: str | None) -> Token[str | None]:
    """Run this task's calls (and those of the tasks it starts) as calls of context session
    `session` (None: the registry context's); reset the token with `reset_session`."""
    return _session.set(session)


def reset_session(token: Token[str | None]) -> None:
    _session.reset(token)


def current_context() -> ToolContext:
    """The context of the tool call running in this task; outside a call, an error."""
    call = current_call.get()
    if call is None:
        raise LookupError("current_context() is only available while a tool call runs")
    base, call_id, tool_name = call
    session = _session.get()
    if session is None:
        return dataclasses.replace(base, call_id=call_id, tool_name=tool_name)
    return dataclasses.replace(base, call_id=call_id, tool_name=tool_name, session=session)


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImageBlock:
    data: bytes
    media_type: str = "image/png"
    type: Literal["image"] = "image"

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True, slots=True)
class JsonBlock:
    value: Any
    type: Literal["json"] = "json"


ContentBlock = TextBlock | ImageBlock | JsonBlock


@dataclass(slots=True)
class ToolResult:
    """What a call produced: text or content blocks, an error flag and free metadata.

    An error result's text starts with ``Error`` and `error_kind` says what class of
    failure it was, so callers never parse the text to tell failures apart.
    """

    content: str | Sequence[ContentBlock]
    is_error: bool = False
    error_kind: ErrorKind | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(
        cls,
        error: ToolError | str,
        *,
        kind: ErrorKind = ErrorKind.EXECUTION_ERROR,
        metadata: dict[str, Any] | None = None,
    ) -> ToolResult:
        """An error result from a `ToolError` or a message (``Error:`` is prefixed once)."""
        if isinstance(error, ToolError):
            text, kind = error.render(), error.kind
        else:
            text = error if error.startswith("Error") else f"Error: {error}"
        return cls(text, is_error=True, error_kind=kind, metadata=metadata or {})

    @property
    def text(self) -> str:
        """The content as one text: text blocks as is, JSON as JSON, images as a note."""
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for block in self.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, JsonBlock):
                parts.append(to_json_text(block.value))
            else:
                parts.append(f"[image: {block.media_type}, {len(block.data)} bytes]")
        return "\n".join(parts)


class Tool:
    """Base class of every tool. Subclass it, set the attributes, implement `execute`.

    `parameters` is a JSON Schema of type object. Set it with the `tool_parameters`
    class decorator (checked and frozen once) or as a class attribute (checked when
    the tool is registered).
    """

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] = EMPTY_OBJECT_SCHEMA
    read_only: bool = False
    exclusive: bool = False
    timeout: float | None = None
    requires_approval: bool = False
    defer_loading: bool | None = None
    """Under tool search (`toolbridge.core.tool_search`): True keeps the definition out of
    requests until the model finds it, False always sends it, None lets the size policy
    decide. Without tool search every definition is sent."""

    # Plugin metadata, read by the loader.
    scopes: ClassVar[frozenset[str]] = frozenset({"default"})
    config_key: ClassVar[str | None] = None

    @property
    def defers_start(self) -> bool:
        """Its work may wait after `execute` began (for a worker thread): it asks the call's
        `toolbridge.core.work_start.WorkStart`, if any, just before the work starts. A tool
        that says so must ask: with a journal, its call is `queued` until it does, so work
        that ran without asking is run again as the same attempt after a stop or a crash."""
        return False

    @property
    def concurrency_safe(self) -> bool:
        """May run at the same time as other concurrency-safe calls."""
        return self.read_only and not self.exclusive

    @classmethod
    def config_cls(cls) -> type[BaseModel] | None:
        """The pydantic model that validates this tool's config section, if any."""
        return None

    @classmethod
    def enabled(cls, ctx: ToolContext) -> bool:
        """Whether the loader should build this tool in `ctx`."""
        return True

    @classmethod
    def create(cls, ctx: ToolContext) -> Tool:
        """Build an instance for `ctx`; `ctx.tool_config` holds the validated config."""
        return cls()

    def convert_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """Turn validated JSON arguments into what `execute` takes (default: as they are).

        Raise `ValueError` (pydantic's `ValidationError` is one) to refuse them; the
        model then gets an invalid-arguments error, and nothing runs.
        """
        return args

    async def execute(self, **kwargs: Any) -> Any:
        """Run the tool with validated arguments. Return a str, a `ToolResult`, or data."""
        raise NotImplementedError(f"tool {self.name!r} does not implement execute()")

    async def before_execute(self, args: Mapping[str, Any]) -> None:
        """Called with the validated arguments just before `execute`."""

    async def after_execute(self, args: Mapping[str, Any], result: ToolResult) -> None:
        """Called after `execute` with its result (also error results), for clean-up."""

    def companions(self) -> list[Tool]:
        """Tools that belong with this one and share its state (the loader adds them)."""
        return []

    async def release(self, owner: object) -> None:
        """End what the calls of `owner` (an executor) left running; its `aclose` calls this."""

    async def end_session(self, session: str) -> bool:
        """End what the calls of context session `session` left running; whether they had
        left anything. An MCP server calls this when a request that had a context session
        of its own is answered."""
        return False

    def to_schema(self) -> dict[str, Any]:
        """The definition in OpenAI Chat Completions shape, as a fresh plain dict, as it
        is sent: a lone surrogate written as the six characters ``\\udc80``
        (`toolbridge.core.sendable.sendable_definition`)."""
        definition = sendable_definition(self)
        return {
            "type": "function",
            "function": {
                "name": definition.name,
                "description": definition.description,
                "parameters": json.loads(json.dumps(definition.parameters)),
            },
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def tool_parameters(schema: Mapping[str, Any]) -> Callable[[_T], _T]:
    """Class decorator: check `schema` once, freeze it, and make it the tool's parameters.

    The frozen schema is shared by every instance and every call; nothing deep-copies
    it on access, and nothing can change it by accident.
    """
    check_parameters_schema(schema, owner="tool_parameters")
    frozen = freeze(schema)

    def apply(cls: _T) -> _T:
        cls.parameters = frozen
        return cls

    return apply
