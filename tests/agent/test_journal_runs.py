"""`AgentRunner(journal=...)`: a run kept under a session name in a real SQLite journal.

Its state is saved before a turn's calls run, after each turn and when it stops or
pauses; a process killed mid-run (SIGKILL) resumes it without running a finished call
twice; an interrupted call pauses the run for a retry decision; approvals say who gave
them in the journal.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.agent import (
    AgentRunner,
    ApprovalDecision,
    AssistantMessage,
    PendingCall,
    RunState,
    ScriptedModel,
    StopReason,
    ToolResultsMessage,
    UserMessage,
)
from toolbridge.execution.approval import arguments_digest
from toolbridge.journal import CallJournal, CallKey, CallState, SQLiteJournal
from toolbridge.journal.recorder import CallRecorder

WORKER = Path(__file__).with_name("journal_run_worker.py")
POLICY = ExecutionPolicy(persist_results=False)


# --- a real process killed mid-run -------------------------------------------------------


def worker(workspace: Path, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(WORKER), str(workspace), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def kill_when_hanging(workspace: Path, hang_at: str) -> None:
    process = subprocess.Popen(
        [sys.executable, str(WORKER), str(workspace), "start", hang_at],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "hanging"
    process.send_signal(signal.SIGKILL)
    process.wait()


def effects(workspace: Path) -> list[str]:
    path = workspace / "effects.txt"
    return path.read_text().split() if path.exists() else []


def tool_messages(request: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request if m["role"] == "tool"}


def test_killed_mid_batch_the_run_resumes_and_no_finished_call_runs_twice(
    workspace: Path,
) -> None:
    kill_when_hanging(workspace, "e1")  # e0 finished; e1 had its effect, then the kill
    assert effects(workspace) == ["e0", "e1"]

    paused, done = worker(workspace, "resume", "deny")
    # The turn's calls were saved before they ran: the resumed run answers them first.
    # c0 replays, c2 runs now, c1 (not idempotent) pauses for a retry decision.
    assert paused["stop"] == "approval_required"
    assert paused["pending"] == [["c1", True]]
    assert paused["requests"] == []  # the model was not asked again for the turn
    assert effects(workspace) == ["e0", "e1", "e2"]

    # Denied: the conversation goes on; the model sees every result of the old turn.
    assert (done["stop"], done["output"]) == ("final", "all done")
    sent = done["requests"][0]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool"]
    assert sent[0]["content"] == "do the work"
    results = tool_messages(sent)
    assert results["c0"] == "did e0" and results["c2"] == "did e2"
    assert "interrupted" in results["c1"] and "chose not to run it again" in results["c1"]
    assert "I checked: it ran" in results["c1"]
    assert effects(workspace) == ["e0", "e1", "e2"]  # nothing ran twice


def test_killed_mid_batch_an_approved_retry_runs_the_call_once_more(workspace: Path) -> None:
    kill_when_hanging(workspace, "e1")
    paused, done = worker(workspace, "resume", "approve")
    assert paused["pending"] == [["c1", True]]
    assert done["stop"] == "final"
    assert tool_messages(done["requests"][0]) == {"c0": "did e0", "c1": "did e1", "c2": "did e2"}
    assert effects(workspace) == ["e0", "e1", "e2", "e1"]  # e1 again: the approved retry

    async def stored() -> tuple[Mapping[str, Any] | None, Any]:
        async with SQLiteJournal.in_workspace(workspace) as journal:
            entries = {e.key.call_id: e for e in await journal.entries(session="work")}
            return entries["c1"].approval, await journal.load_run("work")

    approval, run = asyncio.run(stored())
    assert approval is not None
    assert approval["by"] == "tester" and approval["retry"] is True
    assert RunState.from_json(run).conversation[-1].text == "all done"  # type: ignore[union-attr]


def test_killed_while_the_model_answers_the_run_resumes_at_the_turn_boundary(
    workspace: Path,
) -> None:
    kill_when_hanging(workspace, "model")  # every call finished; the model's turn 2 hangs
    assert effects(workspace) == ["e0", "e1", "e2"]
    [done] = worker(workspace, "resume")
    assert (done["stop"], done["output"]) == ("final", "all done")
    [sent] = done["requests"]
    assert tool_messages(sent) == {"c0": "did e0", "c1": "did e1", "c2": "did e2"}
    assert effects(workspace) == ["e0", "e1", "e2"]


def test_killed_while_the_model_answers_the_first_turn_the_prompt_is_kept(
    workspace: Path,
) -> None:
    kill_when_hanging(workspace, "first")  # the model hangs before it answered anything
    [done] = worker(workspace, "resume")
    assert (done["stop"], done["output"]) == ("final", "all done")
    [sent] = done["requests"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["do the work"]


# --- the same in one process ---------------------------------------------------------------


def registry(workspace: Path, log: list[str]) -> ToolRegistry:
    @tool
    def note(text: str) -> str:
        """Write a note (an effect)."""
        log.append(text)
        return f"noted {text}"

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a note (needs approval)."""
        log.append(f"published {text}")
        return f"published {text}"

    return ToolRegistry([note, publish], context=ToolContext(workspace=workspace))


def calls(*items: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(
        calls=tuple(ToolCallRequest(cid, name, {"text": text}) for cid, name, text in items)
    )


async def test_a_session_goes_on_from_its_stored_conversation(workspace: Path) -> None:
    log: list[str] = []
    path = workspace / "journal.sqlite3"
    first = ScriptedModel([calls(("c1", "note", "a")), AssistantMessage(text="Noted.")])
    async with SQLiteJournal(path) as journal:
        runner = AgentRunner(first, registry(workspace, log), policy=POLICY, journal=journal)
        result = await runner.run("note a", session="chat")
        assert await journal.load_run("chat") == result.state.to_json()
    # Another journal object (another process, say): the model repeats the same call.
    second = ScriptedModel([calls(("c1", "note", "a")), AssistantMessage(text="Again.")])
    async with SQLiteJournal(path) as journal:
        runner = AgentRunner(
            second, registry(workspace, log), policy=POLICY, journal=journal, session="chat"
        )
        result = await runner.run("note a again")
    assert result.output == "Again."
    assert log == ["a"]  # replayed from the journal, not run twice
    users = [m["content"] for m in second.requests[0] if m["role"] == "user"]
    assert users == ["note a", "note a again"]
    replayed = result.conversation[-2]
    assert isinstance(replayed, ToolResultsMessage)
    assert replayed.results[0].result.metadata["toolbridge.journal"]["replayed"] is True


async def test_the_turn_is_saved_before_its_calls_run(workspace: Path) -> None:
    seen: list[Any] = []
    journal = SQLiteJournal(workspace / "journal.sqlite3")

    @tool
    async def look() -> str:
        """Reads the stored run while it runs."""
        seen.append(await journal.load_run("s"))
        return "looked"

    model = ScriptedModel(
        [AssistantMessage(calls=(ToolCallRequest("c1", "look", {}),)), AssistantMessage("ok")]
    )
    async with journal:
        runner = AgentRunner(model, [look], policy=POLICY, journal=journal, session="s")
        await runner.run("look")
    [stored] = seen
    state = RunState.from_json(stored)
    assert isinstance(state.conversation[-1], AssistantMessage)
    assert [call.id for call in state.unanswered()] == ["c1"]
    assert state.tool_calls == 1


async def test_a_pause_is_stored_and_resumed_with_a_decision_that_names_who(
    workspace: Path,
) -> None:
    log: list[str] = []
    path = workspace / "journal.sqlite3"
    model = ScriptedModel([calls(("c1", "publish", "x")), AssistantMessage(text="Published.")])
    async with SQLiteJournal(path) as journal:
        runner = AgentRunner(model, registry(workspace, log), policy=POLICY, journal=journal)
        paused = await runner.run("publish x", session="p")
        assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
        stored = RunState.from_json(await journal.load_run("p") or {})
        [pending] = stored.pending
        decision = ApprovalDecision.from_json(pending.approve(by="alice").to_json())
        done = await runner.run(None, session="p", decisions=[decision])
        assert done.stop_reason is StopReason.FINAL and log == ["published x"]
        refused, entry = await journal.entries(session="p")  # asked, then approved and run
        assert (refused.state, refused.error_kind) == (CallState.REFUSED, "approval_required")
    digest = arguments_digest("publish", {"text": "x"})
    assert entry.approval == {"approved": True, "digest": digest, "by": "alice"}


async def test_a_new_prompt_on_a_paused_session_waits_for_the_decisions(
    workspace: Path,
) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("c1", "publish", "x")), AssistantMessage(text="Fine.")])
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        runner = AgentRunner(
            model, registry(workspace, log), policy=POLICY, journal=journal, session="p"
        )
        assert (await runner.run("publish x")).stop_reason is StopReason.APPROVAL_REQUIRED
        again = await runner.run("and then?")  # the turn must be answered first
        assert again.stop_reason is StopReason.APPROVAL_REQUIRED
        assert again.state.prompts == ["and then?"]
        [pending] = again.pending
        done = await runner.run(None, decisions=[pending.deny("not now")])
    assert done.stop_reason is StopReason.FINAL and log == []
    results, prompt = done.conversation[2], done.conversation[3]
    assert isinstance(results, ToolResultsMessage)
    assert "not now" in results.results[0].result.text
    assert prompt == UserMessage("and then?")
    assert done.state.prompts == []


async def interrupted_call(journal: CallJournal, session: str, text: str) -> None:
    """What a process that died while running ``note(text)`` as call c1 leaves behind."""
    args = {"text": text}
    key = CallKey(session, "c1", arguments_digest("note", args))
    await journal.claim(key, "note", args)
    await journal.abandon(key)


@pytest.mark.parametrize("approve", [True, False])
async def test_an_interrupted_call_pauses_the_run_for_a_retry(
    workspace: Path, approve: bool
) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("c1", "note", "a")), AssistantMessage(text="Done.")])
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        await interrupted_call(journal, "r", "a")
        runner = AgentRunner(
            model, registry(workspace, log), policy=POLICY, journal=journal, session="r"
        )
        paused = await runner.run("note a")
        assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
        [pending] = RunState.from_json(json.dumps(paused.state.to_json())).pending
        assert pending.retry and pending.tool_name == "note"
        decision = pending.approve(by="ops") if approve else pending.deny("it did run")
        done = await runner.run(paused.state, decisions=[decision])
        [entry] = await journal.entries(session="r")
    assert done.stop_reason is StopReason.FINAL
    results = done.conversation[2]
    assert isinstance(results, ToolResultsMessage)
    if approve:
        assert log == ["a"] and results.results[0].result.text == "noted a"
        assert entry.attempt == 2 and entry.approval is not None
        assert entry.approval["by"] == "ops" and entry.approval["retry"] is True
    else:
        assert log == []
        assert results.results[0].result.error_kind == "interrupted"
        assert "(it did run)" in results.results[0].result.text


async def test_an_executor_approval_names_who_gave_it(workspace: Path) -> None:
    log: list[str] = []
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        executor = ToolExecutor(registry(workspace, log), POLICY, journal=journal)
        batch = [
            ToolCallRequest("c1", "publish", {"text": "x"}),
            ToolCallRequest("c2", "publish", {"text": "y"}),
            ToolCallRequest("c3", "note", {"text": "z"}),
        ]
        first = await executor.run(batch)
        executor.approve(first[0], by="hook:audit")
        executor.approve(first[1])
        await executor.run(batch[:2])
        entries = {e.key.call_id: e.approval for e in await journal.entries()}
    assert entries["c1"] is not None and entries["c1"]["by"] == "hook:audit"
    assert entries["c2"] is not None and entries["c2"]["by"] == "decision"
    assert entries["c3"] is None  # it needed no approval: nothing is stored
    assert log == ["z", "published x", "published y"]


# --- clear errors --------------------------------------------------------------------------


async def test_misuse_is_a_clear_error(workspace: Path) -> None:
    model = ScriptedModel([AssistantMessage(text="Hi.")])
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        with pytest.raises(ValueError, match="not both"):
            AgentRunner(model, journal=journal, executor_factory=ToolExecutor)
        with pytest.raises(ValueError, match="give journal= too"):
            AgentRunner(model, session="s")
        with pytest.raises(ValueError, match="names a run kept in a journal"):
            await AgentRunner(model).run("hi", session="s")
        runner = AgentRunner(model, journal=journal, session="s")
        with pytest.raises(ValueError, match="no run is stored for session 's'"):
            await runner.run(None)
        await runner.run("hi")
        with pytest.raises(ValueError, match="nothing to resume; send a prompt"):
            await runner.run(None)


def test_pending_retry_and_decision_by_survive_json() -> None:
    call = ToolCallRequest("c1", "note", {"text": "a"})
    pending = PendingCall(call, "note", {"text": "a"}, arguments_digest("note", {"text": "a"}))
    pending = PendingCall(call, pending.tool_name, pending.arguments, pending.digest, True)
    state = RunState([UserMessage("x"), AssistantMessage(calls=(call,))], [pending])
    state.prompts.append("next")
    data = state.to_json()
    assert RunState.from_json(data).pending == [pending]
    assert RunState.from_json(data).prompts == ["next"]
    with pytest.raises(ValueError, match="'prompts' must be a list of strings"):
        RunState.from_json({**data, "prompts": "next"})
    data["pending"][0]["retry"] = "false"
    with pytest.raises(ValueError, match="'retry' must be true or false"):
        RunState.from_json(data)
    decision = pending.deny("no", by="user:bob")
    assert ApprovalDecision.from_json(decision.to_json()) == decision
    legacy = {"call_id": "c1", "digest": pending.digest, "approved": True}
    assert ApprovalDecision.from_json(legacy).by == "decision"


async def test_an_approved_call_that_ran_before_a_crash_is_not_asked_about_again(
    workspace: Path,
) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("c1", "publish", "x")), AssistantMessage(text="Published.")])
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        runner = AgentRunner(model, registry(workspace, log), policy=POLICY, journal=journal)
        paused = await runner.run("publish x", session="p")
        [pending] = paused.pending
        # The process that resumed it got the approval, ran the call, and died before the
        # turn's results were saved: the journal holds the call, the stored run the pause.
        dead = ToolExecutor(registry(workspace, log), POLICY, journal=CallRecorder(journal, "p"))
        dead.approve(pending.request(), by="alice")
        await dead.run([pending.call])
        assert log == ["published x"]
        done = await runner.run(None, session="p")  # no decision given
        refused, entry = await journal.entries(session="p")  # asked, then approved and run
        assert refused.state is CallState.REFUSED
    assert done.stop_reason is StopReason.FINAL  # nobody was asked again
    assert log == ["published x"]  # replayed, not run again
    results = done.conversation[2]
    assert isinstance(results, ToolResultsMessage)
    assert results.results[0].result.text == "published x"
    assert entry.approval is not None and entry.approval["by"] == "alice"


async def test_a_new_prompt_after_a_crash_mid_turn_answers_the_turn_first(
    workspace: Path,
) -> None:
    log: list[str] = []
    turn = calls(("c1", "note", "a"), ("c2", "publish", "b"))
    crashed = RunState([UserMessage("note a, publish b"), turn], tool_calls=2)
    model = ScriptedModel([AssistantMessage(text="OK.")])
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        await journal.save_run("m", crashed.to_json())  # saved before the calls ran
        runner = AgentRunner(
            model, registry(workspace, log), policy=POLICY, journal=journal, session="m"
        )
        paused = await runner.run("what now?")
        assert paused.stop_reason is StopReason.APPROVAL_REQUIRED and log == ["a"]
        [pending] = paused.pending
        done = await runner.run(None, decisions=[pending.approve(by="bob")])
    assert done.stop_reason is StopReason.FINAL and log == ["a", "published b"]
    roles = [m["role"] for m in model.requests[0]]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    assert model.requests[0][-1]["content"] == "what now?"
    results = done.conversation[2]
    assert isinstance(results, ToolResultsMessage)
    assert [r.result.text for r in results.results] == ["noted a", "published b"]


def test_to_json_with_a_cache_converts_each_message_once() -> None:
    state = RunState([UserMessage("a"), AssistantMessage(text="b")])
    cache: dict[int, Any] = {}
    first = state.to_json(cache=cache)
    state.conversation.append(UserMessage("c"))
    second = state.to_json(cache=cache)
    assert second == state.to_json()  # the same data as without a cache
    assert second["conversation"][0] is first["conversation"][0]  # not converted again
    assert len(cache) == 3


async def test_two_runs_of_one_session_at_once_the_second_is_refused(tmp_path: Path) -> None:
    # Each would save its turns over the other's: the second is refused, the first goes on.
    from toolbridge.journal import SessionInUse

    asked, gate = asyncio.Event(), asyncio.Event()

    class Waiting(ScriptedModel):
        async def stream(self, request: Any) -> AsyncIterator[Any]:
            asked.set()
            await gate.wait()
            async for event in super().stream(request):
                yield event

    model = Waiting([AssistantMessage(text="first")])
    async with SQLiteJournal(tmp_path / "j.sqlite3") as journal:
        runner = AgentRunner(model, [], journal=journal, session="s")
        first = asyncio.ensure_future(runner.run("hello"))
        await asked.wait()  # the first run is asking its model
        with pytest.raises(SessionInUse):
            await AgentRunner(ScriptedModel([]), [], journal=journal, session="s").run("hi")
        gate.set()
        assert (await first).output == "first"
        again = AgentRunner(ScriptedModel([AssistantMessage(text="next")]), [], journal=journal)
        assert (await again.run("more", session="s")).output == "next"  # free once it ended
