"""The shortcuts of the call path answer exactly as the general steps they skip.

- A scalar node's caster returns a value of its exact type at once and casts integer
  text inline; the general steps (`MATCHES`, then `CONVERTS`) must give the same
  value, the same object, and the same repair log for every input.
- A tool's pydantic conversion calls the compiled validator directly; it must convert
  and refuse exactly as `TypeAdapter.validate_python` does.
- Blank argument text is found without stripping it; every kind of blank still means
  "no arguments", and anything else is still decoded.
- A JSON path tells a plain key without a regular expression; every path is written
  as the regular expression wrote it.
"""

from __future__ import annotations

import enum
import json
import re
from datetime import datetime
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from toolbridge import ToolRegistry, tool
from toolbridge.core.calls import Location, Repair, RepairAction, format_path
from toolbridge.core.casting import CONVERTS, MATCHES, NOTHING, CastState, scalar_caster
from toolbridge.core.signature import _validate_python

TYPES = sorted(CONVERTS)


def general_scalar(type_name: str, value: Any, location: Location, state: CastState) -> Any:
    """A scalar node's cast as the general steps do it: does the value match the type
    (a float with an integral value is made an int), else can it be converted."""
    if MATCHES[type_name](value):
        if type_name == "integer" and type(value) is float:
            state.repairs.append(Repair(location, "cast", value, int(value)))
            return int(value)
        return value
    new = CONVERTS[type_name](value)
    if new is NOTHING:
        return value
    action: RepairAction = "decode_json" if type_name in ("object", "array") else "cast"
    state.repairs.append(Repair(location, action, value, new))
    return new


class _Text(str):
    pass


class _Number(int):
    pass


_TEXTS = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        [
            "1",
            "007",
            " 7 ",
            "+7",
            "-7",
            "\t12\n",
            "1.5",
            "1e3",
            "١٢",  # Arabic-Indic digits: digits to str.isdigit, not to the cast rule
            "²",
            "9" * 5_000,  # more digits than Python's int parser takes
            "true",
            "no",
            '{"a": 1}',
            "[1, 2]",
            "",
            " ",
        ]
    ),
)
_INPUTS = st.one_of(
    _TEXTS,
    _TEXTS.map(_Text),
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-3, 3).map(_Number),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([3.0, -0.0, 2.5, 1e300]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def _same_value(first: Any, second: Any) -> bool:
    if first is second:
        return True
    return type(first) is type(second) and repr(first) == repr(second)


@settings(max_examples=1_500, deadline=None)
@given(st.sampled_from(TYPES), _INPUTS)
@example("integer", "12")
@example("integer", "١٢")
@example("integer", "9" * 5_000)
@example("integer", 3.0)
@example("integer", True)
@example("integer", _Number(2))
@example("number", "0.1")
@example("string", _Text("x"))
@example("boolean", "yes")
@example("object", '{"a": 1}')
@example("array", "[1]")
def test_property_a_scalar_caster_answers_as_the_general_steps(type_name: str, value: Any) -> None:
    fast_state, general_state = CastState(), CastState()
    location: Location = ("key", 0)
    fast = scalar_caster(type_name)(value, location, fast_state)
    general = general_scalar(type_name, value, location, general_state)
    assert _same_value(fast, general)
    assert (fast is value) == (general is value)
    assert fast_state.repairs == general_state.repairs
    assert [type(r.after) for r in fast_state.repairs] == [
        type(r.after) for r in general_state.repairs
    ]


def test_integer_text_is_cast_inline_with_its_repair() -> None:
    state = CastState()
    assert scalar_caster("integer")(" 60 ", ("minutes",), state) == 60
    assert state.repairs == [Repair(("minutes",), "cast", " 60 ", 60)]


# --- the pydantic conversion, called on the compiled validator -----------------------


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Attendee(BaseModel):
    name: str
    email: str


class _Converted(TypedDict, total=False):
    start: datetime
    priority: Priority
    attendees: list[Attendee]


_ADAPTER: TypeAdapter[_Converted] = TypeAdapter(_Converted)
_DIRECT = _validate_python(_ADAPTER)

_PEOPLE = st.lists(
    st.one_of(
        st.fixed_dictionaries({"name": st.text(max_size=3), "email": st.text(max_size=3)}),
        st.dictionaries(st.sampled_from(["name", "email", "x"]), st.integers(), max_size=2),
        st.integers(),
    ),
    max_size=3,
)
_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "start": st.one_of(
            st.sampled_from(["2026-05-04T15:30:00Z", "2026-05-04", "noon", "1700000000", ""]),
            st.integers(),
        ),
        "priority": st.sampled_from(["low", "high", "urgent", 1, None]),
        "attendees": _PEOPLE,
        "title": st.text(max_size=3),
    },
)


def test_the_direct_converter_is_the_compiled_validator() -> None:
    assert _ADAPTER.validator.validate_python == _DIRECT


@settings(max_examples=400, deadline=None)
@given(_ARGUMENTS)
def test_property_the_direct_converter_converts_and_refuses_as_the_adapter(
    arguments: dict[str, Any],
) -> None:
    try:
        expected = _ADAPTER.validate_python(arguments)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as caught:
            _DIRECT(arguments)
        assert caught.value.errors() == exc.errors()
        return
    assert _DIRECT(arguments) == expected


# --- blank argument text --------------------------------------------------------------


@tool
def count(n: int = 1) -> int:
    """Count."""
    return n


@pytest.mark.parametrize("blank", ["", " ", "\n\t ", "\u2003", "\u3000\u2028"])
def test_every_kind_of_blank_text_means_no_arguments(blank: str) -> None:
    for raw in (blank, blank.encode()):
        prepared = ToolRegistry([count]).prepare_call("count", raw)
        assert prepared.error is None and prepared.arguments == {}


@pytest.mark.parametrize("text", [" x", '\u2003{"n": 2}', "\u2003{"])
def test_text_that_is_not_blank_is_still_decoded(text: str) -> None:
    prepared = ToolRegistry([count]).prepare_call("count", text)
    # JSON allows only its four whitespace characters around a value
    assert prepared.error is not None and prepared.error.kind.value == "arguments_not_json"


# --- the did-you-mean index -----------------------------------------------------------


def test_the_did_you_mean_index_is_built_once_per_change_of_tools() -> None:
    registry = ToolRegistry([count])
    assert registry.prepare_call("cuont", {}).error is not None
    index = registry._name_index
    assert index is not None
    for typo in ("conut", "coutn", "counts", "xcount"):
        assert registry.prepare_call(typo, {}).error is not None
        assert registry._name_index is index  # every new typo reuses it
    registry.register(tool(name="counter")(count.fn))
    error = registry.prepare_call("countr", {}).error
    assert registry._name_index is not index  # rebuilt after the change, with the new name
    assert error is not None and "'counter'" in error.render()


# --- JSON paths -----------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def regex_path(location: list[str | int]) -> str:
    """`format_path` as it was written with a regular expression for plain keys."""
    out = ["$"]
    for part in location:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.match(part) and len(part) <= 60:
            out.append(f".{part}")
        else:
            shown = part if len(part) <= 60 else f"{part[:40]}…{part[-10:]}"
            out.append(f"[{json.dumps(shown, ensure_ascii=False)}]")
    return "".join(out)


_PARTS = st.one_of(
    st.integers(0, 99),
    st.text(max_size=70),
    st.text(alphabet="abZ_09", max_size=62),
    st.sampled_from(["a", "_x", "9a", "é", "ａ", "a\n", "class", "a b", "x" * 60, "x" * 61]),
)


@settings(max_examples=1_500, deadline=None)
@given(st.lists(_PARTS, max_size=16))
def test_property_a_json_path_is_written_as_with_the_regular_expression(
    location: list[str | int],
) -> None:
    assert format_path(location) == regex_path(location)
