"""Runs an agent whose run is kept in a journal (a separate process, for the crash test).

    journal_run_worker.py WORKSPACE start HANG_AT
    journal_run_worker.py WORKSPACE resume [approve|deny]

``start`` asks a scripted model that calls `effect` for e0, e1, e2 in one turn (each call
appends its label to effects.txt; the one labelled HANG_AT hangs after its effect; with
HANG_AT ``model``, the model hangs in its second turn; with ``first``, in its first).
``resume`` goes on with the session's stored run, where the model only answers; with
``approve`` or ``deny`` it decides on the calls the run paused for, and resumes again.
Prints one JSON line per run: its stop reason, output, pending calls, and what the model
was sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolRegistry, tool
from toolbridge.agent import AgentRunner, AssistantMessage, RunResult, ScriptedModel
from toolbridge.journal import SQLiteJournal

WORKSPACE = Path(sys.argv[1])
MODE = sys.argv[2]
ARG = sys.argv[3] if len(sys.argv) > 3 else ""


@tool
async def effect(label: str) -> str:
    """A call with a side effect outside the process."""
    with (WORKSPACE / "effects.txt").open("a") as file:
        file.write(label + "\n")
    if MODE == "start" and label == ARG:
        print("hanging", flush=True)
        await asyncio.sleep(3600)
    return f"did {label}"


def hang(request: object) -> AssistantMessage:
    print("hanging", flush=True)
    time.sleep(3600)
    raise AssertionError("killed before")


def show(result: RunResult, model: ScriptedModel) -> None:
    row = {
        "stop": result.stop_reason.value,
        "output": result.output,
        "pending": [[p.call.id, p.retry] for p in result.pending],
        "requests": model.requests,
    }
    print(json.dumps(row), flush=True)


async def main() -> None:
    journal = SQLiteJournal.in_workspace(WORKSPACE)
    registry = ToolRegistry([effect], context=ToolContext(workspace=WORKSPACE))
    if MODE == "start":
        calls = tuple(ToolCallRequest(f"c{i}", "effect", {"label": f"e{i}"}) for i in range(3))
        second = hang if ARG == "model" else AssistantMessage(text="all done")
        turns = [AssistantMessage(calls=calls), second]
        if ARG == "first":
            turns = [hang]
    else:
        turns = [AssistantMessage(text="all done")]
    model = ScriptedModel(turns)
    policy = ExecutionPolicy(persist_results=False)
    runner = AgentRunner(model, registry, policy=policy, journal=journal, session="work")
    async with journal:
        if MODE == "start":
            show(await runner.run("do the work"), model)
            return
        result = await runner.run(None)
        show(result, model)
        if ARG and result.pending:
            decisions = [
                p.approve(by="tester") if ARG == "approve" else p.deny("I checked: it ran")
                for p in result.pending
            ]
            show(await runner.run(None, decisions=decisions), model)


asyncio.run(main())
