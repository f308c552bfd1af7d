"""The provider's own tool search: Anthropic's tool-search server tool and the OpenAI
Responses API's ``tool_search``, each through the real SDK against a scripted 127.0.0.1
server that searches, then calls what it found; the search blocks and items are
replayed in the next request exactly as they came."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from tests.agent import sample_tools
from tests.agent.scripted_server import ScriptedServer, anthropic_stream, responses_stream

from toolbridge import ExecutionPolicy, Tool, ToolContext, ToolRegistry, tool_parameters
from toolbridge.agent import AgentRunner, StopReason, ToolFinished, ToolStarted
from toolbridge.agent.adapters import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from toolbridge.core.tool_search import SEARCH_TOOL_NAME, DeferralPolicy
from toolbridge.formats import anthropic as anthropic_format
from toolbridge.formats import openai_responses as responses_format
from toolbridge.mcp import MCPClient

BETA = "advanced-tool-use-2025-11-20"


@tool_parameters({"type": "object", "properties": {"id": {"type": "string"}}})
class CrmTool(Tool):
    async def execute(self, **kwargs: Any) -> str:
        return f"{self.name} ran"


def crm(number: int) -> Tool:
    made = CrmTool()
    made.name = f"crm_record_{number:02d}"
    made.description = f"Read CRM record number {number} of the sales pipeline."
    return made


def registry(workspace: Path) -> ToolRegistry:
    tools = [sample_tools.get_weather, sample_tools.write_note, *(crm(n) for n in range(40))]
    return ToolRegistry(tools, context=ToolContext(workspace=workspace))


def claude(server: ScriptedServer, name: str = "claude-sonnet-4-5") -> AnthropicModel:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key", max_retries=0)
    return AnthropicModel(name, client=client)


def gpt(server: ScriptedServer, name: str = "gpt-5.4") -> OpenAIResponsesModel:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
    return OpenAIResponsesModel(name, client=client)


def runner(model: Any, tools: ToolRegistry, **options: Any) -> AgentRunner:
    options.setdefault("tool_search", True)
    return AgentRunner(model, tools, policy=ExecutionPolicy(persist_results=False), **options)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


SERVER_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "tool_search_tool_bm25",
    "input": {"query": "weather in a city", "limit": 3},
}
SEARCH_RESULT = {
    "type": "tool_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
    },
}
WEATHER_CALL = {
    "type": "tool_use",
    "id": "toolu_w1",
    "name": "get_weather",
    "input": {"city": "Paris"},
}


async def test_claude_searches_natively_then_calls_what_it_found(
    server: ScriptedServer, workspace: Path
) -> None:
    text = {"type": "text", "text": "Found a weather tool."}
    server.add(
        anthropic_stream([SERVER_CALL, SEARCH_RESULT, text, WEATHER_CALL]),
        anthropic_stream([{"type": "text", "text": "Sunny in Paris."}]),
    )
    events = [e async for e in runner(claude(server), registry(workspace)).stream("Paris?")]
    result = events[-1].result  # type: ignore[union-attr]

    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in Paris."
    assert [e.call.name for e in events if isinstance(e, ToolStarted)] == ["get_weather"]
    finished = [e.outcome.result.content for e in events if isinstance(e, ToolFinished)]
    assert finished == ["Sunny in Paris"]
    first, second = server.bodies()
    tools = first["tools"]
    assert tools[0] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert len(tools) == 43 and SEARCH_TOOL_NAME not in [t["name"] for t in tools]
    assert all(t["defer_loading"] is True for t in tools[1:])  # 42 tools: past 30
    assert second["tools"] == tools  # the same definitions, so the cached prefix holds
    for request in server.requests:
        assert BETA in request.headers["anthropic-beta"].split(",")
    replayed = second["messages"][1]
    assert replayed["role"] == "assistant"
    sent = [SERVER_CALL, SEARCH_RESULT, text, WEATHER_CALL]
    assert [canonical(b) for b in replayed["content"]] == [canonical(b) for b in sent]
    (answer,) = second["messages"][2]["content"]
    assert answer["tool_use_id"] == "toolu_w1" and answer["content"] == "Sunny in Paris"


async def test_claude_regex_search_and_the_callers_beta_header_both_go(
    server: ScriptedServer, workspace: Path
) -> None:
    from toolbridge.agent import ModelSettings

    server.add(anthropic_stream([{"type": "text", "text": "Hi."}]))
    policy = DeferralPolicy(native_search="regex", always_loaded=frozenset({"write_note"}))
    settings = ModelSettings(extra={"extra_headers": {"anthropic-beta": "other-beta"}})
    await runner(claude(server), registry(workspace), tool_search=policy, settings=settings).run(
        "Hello."
    )
    (body,) = server.bodies()
    assert body["tools"][0]["type"] == "tool_search_tool_regex_20251119"
    marked = {t["name"]: t.get("defer_loading") for t in body["tools"][1:]}
    assert marked["write_note"] is None and marked["get_weather"] is True
    assert server.requests[0].headers["anthropic-beta"].split(",") == ["other-beta", BETA]


def test_a_whole_claude_message_with_search_blocks_replays_unchanged() -> None:
    message = {
        "role": "assistant",
        "content": [SERVER_CALL, SEARCH_RESULT, WEATHER_CALL],
        "stop_reason": "tool_use",
    }
    parsed = anthropic_format.parse_response(message)
    assert [c.name for c in parsed.calls] == ["get_weather"]
    (replayed,) = anthropic_format.assistant_messages(parsed)
    assert [canonical(b) for b in replayed["content"]] == [canonical(b) for b in message["content"]]


async def test_a_server_tool_call_whose_streamed_input_is_not_json_fails_the_turn(
    server: ScriptedServer, workspace: Path
) -> None:
    from toolbridge.agent import ModelResponseError

    reply = anthropic_stream([SERVER_CALL, WEATHER_CALL])
    assert reply.events is not None
    events = list(reply.events)
    for position, (name, data) in enumerate(events):
        delta = data.get("delta") if isinstance(data, dict) else None
        if name == "content_block_delta" and data["index"] == 0 and delta:
            events[position] = (name, {**data, "delta": {**delta, "partial_json": "{"}})
    reply.events = events
    server.add(reply)
    with pytest.raises(ModelResponseError, match="server tool call 'srvtoolu_01' is not JSON"):
        await runner(claude(server), registry(workspace)).run("Paris?")


async def test_auto_picks_the_local_search_on_an_older_claude_and_native_is_refused(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(anthropic_stream([{"type": "text", "text": "Hi."}]))
    await runner(claude(server, "claude-3-5-haiku-latest"), registry(workspace)).run("Hello.")
    (body,) = server.bodies()
    assert [t["name"] for t in body["tools"]] == [SEARCH_TOOL_NAME]
    assert "anthropic-beta" not in server.requests[0].headers
    with pytest.raises(ValueError, match=r"mode='native'.*has no provider tool search"):
        runner(
            claude(server, "claude-3-5-haiku-latest"),
            registry(workspace),
            tool_search=DeferralPolicy(mode="native"),
        )
    chat = OpenAIChatModel("gpt-5.4", client=openai.AsyncOpenAI(api_key="k", base_url=server.url))
    with pytest.raises(ValueError, match="has no provider tool search"):
        runner(chat, registry(workspace), tool_search=DeferralPolicy(mode="native"))


async def test_mode_local_keeps_the_local_search_on_a_model_that_has_its_own(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(anthropic_stream([{"type": "text", "text": "Hi."}]))
    local = DeferralPolicy(mode="local")
    await runner(claude(server), registry(workspace), tool_search=local).run("Hello.")
    (body,) = server.bodies()
    assert [t["name"] for t in body["tools"]] == [SEARCH_TOOL_NAME]


def test_which_models_have_a_provider_tool_search() -> None:
    from toolbridge.agent.adapters._common import claude_has_tool_search
    from toolbridge.agent.adapters.openai_responses import gpt_has_tool_search

    assert claude_has_tool_search("claude-opus-4-5-20251101")
    assert claude_has_tool_search("us.anthropic.claude-sonnet-4-6-v1:0")
    assert not claude_has_tool_search("claude-sonnet-4-20250514")
    assert not claude_has_tool_search("claude-3-7-sonnet-latest")
    assert gpt_has_tool_search("gpt-5.4") and gpt_has_tool_search("gpt-5.5-mini")
    assert gpt_has_tool_search("gpt-6")
    assert not gpt_has_tool_search("gpt-5") and not gpt_has_tool_search("gpt-5.1-codex")
    assert not gpt_has_tool_search("gpt-4o") and not gpt_has_tool_search("o3")


# --- OpenAI Responses ------------------------------------------------------------------


def time_server() -> dict[str, Any]:
    command = Path(sys.executable).parent / "mcp-server-time"
    assert command.exists(), "install the dev extras: pip install -e '.[dev]'"
    return {"mcpServers": {"time": {"command": str(command)}}}


async def test_gpt_searches_natively_then_calls_an_mcp_tool_it_found(
    server: ScriptedServer, workspace: Path
) -> None:
    tools = registry(workspace)
    search_call = {
        "type": "tool_search_call",
        "id": "tsc_1",
        "call_id": None,  # hosted search: no call id, and the null is replayed as it came
        "execution": "server",
        "status": "completed",
        "arguments": {"paths": ["time"]},
    }
    loaded = {
        "type": "namespace",
        "name": "time",
        "description": "The tools of the MCP server 'time'.",
        "tools": [{"type": "function", "name": "mcp_time_get_current_time", "defer_loading": True}],
    }
    search_output = {
        "type": "tool_search_output",
        "id": "tso_1",
        "call_id": None,
        "execution": "server",
        "status": "completed",
        "tools": [loaded],
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "namespace": "time",
        "name": "mcp_time_get_current_time",
        "arguments": '{"timezone": "UTC"}',
        "status": "completed",
    }
    server.add(
        responses_stream([search_call, search_output, call]),
        responses_stream(
            [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "It is noon.", "annotations": []}],
                }
            ]
        ),
    )
    async with MCPClient(time_server(), tools):
        result = await runner(gpt(server), tools).run("What time is it in UTC?")

    assert result.stop_reason is StopReason.FINAL and result.output == "It is noon."
    first, second = server.bodies()
    sent = first["tools"]
    assert sent[0] == {"type": "tool_search"}
    assert SEARCH_TOOL_NAME not in [t.get("name") for t in sent]
    (space,) = [t for t in sent if t["type"] == "namespace"]
    assert space["name"] == "time"
    assert [t["name"] for t in space["tools"]] == [
        "mcp_time_convert_time",
        "mcp_time_get_current_time",
    ]
    assert all(t["defer_loading"] is True for t in space["tools"])
    functions = [t for t in sent if t["type"] == "function"]
    assert len(functions) == 42 and all(t["defer_loading"] is True for t in functions)
    assert second["tools"] == sent
    items = second["input"]
    assert canonical(items[1]) == canonical(search_call)
    assert canonical(items[2]) == canonical(search_output)
    replayed_call = items[3]
    assert replayed_call["namespace"] == "time" and replayed_call["id"] == "fc_1"
    output = items[4]
    assert output["type"] == "function_call_output" and output["call_id"] == "call_1"
    assert '"timezone": "UTC"' in output["output"]  # the real time server answered


async def test_gpt_before_5_4_gets_the_local_search(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        responses_stream(
            [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
                }
            ]
        )
    )
    await runner(gpt(server, "gpt-5.1"), registry(workspace)).run("Hello.")
    (body,) = server.bodies()
    assert [t["name"] for t in body["tools"]] == [SEARCH_TOOL_NAME]


def test_responses_namespaces_keep_the_order_and_only_group_named_tools() -> None:
    definitions = [{"type": "function", "name": n} for n in ("a", "s1", "b", "s2")]
    out = responses_format.tool_search_definitions(
        definitions, {"s1", "b"}, {"s1": "srv", "s2": "srv"}
    )
    assert [t.get("name") for t in out] == [None, "a", "srv", "b"]
    assert out[2]["tools"] == [
        {"type": "function", "name": "s1", "defer_loading": True},
        {"type": "function", "name": "s2"},
    ]
    assert out[3] == {"type": "function", "name": "b", "defer_loading": True}


def test_a_whole_responses_output_with_search_items_replays_unchanged() -> None:
    output = [
        {
            "type": "tool_search_call",
            "id": "tsc_1",
            "call_id": None,
            "execution": "server",
            "status": "completed",
            "arguments": {"paths": ["crm"]},
        },
        {
            "type": "tool_search_output",
            "id": "tso_1",
            "call_id": None,
            "execution": "server",
            "status": "completed",
            "tools": [{"type": "function", "name": "crm_record_07", "defer_loading": True}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "namespace": "crm",
            "name": "crm_record_07",
            "arguments": '{"id": "7"}',
        },
    ]
    parsed = responses_format.parse_response({"status": "completed", "output": output})
    assert [c.name for c in parsed.calls] == ["crm_record_07"]
    replayed = responses_format.assistant_messages(parsed)
    assert [canonical(item) for item in replayed] == [canonical(item) for item in output]
