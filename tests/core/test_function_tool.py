"""@tool: schemas from type hints and docstrings, typed arguments, context injection."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import threading
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from toolbridge import (
    ErrorKind,
    FunctionTool,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    tool,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Attendee(BaseModel):
    name: str
    email: str

    @field_validator("email")
    @classmethod
    def has_at(cls, value: str) -> str:
        if "@" not in value:
            raise ValueError("email needs an @")
        return value


class Window(TypedDict):
    start: int
    end: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


def props(t: FunctionTool) -> dict[str, Any]:
    return dict(t.parameters["properties"])


def test_schema_from_type_hints_and_google_docstring() -> None:
    @tool(read_only=True, timeout=5)
    async def search(
        query: Annotated[str, Field(min_length=1)],
        limit: int = 10,
        mode: Literal["fast", "exact"] = "fast",
        color: Color | None = None,
        tags: list[str] | None = None,
    ) -> str:
        """Search the index.

        Longer explanation.

        Args:
            query: What to look for.
            limit: How many results.
        """
        return query

    assert search.name == "search"
    assert search.description == "Search the index.\n\nLonger explanation."
    assert search.read_only and search.concurrency_safe and search.timeout == 5
    schema = search.parameters
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    p = props(search)
    assert p["query"] == {"type": "string", "minLength": 1, "description": "What to look for."}
    assert p["limit"] == {"type": "integer", "default": 10, "description": "How many results."}
    assert p["mode"]["enum"] == ["fast", "exact"]
    assert "title" not in str(schema)  # pydantic titles are noise for the model
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]


def test_numpy_and_sphinx_docstrings() -> None:
    @tool
    def numpy_style(a: int, b: str) -> None:
        """Do a thing.

        Parameters
        ----------
        a : int
            The a value.
        b : str
            The b value.
        """

    @tool
    def sphinx_style(a: int) -> None:
        """Do another thing.

        :param a: The a value.
        """

    assert props(numpy_style)["a"]["description"] == "The a value."
    assert props(numpy_style)["b"]["description"] == "The b value."
    assert props(sphinx_style)["a"]["description"] == "The a value."
    assert sphinx_style.description == "Do another thing."


def test_formats_and_containers() -> None:
    @tool
    def everything(
        when: dt.datetime,
        day: dt.date,
        ident: uuid.UUID,
        where: Path,
        pair: tuple[int, str],
        unique: set[int],
        mapping: dict[str, int],
        window: Window,
        point: Point,
        people: list[Attendee],
    ) -> None:
        pass

    p = props(everything)
    assert p["when"] == {"type": "string", "format": "date-time"}
    assert p["day"] == {"type": "string", "format": "date"}
    assert p["ident"] == {"type": "string", "format": "uuid"}
    assert p["where"]["format"] == "path"
    assert p["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert p["unique"]["uniqueItems"] is True
    assert p["mapping"]["additionalProperties"] == {"type": "integer"}
    defs = everything.parameters["$defs"]
    assert set(defs) == {"Window", "Point", "Attendee"}


async def test_arguments_arrive_as_the_declared_python_types() -> None:
    seen: dict[str, Any] = {}

    @tool
    async def book(
        when: dt.datetime,
        color: Color,
        people: list[Attendee],
        pair: tuple[int, str],
        point: Point,
        size: float,
        count: int,
    ) -> str:
        seen.update(locals())
        return "booked"

    registry = ToolRegistry([book])
    result = await registry.execute(
        "book",
        {
            "when": "2026-11-30T10:00:00Z",
            "color": "red",
            "people": '[{"name": "Ada", "email": "ada@example.com"}]',
            "pair": ["1", "x"],
            "point": {"x": 1, "y": "2.5"},
            "size": 3,
            "count": "4",
        },
    )
    assert result.text == "booked", result.text
    assert seen["when"] == dt.datetime(2026, 11, 30, 10, tzinfo=dt.UTC)
    assert seen["color"] is Color.RED
    assert seen["people"] == [Attendee(name="Ada", email="ada@example.com")]
    assert seen["pair"] == (1, "x")
    assert seen["point"] == Point(1.0, 2.5)
    assert seen["size"] == 3.0 and isinstance(seen["size"], float)
    assert seen["count"] == 4


async def test_model_validators_refuse_as_invalid_arguments() -> None:
    ran = False

    @tool
    async def invite(people: list[Attendee]) -> None:
        nonlocal ran
        ran = True

    result = await ToolRegistry([invite]).execute(
        "invite", {"people": [{"name": "Bob", "email": "bob-at-home"}]}
    )
    assert result.is_error and result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "$.people[0].email" in result.text and "email needs an @" in result.text
    assert not ran


async def test_unknown_keys_are_forbidden_for_function_tools() -> None:
    @tool
    async def f(a: int) -> int:
        return a

    result = await ToolRegistry([f]).execute("f", {"a": 1, "b": 2})
    assert result.is_error and "unknown key 'b'; allowed keys: a" in result.text


async def test_context_is_injected_and_hidden_from_the_model(tmp_path: Path) -> None:
    @tool
    async def where(ctx: ToolContext, name: str) -> str:
        return f"{ctx.workspace}|{ctx.call_id}|{ctx.tool_name}|{name}"

    assert list(props(where)) == ["name"]
    registry = ToolRegistry([where], context=ToolContext(workspace=tmp_path))
    result = await registry.execute("where", {"name": "x"}, call_id="call-7")
    assert result.text == f"{tmp_path}|call-7|where|x"
    # the model cannot set the context: it is not a declared key
    forged = await registry.execute("where", {"name": "x", "ctx": {"workspace": "/"}})
    assert forged.is_error and "unknown key 'ctx'" in forged.text


async def test_sync_functions_run_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def which_thread() -> int:
        return threading.get_ident()

    result = await ToolRegistry([which_thread]).execute("which_thread", {})
    assert int(result.text) != loop_thread


def test_decorated_function_stays_callable() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    @tool(name="plus")
    async def add_async(a: int) -> int:
        return a + 1

    assert add(2, b=3) == 5
    assert add.__name__ == "add" and add.__doc__ == "Add."
    assert asyncio.run(add_async(1)) == 2
    assert add_async.name == "plus"


def test_signatures_a_model_cannot_call_are_refused() -> None:
    def star_args(*args: int) -> None: ...

    def star_kwargs(**kwargs: int) -> None: ...

    def positional_only(a: int, /) -> None: ...

    for fn in (star_args, star_kwargs, positional_only):
        with pytest.raises(ToolDefinitionError, match="named parameters only"):
            tool(fn)


def test_flags_default_and_override() -> None:
    @tool(exclusive=True, read_only=True)
    def lonely() -> None: ...

    @tool(concurrency_safe=True)
    def writer() -> None: ...

    assert not lonely.concurrency_safe
    assert writer.concurrency_safe and not writer.read_only
