"""`AgentRunner(tool_search=...)`: deferred definitions, a model that searches and then
calls what it found, against the real ``openai`` SDK and a scripted 127.0.0.1 server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from tests.agent import sample_tools
from tests.agent.scripted_server import ScriptedServer, openai_chat_stream

from toolbridge import ExecutionPolicy, Tool, ToolContext, ToolRegistry, tool_parameters
from toolbridge.agent import AgentRunner, RunState, StopReason
from toolbridge.agent.adapters import OpenAIChatModel
from toolbridge.core.tool_search import SEARCH_TOOL_NAME, DeferralPolicy


@tool_parameters({"type": "object", "properties": {"id": {"type": "string"}}})
class CrmTool(Tool):
    async def execute(self, **kwargs: Any) -> str:
        return f"{self.name} ran"


def crm(number: int) -> Tool:
    made = CrmTool()
    made.name = f"crm_record_{number:02d}"
    made.description = f"Read CRM record number {number} of the sales pipeline."
    return made


def runner(server: ScriptedServer, workspace: Path, **options: Any) -> AgentRunner:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
    tools = [sample_tools.get_weather, sample_tools.write_note, *(crm(n) for n in range(40))]
    registry = ToolRegistry(tools, context=ToolContext(workspace=workspace))
    options.setdefault("tool_search", True)
    return AgentRunner(
        OpenAIChatModel("gpt-test", client=client),
        registry,
        policy=ExecutionPolicy(persist_results=False),
        **options,
    )


def sent(body: dict[str, Any]) -> list[str]:
    return [item["function"]["name"] for item in body.get("tools", [])]


def search(call_id: str, query: str, limit: int = 1) -> tuple[str, str, str]:
    return (call_id, SEARCH_TOOL_NAME, json.dumps({"query": query, "limit": limit}))


@pytest.mark.parametrize("eager", [False, True])
async def test_a_model_searches_then_calls_what_it_found(
    server: ScriptedServer, workspace: Path, eager: bool
) -> None:
    server.add(
        openai_chat_stream(calls=[search("s1", "weather in a city")]),
        openai_chat_stream(calls=[("w1", "get_weather", '{"city": "Paris"}')]),
        openai_chat_stream(text="Sunny in Paris."),
    )
    # eager: the read-only search starts while the model still streams its turn
    result = await runner(server, workspace, eager_tools=eager).run("Weather in Paris?")

    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in Paris."
    first, second, third = server.bodies()
    assert sent(first) == [SEARCH_TOOL_NAME]  # 42 tools are past the policy's 30
    assert sent(second) == [SEARCH_TOOL_NAME, "get_weather"]  # found: at the end
    assert second["tools"][0] == first["tools"][0]  # the cached prefix is unchanged
    assert sent(third) == sent(second)  # it stays active
    found = json.loads(next(m for m in second["messages"] if m["role"] == "tool")["content"])
    assert found["tools"][0]["name"] == "get_weather"
    assert found["tools"][0]["parameters"]["properties"]["city"]["type"] == "string"
    assert next(m for m in third["messages"] if m.get("tool_call_id") == "w1")["content"] == (
        "Sunny in Paris"
    )
    assert result.state.active_tools == ["get_weather"]


async def test_a_deferred_tool_called_by_name_without_a_search_runs(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        openai_chat_stream(calls=[("r1", "crm_record_07", '{"id": "7"}')]),
        openai_chat_stream(text="Done."),
    )
    result = await runner(server, workspace).run("Read record 7.")
    assert result.stop_reason is StopReason.FINAL
    first, second = server.bodies()
    assert sent(first) == sent(second) == [SEARCH_TOOL_NAME]  # a call is not a search
    answer = next(m for m in second["messages"] if m["role"] == "tool")
    assert answer["content"] == "crm_record_07 ran"


async def test_a_resumed_run_sends_the_tools_it_found(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        openai_chat_stream(calls=[search("s1", "write a note file")]),
        openai_chat_stream(calls=[("n1", "write_note", '{"name": "a.txt", "text": "hi"}')]),
    )
    paused = await runner(server, workspace).run("Note it.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    stored = json.dumps(paused.state.to_json())
    assert json.loads(stored)["active_tools"] == ["write_note"]

    server.add(
        openai_chat_stream(calls=[search("s2", "crm record 3")]),
        openai_chat_stream(text="Noted."),
    )
    state = RunState.from_json(stored)  # another runner, as another process would
    resumed = await runner(server, workspace).run(state, decisions=[paused.pending[0].approve()])
    assert resumed.stop_reason is StopReason.FINAL
    assert (workspace / "a.txt").read_text() == "hi\n"
    after_resume, last = server.bodies()[2:]
    assert sent(after_resume) == [SEARCH_TOOL_NAME, "write_note"]
    assert sent(last) == [SEARCH_TOOL_NAME, "write_note", "crm_record_03"]
    assert resumed.state.active_tools == ["write_note", "crm_record_03"]


async def test_without_tool_search_every_definition_is_sent(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(openai_chat_stream(text="Hi."))
    await runner(server, workspace, tool_search=False).run("Hello.")
    assert len(sent(server.bodies()[0])) == 42 and SEARCH_TOOL_NAME not in sent(server.bodies()[0])


async def test_always_loaded_tools_and_a_small_set_stay_sent(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(openai_chat_stream(text="Hi."), openai_chat_stream(text="Hi."))
    policy = DeferralPolicy(always_loaded=frozenset({"get_weather"}))
    await runner(server, workspace, tool_search=policy).run("Hello.")
    assert sent(server.bodies()[0]) == ["get_weather", SEARCH_TOOL_NAME]
    await runner(server, workspace, tool_search=DeferralPolicy(max_tools=50)).run("Hello.")
    assert len(sent(server.bodies()[1])) == 42  # under the size: nothing deferred


def test_active_tools_round_trip_and_a_bad_one_is_a_value_error() -> None:
    state = RunState([], active_tools=["a", "b"])
    assert RunState.from_json(json.dumps(state.to_json())).active_tools == ["a", "b"]
    assert state.copy().active_tools == ["a", "b"] and state.copy().active_tools is not (
        state.active_tools
    )
    data = state.to_json()
    del data["active_tools"]  # a state saved before tool search
    assert RunState.from_json(data).active_tools == []
    for bad in ("a", ["a", 1], {"a": 1}):
        with pytest.raises(ValueError, match="'active_tools' must be a list of tool names"):
            RunState.from_json({**state.to_json(), "active_tools": bad})


def test_a_bad_tool_search_option_is_a_type_error(server: ScriptedServer, workspace: Path) -> None:
    with pytest.raises(TypeError, match="tool_search must be True, False or a DeferralPolicy"):
        runner(server, workspace, tool_search=8)


async def test_a_journaled_session_resumes_with_the_tools_it_found(
    server: ScriptedServer, workspace: Path
) -> None:
    from toolbridge.journal import SQLiteJournal

    server.add(
        openai_chat_stream(calls=[search("s1", "write a note file")]),
        openai_chat_stream(calls=[("n1", "write_note", '{"name": "b.txt", "text": "yo"}')]),
    )
    path = workspace / "journal.sqlite3"
    async with SQLiteJournal(path) as journal:
        paused = await runner(server, workspace, journal=journal).run("Note.", session="s")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED

    server.add(openai_chat_stream(text="Noted."))
    async with SQLiteJournal(path) as journal:  # another journal object, as after a restart
        stored = await journal.load_run("s")
        assert stored is not None and stored["active_tools"] == ["write_note"]
        again = runner(server, workspace, journal=journal)
        done = await again.run(None, session="s", decisions=[paused.pending[0].approve()])
    assert done.stop_reason is StopReason.FINAL
    assert sent(server.bodies()[-1]) == [SEARCH_TOOL_NAME, "write_note"]
    assert (workspace / "b.txt").read_text() == "yo\n"
