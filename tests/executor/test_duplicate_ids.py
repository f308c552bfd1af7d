"""Two calls sharing an id in one batch: the first runs, the second is refused with a
clear error and never runs, so no call is ever answered with another call's result."""

from __future__ import annotations

from toolbridge import (
    ErrorKind,
    OutcomeStatus,
    ToolCallRequest,
    ToolExecutor,
    ToolRegistry,
    tool,
)


def counting_registry(ran: list[str]) -> ToolRegistry:
    @tool(read_only=True)
    def echo(text: str) -> str:
        """Return the text."""
        ran.append(text)
        return f"echo {text}"

    return ToolRegistry([echo])


async def test_the_second_call_with_an_id_is_refused_not_run() -> None:
    ran: list[str] = []
    executor = ToolExecutor(counting_registry(ran))
    calls = [
        ToolCallRequest("c1", "echo", {"text": "first"}),
        ToolCallRequest("c2", "echo", {"text": "other"}),
        ToolCallRequest("c1", "echo", {"text": "second"}),
    ]
    first, other, second = await executor.run(calls)
    assert sorted(ran) == ["first", "other"]
    assert first.call is calls[0] and first.result.text == "echo first"
    assert other.result.text == "echo other"
    assert second.call is calls[2] and second.status is OutcomeStatus.ERROR
    assert second.error is not None and second.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "'c1' is already used by call 1 ('echo')" in second.result.text
    assert "echo first" not in second.result.text


async def test_streamed_batches_refuse_it_too() -> None:
    ran: list[str] = []
    executor = ToolExecutor(counting_registry(ran))
    calls = [
        ToolCallRequest("x", "echo", {"text": "a"}),
        ToolCallRequest("x", "echo", {"text": "b"}),
    ]
    finished = [e.outcome async for e in executor.stream(calls) if e.outcome is not None]
    assert ran == ["a"]
    by_text = {o.call.arguments["text"]: o for o in finished}  # type: ignore[index]
    assert by_text["a"].status is OutcomeStatus.OK
    assert by_text["b"].status is OutcomeStatus.ERROR
