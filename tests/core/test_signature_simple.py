"""Functions with plain parameter types get their schema without pydantic: the very
schema pydantic writes, and the same conversions, checked here against pydantic itself."""

from __future__ import annotations

import datetime
import enum
import inspect
import subprocess
import sys
import typing
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge.core.signature import _parse_docstring, _pydantic_signature, function_signature
from toolbridge.core.tool import ToolContext

ANNOTATIONS = [
    "str",
    "int",
    "float",
    "bool",
    "list[str]",
    "list[int]",
    "list[float]",
    "dict[str, int]",
    "dict[str, float]",
    "dict[str, bool]",
    "str | None",
    "int | None",
    "float | None",
    "typing.Optional[bool]",
    "list[str] | None",
    "dict[str, float] | None",
]
DEFAULTS = ["", "None", "0", "7", "-2.5", "1e300", "True", "'text'", "''"]


def build(params: list[tuple[str, str]], described: list[bool]) -> Any:
    """A function with these (annotation, default) parameters and a Google docstring."""
    signature = ", ".join(
        f"p{i}: {annotation}" + (f" = {default}" if default else "")
        for i, (annotation, default) in enumerate(params)
    )
    docs = "".join(f"        p{i}: about p{i}.\n" for i in range(len(params)) if described[i])
    docs = docs or "        nothing: none.\n"
    source = (
        f"def fn({signature}) -> str:\n"
        f'    """Do a thing.\n\n    Args:\n{docs}    """\n'
        "    return ''\n"
    )
    namespace: dict[str, Any] = {"typing": typing}
    exec(source, namespace)
    return namespace["fn"]


def pydantic_reference(fn: Any) -> Any:
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [
        (p.name, hints[p.name], ... if p.default is p.empty else p.default)
        for p in inspect.signature(fn).parameters.values()
    ]
    return _pydantic_signature(fn, fn.__qualname__, params, _parse_docstring(fn), None)


def ordered_params(draw: Any) -> list[tuple[str, str]]:
    count = draw(st.integers(0, 5))
    params = [
        (draw(st.sampled_from(ANNOTATIONS)), draw(st.sampled_from(DEFAULTS))) for _ in range(count)
    ]
    # parameters without a default come first, as Python requires
    return sorted(params, key=lambda p: p[1] != "")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_the_schema_is_pydantics_own(data: st.DataObject) -> None:
    params = ordered_params(data.draw)
    described = [data.draw(st.booleans()) for _ in params]
    fn = build(params, described)
    ours = function_signature(fn, context_type=ToolContext)
    reference = pydantic_reference(fn)
    assert ours.schema == reference.schema
    assert list(ours.schema) == list(reference.schema)
    for name, node in ours.schema["properties"].items():
        assert list(node) == list(reference.schema["properties"][name])
    assert ours.description == reference.description
    assert (ours.converter is None) == (reference.converter is None)


@settings(max_examples=100, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "a": st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False),
            "b": st.lists(st.integers(-(10**6), 10**6) | st.floats(-1e9, 1e9)),
        }
    )
)
def test_property_conversions_are_pydantics_own(args: dict[str, Any]) -> None:
    def fn(a: float, b: list[float], c: int = 1) -> str:
        return ""

    ours = function_signature(fn, context_type=ToolContext).converter
    reference = pydantic_reference(fn).converter
    assert ours is not None and reference is not None
    assert ours(args) == reference(args)
    assert [type(x) for x in ours(args)["b"]] == [type(x) for x in reference(args)["b"]]


class Color(enum.Enum):
    RED = "red"


def test_other_types_still_go_through_pydantic() -> None:
    def fn(when: datetime.datetime, color: Color, tags: tuple[str, ...] = ()) -> str:
        return ""

    signature = function_signature(fn, context_type=ToolContext)
    assert signature.schema["properties"]["when"]["format"] == "date-time"
    assert signature.converter is not None


def test_a_plain_tool_never_imports_pydantic_until_it_converts() -> None:
    script = (
        "import sys\n"
        "from toolbridge import ToolRegistry, tool\n"
        "@tool\n"
        "def scale(factor: float, label: str = '', tags: list[str] | None = None) -> str:\n"
        "    '''Scale.'''\n"
        "    return f'{factor!r}'\n"
        "registry = ToolRegistry([scale])\n"
        "registry.get_definitions()\n"
        "print('pydantic' in sys.modules)\n"
        "prepared = registry.prepare_call('scale', {'factor': 3})\n"
        "print(prepared.arguments, 'pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.splitlines() == ["False", "{'factor': 3.0} True"]
