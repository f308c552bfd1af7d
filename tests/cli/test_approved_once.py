"""An approved call is shown once, in every output mode: with ``--yes`` the run pauses
on it and goes on, and that pause (its ``pending_approval`` outcome, the paused run's
summary) is not shown, in ``--json`` too, where a consumer read it as a failure."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.scripted_server import ScriptedServer, openai_chat_stream, serve
from tests.agent.test_cli import agent


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


WRITES = [
    ("c1", "write_file", '{"path": "b.txt", "content": "beta"}'),
    ("c2", "read_file", '{"path": "a.txt"}'),
    ("c3", "write_file", '{"path": "c.txt", "content": "gamma"}'),
]


def test_json_with_yes_shows_each_approved_call_once(
    server: ScriptedServer, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    server.add(openai_chat_stream(calls=WRITES), openai_chat_stream(text="Written."))
    done = agent(server.url, tmp_path, "Write b.txt and c.txt", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b.txt").read_text() == "beta"
    assert (tmp_path / "c.txt").read_text() == "gamma"
    events = [json.loads(line) for line in done.stdout.splitlines()]
    started = Counter(e["id"] for e in events if e["type"] == "tool_started")
    finished = [e for e in events if e["type"] == "tool_finished"]
    assert started == {"c1": 1, "c2": 1, "c3": 1}, events
    assert sorted((e["id"], e["status"]) for e in finished) == [
        ("c1", "ok"),
        ("c2", "ok"),
        ("c3", "ok"),
    ], finished
    for call_id in started:  # each start comes before its own outcome
        kinds = [e["type"] for e in events if e.get("id") == call_id]
        assert kinds.index("tool_started") < kinds.index("tool_finished"), kinds
    [run_finished] = [e for e in events if e["type"] == "run_finished"]
    assert run_finished["stop_reason"] == "final" and run_finished["pending"] == []
    assert events[-1] is run_finished


def test_json_without_yes_shows_the_pause_it_stops_on(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # Nobody answers: the pause is the run's end, and --json says so.
    server.add(openai_chat_stream(calls=WRITES[:1]))
    done = agent(server.url, tmp_path, "Write b.txt", "--json")
    assert done.returncode == 1, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [finished] = [e for e in events if e["type"] == "tool_finished"]
    assert finished["status"] == "pending_approval"
    [run_finished] = [e for e in events if e["type"] == "run_finished"]
    assert run_finished["stop_reason"] == "approval_required"
    assert [p["id"] for p in run_finished["pending"]] == ["c1"]
    assert not (tmp_path / "b.txt").exists()
