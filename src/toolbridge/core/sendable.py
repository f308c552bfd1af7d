"""Text as a provider can be sent it: no lone surrogate anywhere.

JSON lets text hold a lone surrogate (``"\\udc80"``), and a file name decoded with
``surrogateescape`` holds one too: a Python string that UTF-8 cannot encode. One in a
request (the conversation, the instructions, a tool's definition) made the request fail
to encode, which ended the run. Each is sent as the six characters ``\\udc80`` instead.

`sendable` escapes any value (strings, mappings, lists, tuples, dataclasses; with
``models=True`` pydantic models too, as the MCP server sends them and its client reads
them), returning the very object when there is nothing to escape; `sendable_text` one
string. pydantic is imported only when models are asked for: ``import toolbridge``
stays light.
`sendable_definition` is a tool's definition (name, description, parameters) escaped
once per tool: the registry validates calls against that schema, and every provider
format renders it (`toolbridge.formats.types.tool_specs`), so what a model is told is
what is checked, and a render reuses it rather than walking the schema again.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import FrozenDict, freeze

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "Defined",
    "SendableDefinition",
    "check_sendable_name",
    "sendable",
    "sendable_definition",
    "sendable_text",
]

_SURROGATE = re.compile("[\ud800-\udfff]")

T = TypeVar("T")


def sendable(value: T, *, models: bool = False) -> T:
    """`value` with each lone surrogate in its strings (mapping keys included) written as
    the six characters ``\\udc80``; the same object when it holds none.

    With `models`, a pydantic model is walked too (its fields and its extra fields): a
    changed one is copied with ``model_copy(update=...)``, its extra fields replaced.
    Without, a model is left as it is."""
    if models:
        from pydantic import BaseModel

        return _escaped(value, BaseModel)
    return _escaped(value, None)


def sendable_text(text: str) -> str:
    """`text` with each lone surrogate written as the six characters ``\\udc80``: for
    text sent outside the conversation (the instructions, with a skill's description
    read from its file)."""
    return text if _encodable(text) else _escaped(text, None)


def check_sendable_name(name: str) -> None:
    """Refuse a tool name holding a lone surrogate: escaped, a model could only call the
    tool back by the escaped name, which is not the tool's."""
    if isinstance(name, str) and not _encodable(name):
        raise ToolDefinitionError(
            f"tool name {name!r} holds a lone surrogate (text decoded from bytes that are "
            "not UTF-8), which no provider can be sent: a model could never call it back; "
            "rename the tool"
        )


class Defined(Protocol):
    """What a definition is made of: a `toolbridge.core.tool.Tool` (not imported: the
    tool module imports this one)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class SendableDefinition:
    """A tool's definition as it is sent and checked: `parameters` frozen, no lone
    surrogate in `description` or `parameters` (the tool's own objects when none)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


# The key in a tool's own __dict__ under which its definition is kept (as
# functools.cached_property keeps a value): (the description and parameters it was made
# from, the definition). It lives and goes with the tool, whatever registries share it;
# a tool whose name, description or parameters were replaced since gets its definition
# made again (its parameters walked again only when they were the ones replaced).
_KEPT = "_toolbridge_sendable_definition"


def sendable_definition(tool: Defined) -> SendableDefinition:
    """`tool`'s definition with each lone surrogate written as text, made once per tool
    and kept on it (made each time for an object without a ``__dict__`` of its own).

    A name holding one is refused (`check_sendable_name`): a `ToolDefinitionError`.
    """
    name, description, parameters = tool.name, tool.description, tool.parameters
    own = getattr(tool, "__dict__", None)
    if not isinstance(own, dict):  # slots only, or a class's read-only mapping
        own = None
    kept = own.get(_KEPT) if own is not None else None
    if kept is not None and kept[1] is parameters:
        definition: SendableDefinition = kept[2]
        if definition.name == name and kept[0] == description:
            return definition
        escaped_parameters = definition.parameters
    else:
        escaped_parameters = _sendable_parameters(parameters)
    check_sendable_name(name)
    definition = SendableDefinition(name, sendable(description), escaped_parameters)
    if own is not None:
        own[_KEPT] = (description, parameters, definition)
    return definition


def _sendable_parameters(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    """`parameters` escaped and frozen: itself when it is frozen and holds no surrogate."""
    escaped = sendable(parameters)
    if escaped is parameters and isinstance(parameters, FrozenDict):
        return parameters
    return freeze(escaped)  # type: ignore[no-any-return]


def _encodable(text: str) -> bool:
    """Whether `text` holds no surrogate (ASCII is checked without a copy; the rest is
    encoded, in C, which is many times faster than searching it)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_text(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def _arguments_text(text: str) -> str:
    """Arguments' JSON text, which an adapter may parse to send an object: a surrogate
    JSON decodes (``"\\udc80"``, or the character itself) is written so that it reads
    back as the six characters, not as the surrogate; the same text when there is none."""
    if "\\u" not in text and _encodable(text):
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON (or too deep): sent as text
        return _escaped(text, None)
    escaped = _escaped(value, None)
    return text if escaped is value else json.dumps(escaped, ensure_ascii=False)


def _escaped(value: T, model: type[BaseModel] | None) -> T:
    """`value` with its strings' surrogates written as text (the same object when it has
    none): strings, mappings, lists, tuples and dataclasses, walked; instances of `model`
    (pydantic's `BaseModel`, when models are asked for) too."""
    result: Any = value
    if isinstance(value, str):
        if not _encodable(value):
            result = _SURROGATE.sub(_as_text, value)
    elif isinstance(value, Mapping | list | tuple):
        result = _escaped_tree(value, model)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            field.name: _escaped(getattr(value, field.name), model)
            for field in dataclasses.fields(value)
            if field.init
        }
        if isinstance(value, ToolCallRequest) and isinstance(value.arguments, str):
            fields["arguments"] = _arguments_text(value.arguments)
        if any(new is not getattr(value, name) for name, new in fields.items()):
            result = dataclasses.replace(value, **fields)
    elif model is not None and isinstance(value, model):
        result = _escaped_model(value, model)
    return result  # type: ignore[no-any-return]


def _escaped_model(value: BaseModel, model: type[BaseModel]) -> BaseModel:
    """A pydantic model with its fields and extra fields escaped: itself when none
    changed, else a copy with the changed fields (``model_copy(update=...)``, which also
    counts them as set) and the escaped extra fields."""
    changed = {
        name: new for name, old in vars(value).items() if (new := _escaped(old, model)) is not old
    }
    extra = value.__pydantic_extra__
    new_extra = _escaped(extra, model) if extra else extra
    if not changed and new_extra is extra:
        return value
    copy = value.model_copy(update=changed)
    if new_extra is not extra:
        copy.__pydantic_extra__ = new_extra
    return copy


_Tree = Mapping[Any, Any] | list[Any] | tuple[Any, ...]


def _escaped_tree(root: _Tree, model: type[BaseModel] | None) -> Any:
    """`_escaped` of nested mappings, lists and tuples, walked with a stack of its own:
    a model's arguments may nest deeper than Python's recursion limit (a recursive walk
    gave up on them, and their surrogates went out and failed the request)."""
    stack: list[tuple[_Tree, Iterator[Any], list[Any]]] = [(root, _children(root), [])]
    while True:
        node, children, done = stack[-1]
        for child in children:
            if isinstance(child, Mapping | list | tuple):
                stack.append((child, _children(child), []))
                break
            done.append(_escaped(child, model))
        else:
            stack.pop()
            rebuilt = _rebuilt(node, done)
            if not stack:
                return rebuilt
            stack[-1][2].append(rebuilt)


def _children(node: _Tree) -> Iterator[Any]:
    """A mapping's keys and values, alternately; a list's or a tuple's items."""
    if isinstance(node, Mapping):
        return itertools.chain.from_iterable(node.items())
    return iter(node)


def _rebuilt(node: _Tree, done: list[Any]) -> Any:
    """`node` with its children `done` (itself when none changed)."""
    if all(new is old for new, old in zip(done, _children(node), strict=True)):
        return node
    if isinstance(node, Mapping):
        return dict(zip(done[0::2], done[1::2], strict=True))
    return list(done) if isinstance(node, list) else tuple(done)
