"""``toolbridge agent --session`` refuses a link planted in ``.toolbridge/`` with one
``Error:`` line, and writes nothing through it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def agent_session(workspace: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "HOME": str(workspace.parent)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *sys.path])
    command = [sys.executable, "-m", "toolbridge", "agent", "hello", "--session", "s"]
    command += ["--model", "openai:gpt-test", "--base-url", "http://127.0.0.1:9/v1"]
    command += ["--workspace", str(workspace), "--no-skills"]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.parametrize("name", ["agent-sessions.lock", "journal.sqlite3"])
def test_a_planted_link_is_one_error_line(workspace: Path, tmp_path: Path, name: str) -> None:
    victim = tmp_path / "victim"
    (workspace / ".toolbridge").mkdir()
    (workspace / ".toolbridge" / name).symlink_to(victim)
    done = agent_session(workspace)
    assert done.returncode == 3, done.stderr
    assert "symbolic link" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not victim.exists() and not victim.with_name("victim-owners").exists()
