"""Hostile provider streams through every real SDK: a stream that ends before the model
finished, or an event that is not JSON, is a `ModelResponseError` with the conversation
kept, never a truncated "final" answer or a raw parser exception."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.agent.scripted_server import Reply, ScriptedServer
from tests.agent.test_deadline import PROVIDERS, adapter, answer

from toolbridge.agent import AgentRunner, ModelResponseError, UserMessage

# How many events at the end of each provider's stream say that the model finished.
ENDING = {
    "openai_chat": 3,  # the finish_reason chunk, the usage chunk, [DONE]
    "openai_responses": 1,  # response.completed
    "anthropic": 2,  # message_delta with the stop reason, message_stop
    "gemini": 1,  # the chunk with finishReason
    "ollama": 1,  # the done line
    "bedrock": 2,  # messageStop, metadata
}


def cut_short(provider: str) -> Reply:
    """The provider's answer stream, well framed, without the events that end it (a
    proxy or server that closed the stream early)."""
    full = answer(provider, "The answer is forty-two, and here is why")
    drop = ENDING[provider]
    if full.events is not None:
        return replace(full, events=list(full.events)[:-drop])
    if full.lines is not None:
        return replace(full, lines=list(full.lines)[:-drop])
    assert full.frames is not None
    return replace(full, frames=list(full.frames)[:-drop])


def malformed(provider: str) -> Reply:
    """A stream whose first event is cut off mid-JSON."""
    if provider == "ollama":
        return Reply(frames=[b'{"model": "qwen3", "message": {"role": \n'])
    first = answer(provider, "hi").events
    assert first is not None
    return Reply(events=[(first[0][0], '{"type": "oops", "x": ')])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_ends_before_the_model_finished_is_an_error(
    server: ScriptedServer, provider: str
) -> None:
    server.add(cut_short(provider))
    runner = AgentRunner(adapter(provider, server.url))
    with pytest.raises(ModelResponseError, match="ended before the model finished") as caught:
        await runner.run("What is the answer?")
    state = caught.value.state
    assert state is not None and state.conversation == [UserMessage("What is the answer?")]


@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p != "bedrock"])
async def test_an_event_that_is_not_json_is_an_error(server: ScriptedServer, provider: str) -> None:
    server.add(malformed(provider))
    runner = AgentRunner(adapter(provider, server.url))
    with pytest.raises(ModelResponseError, match="could not be read") as caught:
        await runner.run("What is the answer?")
    assert caught.value.conversation == [UserMessage("What is the answer?")]
