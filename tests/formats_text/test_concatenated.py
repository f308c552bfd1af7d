"""Arguments run together ({..}{..}) reach the registry raw, for every dialect that
reads arguments up to a terminator, so the model sees an error instead of one part
being run."""

from __future__ import annotations

import pytest

from toolbridge import ErrorKind, ToolRegistry, tool
from toolbridge.formats.text import parse_text_calls

RUN_TOGETHER = '{"city":"Paris"}{"city":"Rome"}'


@pytest.mark.parametrize(
    ("dialect", "text"),
    [
        ("mistral", f"[TOOL_CALLS]get_weather[ARGS]{RUN_TOGETHER}"),
        (
            "harmony",
            "<|start|>assistant<|channel|>commentary to=functions.get_weather "
            f"<|constrain|>json<|message|>{RUN_TOGETHER}<|call|>",
        ),
    ],
)
def test_run_together_arguments_are_refused_not_split(dialect: str, text: str) -> None:
    @tool
    async def get_weather(city: str) -> str:
        return city

    (call,) = parse_text_calls(text, dialect).calls
    assert call.arguments == RUN_TOGETHER
    error = ToolRegistry([get_weather]).prepare_call(call.name, call.arguments).error
    assert error is not None and error.kind is ErrorKind.ARGUMENTS_NOT_JSON
