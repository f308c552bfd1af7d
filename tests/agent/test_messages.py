"""The neutral conversation and the run state survive JSON exactly."""

from __future__ import annotations

import json

import pytest

from toolbridge import ErrorKind, ImageBlock, JsonBlock, TextBlock, ToolCallRequest, ToolResult
from toolbridge.agent import (
    AssistantMessage,
    RunState,
    SystemMessage,
    ToolResultsMessage,
    ToolReturn,
    Usage,
    UserMessage,
    message_from_json,
    message_to_json,
)
from toolbridge.agent.state import PendingCall
from toolbridge.execution.approval import arguments_digest
from toolbridge.formats import TurnPart

CALL = ToolCallRequest(
    "call_1", "get_weather", '{"city": "Paris"}', {"thought_signature": "c2ln", "item_id": "fc_1"}
)
ASSISTANT = AssistantMessage(
    text="Checking.",
    calls=(CALL,),
    parts=(
        TurnPart("opaque", {"type": "thinking", "thinking": "hm", "signature": "c2ln"}),
        TurnPart("text", "Checking.", {"thoughtSignature": "dGV4dA=="}),
        TurnPart("call", 0),
    ),
    reasoning="hm",
    format="anthropic",
    model="claude",
    finish_reason="tool_use",
)
RESULTS = ToolResultsMessage(
    (
        ToolReturn(CALL, ToolResult("Sunny")),
        ToolReturn(
            CALL,
            ToolResult(
                [TextBlock("a"), JsonBlock({"k": [1, 2]}), ImageBlock(b"\x89PNG", "image/png")],
                metadata={"page": 1},
            ),
        ),
        ToolReturn(CALL, ToolResult("Error: no", is_error=True, error_kind=ErrorKind.TIMEOUT)),
    )
)
MESSAGES = [SystemMessage("Be brief."), UserMessage("Weather?"), ASSISTANT, RESULTS]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_every_message_round_trips_through_json_text(message: object) -> None:
    text = json.dumps(message_to_json(message))  # type: ignore[arg-type]
    assert message_from_json(json.loads(text)) == message


def test_opaque_parts_render_only_for_their_own_format() -> None:
    same = ASSISTANT.parsed("anthropic")
    other = ASSISTANT.parsed("openai_chat")
    assert same.parts is not None and [p.kind for p in same.parts] == ["opaque", "text", "call"]
    assert other.parts is not None and [p.kind for p in other.parts] == ["text", "call"]


def test_run_state_round_trips() -> None:
    digest = arguments_digest("get_weather", {"city": "Paris"})
    pending = PendingCall(CALL, "get_weather", {"city": "Paris"}, digest)
    state = RunState(
        [UserMessage("hi"), ASSISTANT],
        [pending],
        [ToolReturn(CALL, ToolResult("done"))],
        turns=3,
        tool_calls=4,
        usage=Usage(1, 2, 3, 4),
    )
    again = RunState.from_json(json.dumps(state.to_json()))
    assert again.conversation == state.conversation
    assert again.pending == state.pending
    assert again.settled == state.settled
    assert (again.turns, again.tool_calls, again.usage) == (3, 4, Usage(1, 2, 3, 4))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"role": "robot"}, "unknown message role 'robot'"),
        ({"role": "user"}, "stored user message is incomplete"),
        ([1], "must be a JSON object"),
        (
            {"role": "assistant", "parts": [{"kind": "weird", "value": 1}]},
            "unknown turn part kind 'weird'",
        ),
    ],
)
def test_bad_stored_messages_say_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        message_from_json(data)  # type: ignore[arg-type]


def test_bad_states_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="version 1"):
        RunState.from_json({"version": 99, "conversation": []})
    data = RunState([UserMessage("hi")]).to_json()
    data["pending"] = [{"call_id": "ghost", "tool_name": "x", "arguments": {}, "digest": "d"}]
    with pytest.raises(ValueError, match="'ghost' is not a call"):
        RunState.from_json(data)


@pytest.mark.parametrize("approved", ["false", "no", 0.5, None, [], "true"])
def test_a_stored_decision_must_say_approved_as_a_boolean(approved: object) -> None:
    # bool("false") is True: a decision stored as text must not approve the call.
    from toolbridge.agent import ApprovalDecision

    data = {"call_id": "c1", "digest": "ab" * 32, "approved": approved}
    with pytest.raises(ValueError, match="'approved' must be true or false"):
        ApprovalDecision.from_json(data)


def test_a_stored_decision_round_trips() -> None:
    from toolbridge.agent import ApprovalDecision

    decision = ApprovalDecision("c1", "ab" * 32, False, "keep it")
    assert ApprovalDecision.from_json(json.loads(json.dumps(decision.to_json()))) == decision
