"""The run deadline with every real SDK: events are awaited with the time left, in
another task, which each SDK's stream must tolerate; a slow stream is cut off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import ollama
import openai
import pytest
from google import genai
from google.genai import types
from tests.agent import sample_tools
from tests.agent.scripted_server import (
    Reply,
    ScriptedServer,
    anthropic_stream,
    bedrock_stream,
    gemini_stream,
    ollama_stream,
    openai_chat_stream,
    responses_stream,
)

from toolbridge.agent import ModelAdapter, StopReason, TextDelta, UserMessage
from toolbridge.agent.adapters import (
    AnthropicModel,
    GeminiModel,
    OllamaModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
)


def adapter(provider: str, url: str) -> ModelAdapter:
    if provider == "openai_chat":
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        return OpenAIChatModel("gpt-test", client=client)
    if provider == "openai_responses":
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        return OpenAIResponsesModel("gpt-test", client=client)
    if provider == "anthropic":
        aclient = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0)
        return AnthropicModel("claude-sonnet-4-5", client=aclient)
    if provider == "bedrock":
        from tests.agent.test_bedrock import model as bedrock_model

        return bedrock_model(url)
    if provider == "gemini":
        options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
        client = genai.Client(api_key="k", http_options=options)
        return GeminiModel("gemini-3-pro-preview", client=client)
    return OllamaModel("qwen3", client=ollama.AsyncClient(host=url))


def answer(provider: str, text: str) -> Reply:
    if provider == "openai_chat":
        return openai_chat_stream(text=text)
    if provider == "openai_responses":
        message = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        return responses_stream([message])
    if provider == "anthropic":
        return anthropic_stream([{"type": "text", "text": text}])
    if provider == "gemini":
        return gemini_stream([{"text": text[:4]}, {"text": text[4:]}])
    if provider == "bedrock":
        return bedrock_stream([{"text": text}])
    return ollama_stream(text=text)


PROVIDERS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_run_within_its_deadline(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    server.add(answer(provider, "All good here."))
    runner = sample_tools.runner(adapter(provider, server.url), workspace, deadline=60)
    result = await runner.run("hi")
    assert result.stop_reason is StopReason.FINAL and result.output == "All good here."


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_slow_stream_is_cut_off_at_the_deadline(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    reply: Any = answer(provider, "Slow answer, long in coming.")
    reply.delay = 5.0
    server.add(reply)
    runner = sample_tools.runner(adapter(provider, server.url), workspace, deadline=0.5)
    events = [event async for event in runner.stream("hi")]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.DEADLINE
    assert result.conversation == [UserMessage("hi")]
    assert all(isinstance(e, TextDelta) for e in events[:-1])
