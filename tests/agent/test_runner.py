"""The loop itself, over `ScriptedModel`: budgets, stop reasons, approvals, rendering."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.agent import sample_tools

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolRegistry, tool
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RateLimitError,
    RunState,
    ScriptedModel,
    StopReason,
    SystemMessage,
    TextDelta,
    ToolResultsMessage,
    Usage,
    UserMessage,
)
from toolbridge.agent.events import ModelEvent
from toolbridge.skills import SkillSet


def weather_call(call_id: str, city: str) -> ToolCallRequest:
    return ToolCallRequest(call_id, "get_weather", json.dumps({"city": city}))


def calls_turn(*calls: ToolCallRequest, text: str = "") -> AssistantMessage:
    return AssistantMessage(text=text, calls=calls)


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(text=text)


def test_tools_may_be_plain_functions() -> None:
    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    model = ScriptedModel(
        [calls_turn(ToolCallRequest("c1", "double", '{"x": "21"}')), answer("42")]
    )
    result = AgentRunner(model, [double]).run_sync("double 21")
    assert result.stop_reason is StopReason.FINAL
    assert model.requests[1][-1] == {"role": "tool", "tool_call_id": "c1", "content": "42"}


def test_max_turns_stops_the_run(workspace: Path) -> None:
    turns = [calls_turn(weather_call(f"c{i}", "Oslo")) for i in range(5)]
    runner = sample_tools.runner(
        ScriptedModel(turns),
        workspace,
        max_turns=2,
        policy=ExecutionPolicy(loop_guard=False, persist_results=False),
    )
    result = runner.run_sync("go")
    assert result.stop_reason is StopReason.MAX_TURNS
    assert result.turns == 2 and result.tool_calls == 2
    assert isinstance(result.conversation[-1], ToolResultsMessage)


def test_max_tool_calls_answers_the_calls_it_does_not_run(workspace: Path) -> None:
    model = ScriptedModel(
        [
            calls_turn(weather_call("c1", "Oslo")),
            calls_turn(weather_call("c2", "Rome"), weather_call("c3", "Lima")),
        ]
    )
    runner = sample_tools.runner(model, workspace, max_tool_calls=2)
    result = runner.run_sync("go")
    assert result.stop_reason is StopReason.MAX_TOOL_CALLS
    assert result.tool_calls == 1
    last = result.conversation[-1]
    assert isinstance(last, ToolResultsMessage)
    assert [r.call.id for r in last.results] == ["c2", "c3"]
    assert all("budget of 2 tool calls" in r.result.text for r in last.results)


def test_token_budget(workspace: Path) -> None:
    model = ScriptedModel(
        [calls_turn(weather_call("c1", "Oslo")), answer("never")], usage=Usage(80, 30, 0, 1)
    )
    result = sample_tools.runner(model, workspace, max_total_tokens=100).run_sync("go")
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert result.usage.total_tokens == 110 and result.turns == 1


class SlowModel:
    """Streams one delta, then never finishes the turn."""

    format = "openai_chat"
    model = "slow"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta("thinking...", request.turn)
        await asyncio.Event().wait()
        yield ModelResponse(AssistantMessage(), Usage())  # pragma: no cover


async def test_deadline_cuts_a_model_turn_off(workspace: Path) -> None:
    runner = sample_tools.runner(SlowModel(), workspace, deadline=0.2)
    events = [event async for event in runner.stream("go")]
    assert isinstance(events[0], TextDelta)
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.DEADLINE
    assert result.conversation == [UserMessage("go")]  # the unfinished turn is not kept
    assert result.turns == 0


def test_fail_on_tool_error_stops_after_recording_the_results(workspace: Path) -> None:
    model = ScriptedModel([calls_turn(ToolCallRequest("c1", "nope", "{}")), answer("x")])
    runner = sample_tools.runner(
        model, workspace, policy=ExecutionPolicy(fail_on_tool_error=True, persist_results=False)
    )
    result = runner.run_sync("go")
    assert result.stop_reason is StopReason.TOOL_ERROR
    last = result.conversation[-1]
    assert isinstance(last, ToolResultsMessage) and last.results[0].result.is_error


def test_each_turn_renders_only_the_new_messages(workspace: Path) -> None:
    turns: list[AssistantMessage] = [
        calls_turn(weather_call(f"c{i}", f"city{i}")) for i in range(30)
    ]
    model = ScriptedModel([*turns, answer("done")])
    runner = sample_tools.runner(
        model, workspace, policy=ExecutionPolicy(loop_guard=False, persist_results=False)
    )
    seen: list[int] = []
    original = model.stream

    def spy(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        seen.append(request.cache.rendered)
        return original(request)

    model.stream = spy  # type: ignore[method-assign]
    result = runner.run_sync("go")
    assert result.stop_reason is StopReason.FINAL
    # before turn n >= 2 the cache has rendered the 1 + 2 * (n - 2) messages turn n - 1
    # sent, each once; re-rendering the history would make these sums quadratic
    assert seen == [0] + [1 + 2 * (n - 2) for n in range(2, 32)]
    assert len(model.requests[-1]) == 1 + 2 * 30


def test_an_edited_history_is_rendered_again(workspace: Path) -> None:
    model = ScriptedModel([answer("one"), answer("two")])
    runner = sample_tools.runner(model, workspace)
    first = runner.run_sync("hi")
    edited = [SystemMessage("Be brief."), *first.conversation, UserMessage("again")]
    runner.run_sync(edited)
    assert model.requests[1] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "again"},
    ]


def test_approval_in_process_with_a_changed_call(workspace: Path) -> None:
    write = ToolCallRequest("w1", "write_note", '{"name": "a.txt", "text": "x"}')
    model = ScriptedModel([calls_turn(write), answer("ok")])
    runner = sample_tools.runner(model, workspace)
    paused = runner.run_sync("write")
    pending = paused.pending[0]

    # a decision made for other arguments does not approve this call
    forged = pending.approve()
    forged = type(forged)(forged.call_id, "0" * 64, True)
    with pytest.raises(ValueError, match="digest mismatch"):
        runner.run_sync(paused.state, decisions=[forged])
    with pytest.raises(ValueError, match="not pending"):
        runner.run_sync(paused.state, decisions={"zzz": pending.approve()})

    # no decision yet: still paused, nothing ran
    again = runner.run_sync(paused.state)
    assert again.stop_reason is StopReason.APPROVAL_REQUIRED
    assert not (workspace / "a.txt").exists()

    done = runner.run_sync(paused.state, decisions=[pending.approve()])
    assert done.stop_reason is StopReason.FINAL
    assert (workspace / "a.txt").read_text() == "x\n"


def test_edited_arguments_in_a_saved_state_are_not_run(workspace: Path) -> None:
    write = ToolCallRequest("w1", "write_note", '{"name": "a.txt", "text": "safe"}')
    model = ScriptedModel([calls_turn(write), answer("ok")])
    runner = sample_tools.runner(model, workspace)
    paused = runner.run_sync("write")
    data = paused.state.to_json()
    data["conversation"][-1]["calls"][0]["arguments"] = '{"name": "a.txt", "text": "evil"}'
    result = runner.run_sync(RunState.from_json(data), decisions=[paused.pending[0].approve()])
    # the approval was for "safe": the edited call asks again instead of running
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    assert result.pending[0].arguments == {"name": "a.txt", "text": "evil"}
    assert not (workspace / "a.txt").exists()


def test_a_saved_state_whose_shown_arguments_lie_is_refused(workspace: Path) -> None:
    # The stored state is edited so the call and the digest say "evil" while the
    # arguments shown to the user still say "safe": approving what the user sees must
    # not run the other call; the state is refused when it is read.
    from toolbridge.execution.approval import arguments_digest

    write = ToolCallRequest("w1", "write_note", '{"name": "a.txt", "text": "safe"}')
    model = ScriptedModel([calls_turn(write), answer("ok")])
    runner = sample_tools.runner(model, workspace)
    paused = runner.run_sync("write")
    data = paused.state.to_json()
    evil = {"name": "a.txt", "text": "evil"}
    data["conversation"][-1]["calls"][0]["arguments"] = json.dumps(evil)
    data["pending"][0]["digest"] = arguments_digest("write_note", evil)
    with pytest.raises(ValueError, match="digest of the arguments"):
        RunState.from_json(data)
    assert not (workspace / "a.txt").exists()


def test_decisions_without_pending_calls_are_refused(workspace: Path) -> None:
    runner = sample_tools.runner(ScriptedModel([answer("hi")]), workspace)
    result = runner.run_sync("hi")
    with pytest.raises(ValueError, match="no pending calls"):
        runner.run_sync(result.state, decisions={"x": object()})  # type: ignore[dict-item]


def test_a_finished_run_continues_with_a_new_user_message(workspace: Path) -> None:
    model = ScriptedModel([answer("one"), answer("two")])
    runner = sample_tools.runner(model, workspace)
    first = runner.run_sync("hi")
    state = first.state
    state.conversation.append(UserMessage("more"))
    second = runner.run_sync(state)
    assert second.output == "two" and second.turns == 2
    assert second.usage.requests == 2


def test_model_errors_carry_the_conversation(workspace: Path) -> None:
    class Failing:
        format = "openai_chat"
        model = "failing"

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            if request.turn == 2:
                raise RateLimitError("slow down", status=429)
            yield ModelResponse(AssistantMessage(calls=(weather_call("c1", "Oslo"),)), Usage())

    runner = sample_tools.runner(Failing(), workspace)
    with pytest.raises(RateLimitError) as info:
        runner.run_sync("go")
    assert [m.role for m in info.value.conversation] == ["user", "assistant", "tool"]
    assert info.value.state is not None and info.value.state.turns == 1  # the failed one not


def test_an_adapter_that_ends_without_a_response_is_an_error(workspace: Path) -> None:
    class Empty:
        format = "openai_chat"
        model = "empty"

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            yield TextDelta("hm", request.turn)

    from toolbridge.agent import ModelResponseError

    with pytest.raises(ModelResponseError, match="without a ModelResponse"):
        sample_tools.runner(Empty(), workspace).run_sync("go")


def test_skills_add_their_summary_and_tools(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "greeting"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: greeting\ndescription: How to greet people.\n---\n\n# Greet\n\nSay hello.\n"
    )
    skills = SkillSet([tmp_path / "skills"], entry_points=False)

    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    load = ToolCallRequest("s1", "load_skill", '{"name": "greeting"}')
    model = ScriptedModel([calls_turn(load), answer("Hello!")])
    runner = AgentRunner(model, ToolRegistry([noop]), instructions="Be kind.", skills=skills)
    assert runner.instructions is not None
    assert runner.instructions.startswith("Be kind.\n\n")
    assert "greeting" in runner.instructions and "How to greet people." in runner.instructions
    assert sorted(runner.registry.tool_names) == ["load_skill", "noop", "read_skill_file"]
    result = runner.run_sync("greet me")
    assert result.output == "Hello!"
    tool_message = model.requests[1][-1]
    assert "Say hello." in tool_message["content"]


def test_bad_budgets_are_refused() -> None:
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="max_turns"):
        AgentRunner(model, max_turns=0)
    with pytest.raises(ValueError, match="deadline"):
        AgentRunner(model, deadline=0)
    with pytest.raises(TypeError, match="tools must be"):
        AgentRunner(model, [42])  # type: ignore[list-item]
