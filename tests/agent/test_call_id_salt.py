"""Call ids toolbridge generates (Ollama and Gemini send none) are unique to a run: a
journal answers a known id with its stored result, so two conversations must never share
one, while a resumed run must generate the same ids again."""

from __future__ import annotations

import json
from pathlib import Path

import ollama
import pytest
from tests.agent.scripted_server import Reply, ScriptedServer, ollama_stream

from toolbridge import ExecutionPolicy, ToolContext, ToolRegistry, tool
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    Message,
    RateLimitError,
    RunState,
    StopReason,
    ToolResultsMessage,
)
from toolbridge.agent.adapters import OllamaModel
from toolbridge.execution.executor import ToolExecutor
from toolbridge.journal import SQLiteJournal


def call_ids(conversation: list[Message]) -> list[str]:
    return [c.id for m in conversation if isinstance(m, AssistantMessage) for c in m.calls]


async def test_two_conversations_run_the_same_call_twice_and_a_resume_keeps_its_ids(
    server: ScriptedServer, workspace: Path
) -> None:
    ran: list[str] = []

    @tool
    async def send_mail(to: str) -> str:
        """A side effect: counts its runs."""
        ran.append(to)
        return f"sent to {to} (#{len(ran)})"

    policy = ExecutionPolicy(persist_results=False)
    registry = ToolRegistry([send_mail], context=ToolContext(workspace=workspace))
    call = ollama_stream(calls=[("send_mail", {"to": "ann"})])
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        runner = AgentRunner(
            OllamaModel("qwen3", client=ollama.AsyncClient(host=server.url)),
            registry,
            policy=policy,
            executor_factory=lambda r: ToolExecutor(r, policy, journal=journal),
        )
        server.add(call, ollama_stream(text="Sent."))
        first = await runner.run("Mail Ann.")
        server.add(call, ollama_stream(text="Sent."))
        second = await runner.run("Mail Ann.")
        assert ran == ["ann", "ann"]  # one run per conversation, not one answered from the other
        assert first.state.id_salt != second.state.id_salt
        assert set(call_ids(first.conversation)).isdisjoint(call_ids(second.conversation))

        # A run that stops after its call ran, saved and resumed from the turn before it
        # (as after a crash): the model sends the same call, which gets the same id, so
        # the journal answers it with the stored result instead of running it again.
        server.add(call, Reply(429, {"error": "too many requests"}))
        with pytest.raises(RateLimitError) as stopped:
            await runner.run("Mail Ann.")
        assert ran == ["ann", "ann", "ann"]
        saved = RunState.from_json(json.dumps(stopped.value.state.to_json()))
        assert saved.id_salt == stopped.value.state.id_salt
        before_call = RunState(saved.conversation[:1], id_salt=saved.id_salt)
        server.add(call, ollama_stream(text="Sent."))
        resumed = await runner.run(before_call)
    assert resumed.stop_reason is StopReason.FINAL
    assert call_ids(resumed.conversation) == call_ids(saved.conversation)
    assert ran == ["ann", "ann", "ann"]
    [results] = [m for m in resumed.conversation if isinstance(m, ToolResultsMessage)]
    assert results.results[0].result.text == "sent to ann (#3)"  # the stored answer


def test_a_state_saved_before_salts_keeps_its_ids() -> None:
    data = RunState([]).to_json()
    del data["id_salt"]
    assert RunState.from_json(data).id_salt == ""
