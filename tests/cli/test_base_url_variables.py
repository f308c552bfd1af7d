"""A provider's base-URL variable in the environment is checked as ``--base-url`` is:
one ``Error:`` line naming the variable and what to do, exit 2, before the SDK loads
(it was 'internal error', exit 4, or a connection error to a URL nobody meant)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROVIDERS = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_")


def agent(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDERS)}
    command = [sys.executable, "-m", "toolbridge", "agent", "hi", "--no-skills", *args]
    return subprocess.run(
        [*command, "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("model", "variable", "key"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_BASE_URL", "OPENAI_API_KEY"),
        ("openai-responses:gpt-4.1-mini", "OPENAI_BASE_URL", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-flash", "GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"),
    ],
)
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::1/v1", "Invalid IPv6 URL"),
        ("http://127.0.0.1:99999/v1", "Port out of range"),
        ("localhost:8000/v1", "not an http:// or https:// URL"),
        ("http://127.0.0.1:8000/v 1", "space or control character"),
    ],
)
def test_a_bad_base_url_in_the_environment_is_one_line_naming_the_variable(
    tmp_path: Path, model: str, variable: str, key: str, url: str, reason: str
) -> None:
    done = agent(tmp_path, {variable: url, key: "sk-test"}, "--model", model)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: {variable} {url!r} (from the environment)"), line
    assert reason in line and f"set {variable} to a URL" in line and "unset it" in line, line


def test_the_flag_wins_over_the_variable_and_is_the_one_checked(tmp_path: Path) -> None:
    env = {"OPENAI_BASE_URL": "http://[::1/v1", "OPENAI_API_KEY": "sk-test"}
    done = agent(tmp_path, env, "--base-url", "localhost:8000/v1")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: --base-url 'localhost:8000/v1' is not an http://"), line
    assert "OPENAI_BASE_URL" not in line


def test_an_empty_openai_base_url_is_refused_as_a_url_nobody_can_reach(tmp_path: Path) -> None:
    # The SDK took '' as the URL: 'cannot reach the model server ... running at ?'.
    done = agent(tmp_path, {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: OPENAI_BASE_URL '' (from the environment)"), line
    assert "unset it" in line
